// Command manager is a controller-runtime manager with one controller, with ctrlscope added: the
// lines marked "ctrlscope:". Its Reconciler keeps a ConfigMap "<deployment>-replicas" per Deployment
// saying how many replicas the Deployment wants; a failed write is retried with backoff.
// README's "Go controllers" section shows this very file (a test keeps them equal).
//
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/manager --kubeconfig ~/.kube/config --allow-writes
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/ctrlruntime"
)

const name = "replicas-summary" // the controller's name, and the worker's

// Summary keeps a <deployment>-replicas ConfigMap per Deployment, owned by it.
type Summary struct{ client.Client }

// Reconcile creates or updates the Deployment's ConfigMap; gone Deployments' go with garbage collection.
func (r *Summary) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var d appsv1.Deployment
	if err := r.Get(ctx, req.NamespacedName, &d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-replicas"}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"replicas": strconv.Itoa(int(replicas))}
		return controllerutil.SetControllerReference(&d, cm, r.Scheme())
	})
	return reconcile.Result{}, err // an error: retried with the rate limiter's backoff
}

func main() {
	allowWrites := flag.Bool("allow-writes", false, "write to a cluster that is not ctrlscope's simulated one")
	metricsAddr := flag.String("metrics-bind-address", "0", "serve /metrics here, e.g. :8080 (\"0\": off)")
	flag.Parse() // controller-runtime registers --kubeconfig
	ctrl.SetLogger(zap.New())
	if err := run(*allowWrites, *metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run(allowWrites bool, metricsAddr string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// ctrlscope: a publisher to the dashboard's Redis (REDIS_URL, CTRLSCOPE_PREFIX), this worker's telemetry.
	pub, err := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{})
	if err != nil {
		return err
	}
	pub.Start()
	defer pub.Stop(5 * time.Second) // flushes what is left, after the manager stopped
	tel := ctrlscope.NewTelemetry(pub, name, ctrlscope.TelemetryOptions{})
	// ctrlscope: read-only anywhere but ctrlscope's simulated cluster unless --allow-writes. Then
	// WrapConfig, so every request is observed; both before ctrl.NewManager.
	if cfg, err = clientgo.GuardWrites(tel, cfg, allowWrites); err != nil {
		return err
	}
	cfg = clientgo.WrapConfig(tel, cfg)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: metricsAddr}})
	if err != nil {
		return err
	}
	// ctrlscope: controller-runtime's metrics sampled once a second (no NewMetricsSampler needed
	// here), the cluster, leader election, the watched informers.
	inst, err := ctrlruntime.Instrument(mgr, tel, ctrlruntime.Options{})
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named(name).
		WithOptions(inst.ControllerOptions(name, controller.Options{})).     // ctrlscope: per-key queue state
		Watches(inst.For(name, &appsv1.Deployment{})).                       // ctrlscope: For(&appsv1.Deployment{}), observed
		Watches(inst.Owns(name, &appsv1.Deployment{}, &corev1.ConfigMap{})). // ctrlscope: Owns(&corev1.ConfigMap{}), observed
		Complete(inst.Reconciler(name, &Summary{Client: mgr.GetClient()}))   // ctrlscope: attempts, results, writes
	if err != nil {
		tel.SetupError(name, err.Error())
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
