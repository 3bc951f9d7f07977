// Command fidelity is the fidelity scenario's Reconciler in real controller-runtime, observed by
// ctrlscope: the twin of controllers/examples/fidelity.py, so that the telemetry of ctrlscope's
// Python runtime and of upstream can be compared key by key (tests/golang/test_fidelity.py).
//
// It reconciles the ConfigMaps of one namespace and does nothing but take time and fail on purpose:
// every Reconcile takes --work; a ConfigMap annotated ctrlscope.dev/fail-first: "N" fails its first
// N reconciles (counted in memory per key), then succeeds. Everything else is controller-runtime's
// defaults: the priority queue, its rate limiter (5 ms doubling per key), one worker.
//
//	fidelity [--kubeconfig PATH] [--worker-name go-fidelity] [--namespace fidelity] [--work 50ms]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/cmd/internal/samples"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/ctrlruntime"
)

const (
	controllerName = "fidelity"
	failFirst      = "ctrlscope.dev/fail-first"
)

type reconciler struct {
	client.Client
	work     time.Duration
	mu       sync.Mutex
	attempts map[string]int
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	time.Sleep(r.work)
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	n, _ := strconv.Atoi(cm.Annotations[failFirst])
	key := req.String()
	r.mu.Lock()
	r.attempts[key]++
	attempt := r.attempts[key]
	r.mu.Unlock()
	if attempt <= n {
		return reconcile.Result{}, fmt.Errorf("injected failure %d of %d for %s", attempt, n, key)
	}
	return reconcile.Result{}, nil
}

func main() {
	if flag.Lookup("kubeconfig") == nil { // controller-runtime registers it when imported
		flag.String("kubeconfig", "", "path to a kubeconfig (empty: in-cluster config)")
	}
	worker := flag.String("worker-name", "go-fidelity", "the worker's name on the dashboard")
	namespace := flag.String("namespace", "fidelity", "the namespace whose ConfigMaps are reconciled")
	work := flag.Duration("work", 50*time.Millisecond, "how long each Reconcile takes")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if err := run(flag.Lookup("kubeconfig").Value.String(), *worker, *namespace, *work); err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, worker, namespace string, work time.Duration) error {
	cfg, tel, stopPublisher, err := samples.Observed(kubeconfig, worker, false)
	if err != nil {
		return err
	}
	defer stopPublisher()
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
	r := &reconciler{Client: mgr.GetClient(), work: work, attempts: map[string]int{}}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		WithOptions(inst.ControllerOptions(controllerName, controller.Options{})).
		Watches(inst.For(controllerName, &corev1.ConfigMap{})).
		Complete(inst.Reconciler(controllerName, r))
	if err != nil {
		tel.SetupError(controllerName, err.Error())
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
