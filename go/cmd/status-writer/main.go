// Command status-writer is a controller-runtime reconciler that writes its status every time --
// the hot loop upstream users keep reporting (controller-runtime #2831, #1711, operator-sdk #3332):
// each status write is an update event of the watched object, which enqueues the same key again.
// It is here to show ctrlscope's provenance and hot_loop detection on a real program
// (tests/golang/test_go_detections.py) and the OpenTelemetry spans of the same attempts
// (tests/golang/test_go_otel.py, with OTEL_EXPORTER_OTLP_ENDPOINT or CTRLSCOPE_OTLP_ENDPOINT set).
//
// It reconciles the Jobs of one namespace (the simulator runs no Job controller: every update of
// one is this program's or the test's). Each Reconcile sets a "Reconciled" condition whose message
// says when, and writes it through the status subresource: a change every time, so every write
// comes back. --max-writes bounds the writes per key so that the loop ends; a Job annotated
// ctrlscope.dev/fail-first: "N" fails its first N reconciles first (retries, with the rate
// limiter's delays). --predicate generation watches with predicate.GenerationChangedPredicate{},
// the usual fix: a status write does not change metadata.generation, so its event is dropped.
//
//	status-writer [--kubeconfig PATH] [--worker-name go-status-writer] [--namespace status-writer]
//	              [--predicate none|generation] [--max-writes 8]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/cmd/internal/samples"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/ctrlruntime"
)

const (
	controllerName = "status-writer"
	failFirst      = "ctrlscope.dev/fail-first"
	condition      = batchv1.JobConditionType("Reconciled")
)

type reconciler struct {
	client.Client
	maxWrites int
	mu        sync.Mutex
	attempts  map[string]int
	writes    map[string]int
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var job batchv1.Job
	if err := r.Get(ctx, req.NamespacedName, &job); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	key := req.String()
	n, _ := strconv.Atoi(job.Annotations[failFirst])
	r.mu.Lock()
	r.attempts[key]++
	attempt, writes := r.attempts[key], r.writes[key]
	r.mu.Unlock()
	if attempt <= n {
		return reconcile.Result{}, fmt.Errorf("injected failure %d of %d for %s", attempt, n, key)
	}
	if writes >= r.maxWrites {
		return reconcile.Result{}, nil
	}
	// The bug: status says when it was last reconciled, so every write changes it.
	now := metav1.Now()
	setCondition(&job.Status, batchv1.JobCondition{Type: condition, Status: corev1.ConditionTrue,
		LastProbeTime: now, LastTransitionTime: now, Reason: "Reconciled",
		Message: "reconciled at " + time.Now().UTC().Format(time.RFC3339Nano)})
	if err := r.Status().Update(ctx, &job); err != nil {
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	r.writes[key]++
	r.mu.Unlock()
	return reconcile.Result{}, nil
}

func setCondition(s *batchv1.JobStatus, c batchv1.JobCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			s.Conditions[i] = c
			return
		}
	}
	s.Conditions = append(s.Conditions, c)
}

func main() {
	if flag.Lookup("kubeconfig") == nil { // controller-runtime registers it when imported
		flag.String("kubeconfig", "", "path to a kubeconfig (empty: in-cluster config)")
	}
	worker := flag.String("worker-name", "go-status-writer", "the worker's name on the dashboard")
	namespace := flag.String("namespace", "status-writer", "the namespace whose Jobs are reconciled")
	pred := flag.String("predicate", "none", "the watch's predicate: none, or generation (GenerationChangedPredicate)")
	maxWrites := flag.Int("max-writes", 8, "status writes per key at most (then the loop ends)")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if *pred != "none" && *pred != "generation" {
		fmt.Fprintln(os.Stderr, "status-writer: --predicate is none or generation")
		os.Exit(2)
	}
	if err := run(flag.Lookup("kubeconfig").Value.String(), *worker, *namespace, *pred == "generation", *maxWrites); err != nil {
		fmt.Fprintln(os.Stderr, "status-writer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, worker, namespace string, generationOnly bool, maxWrites int) error {
	cfg, tel, stop, err := samples.Observed(kubeconfig, worker, false)
	if err != nil {
		return err
	}
	defer stop()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	if err != nil {
		return err
	}
	inst, err := ctrlruntime.Instrument(mgr, tel, ctrlruntime.Options{})
	if err != nil {
		return err
	}
	var predicates []predicate.Predicate
	if generationOnly {
		predicates = append(predicates, predicate.GenerationChangedPredicate{})
	}
	r := &reconciler{Client: mgr.GetClient(), maxWrites: maxWrites, attempts: map[string]int{}, writes: map[string]int{}}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		WithOptions(inst.ControllerOptions(controllerName, controller.Options{})).
		Watches(inst.For(controllerName, &batchv1.Job{}, predicates...)).
		Complete(inst.Reconciler(controllerName, r))
	if err != nil {
		tel.SetupError(controllerName, err.Error())
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
