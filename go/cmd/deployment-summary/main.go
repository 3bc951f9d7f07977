// Command deployment-summary is ctrlscope's DeploymentSummaryReconciler
// (controllers/examples/deployments.py) written with controller-runtime, observed by ctrlscope.
//
// It keeps one ConfigMap per Deployment, "<name>-summary", saying what the Deployment currently
// wants (data: replicas, images, generation), owned by the Deployment so that garbage collection
// removes it. It watches Deployments (EnqueueRequestForObject with GenerationChangedPredicate) and
// the ConfigMaps it owns (EnqueueRequestForOwner), so an edited or deleted summary is repaired. A
// failed write returns the error: controller-runtime retries it with exponential backoff until it
// converges.
//
// The lines marked "ctrlscope:" are all a user adds to a controller-runtime program.
//
//	deployment-summary [--kubeconfig PATH] [--worker-name go-summary] [--leader-elect]
//	    [--leader-election-namespace default] [--metrics-bind-address 0] [--summary-suffix -summary]
//
// REDIS_URL (redis://127.0.0.1:6379/0) and CTRLSCOPE_PREFIX ("ctrlscope:") say where the dashboard
// reads. Without --kubeconfig the program runs in a pod (in-cluster config).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/cmd/internal/samples"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/ctrlruntime"
)

const (
	controllerName = "deployment-summary"
	managedBy      = "ctrlscope-example"
	leaseName      = "deployment-summary"
)

// summarySuffix names the summaries (--summary-suffix): the demo runs this beside the Python
// reconciler on the same Deployments, each writing its own ConfigMaps, so they never fight.
var summarySuffix = "-summary"

// DeploymentSummaryReconciler keeps <deployment>-summary ConfigMaps in line with their Deployments.
type DeploymentSummaryReconciler struct {
	client.Client
}

// Reconcile reads the Deployment from the cache and creates or updates its summary.
func (r *DeploymentSummaryReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var d appsv1.Deployment
	if err := r.Get(ctx, req.NamespacedName, &d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // gone: garbage collection deletes the summary
	}
	if d.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	desired := summaryFor(&d)
	var current corev1.ConfigMap
	err := r.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: desired.Name}, &current)
	if apierrors.IsNotFound(err) {
		if err := controllerutil.SetControllerReference(&d, desired, r.Scheme()); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.Create(ctx, desired)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if equalData(current.Data, desired.Data) {
		return reconcile.Result{}, nil
	}
	current.Data = desired.Data
	return reconcile.Result{}, r.Update(ctx, &current) // 409 on a race: retried
}

func summaryFor(d *appsv1.Deployment) *corev1.ConfigMap {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	images := make([]string, 0, len(d.Spec.Template.Spec.Containers))
	for _, c := range d.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + summarySuffix, Namespace: d.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": managedBy}},
		Data: map[string]string{"replicas": strconv.Itoa(int(replicas)), "images": strings.Join(images, ","),
			"generation": strconv.FormatInt(d.Generation, 10)},
	}
}

func equalData(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func main() {
	// controller-runtime's client/config package registers --kubeconfig itself (imported by ctrl):
	// read that flag rather than define a second one.
	if flag.Lookup("kubeconfig") == nil {
		flag.String("kubeconfig", "", "path to a kubeconfig (empty: in-cluster config)")
	}
	workerName := flag.String("worker-name", "go-summary", "the worker's name on the dashboard")
	leaderElect := flag.Bool("leader-elect", false, "run only while holding the Lease")
	leNamespace := flag.String("leader-election-namespace", "default", "the Lease's namespace")
	metricsAddr := flag.String("metrics-bind-address", "0", "serve /metrics here (\"0\": off)")
	allowWrites := flag.Bool("allow-writes", false, "write to a cluster that is not ctrlscope's simulated one (default: read-only there)")
	flag.StringVar(&summarySuffix, "summary-suffix", summarySuffix, "the summaries are named <deployment><suffix>")
	flag.Parse()
	if summarySuffix == "" {
		fmt.Fprintln(os.Stderr, "deployment-summary: --summary-suffix must not be empty (it would overwrite the Deployment's name)")
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New())
	kubeconfig := flag.Lookup("kubeconfig").Value.String()
	if err := run(kubeconfig, *workerName, *leaderElect, *leNamespace, *metricsAddr, *allowWrites); err != nil {
		fmt.Fprintln(os.Stderr, "deployment-summary:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, workerName string, leaderElect bool, leNamespace, metricsAddr string, allowWrites bool) error {
	cfg, err := samples.RestConfig(kubeconfig)
	if err != nil {
		return err
	}
	// What controller-runtime's own config loader (ctrl.GetConfig) sets: client-go's default of 5
	// requests/s would make every retry wait for the client's throttle.
	cfg.QPS, cfg.Burst = 20, 30

	// ctrlscope: a publisher to the dashboard's Redis, the worker's telemetry, the observed config.
	pub, err := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{})
	if err != nil {
		return err
	}
	pub.Start()
	defer pub.Stop(5 * time.Second) // flushes what is left, after the manager stopped
	tel := ctrlscope.NewTelemetry(pub, workerName, ctrlscope.TelemetryOptions{})
	// ctrlscope: read-only anywhere but the simulated cluster unless --allow-writes (the Lease excepted).
	cfg, err = clientgo.GuardWrites(tel, cfg, allowWrites, "/apis/coordination.k8s.io/v1/namespaces/"+leNamespace+"/leases")
	if err != nil {
		return err
	}
	cfg = clientgo.WrapConfig(tel, cfg)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:          leaderElect,
		LeaderElectionID:        leaseName,
		LeaderElectionNamespace: leNamespace,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  "0",
	})
	if err != nil {
		return err
	}

	// ctrlscope: metrics, leader election, cluster, informers.
	instOpts := ctrlruntime.Options{}
	if leaderElect {
		instOpts.LeaderElectionID, instOpts.LeaderElectionNamespace = leaseName, leNamespace
	}
	inst, err := ctrlruntime.Instrument(mgr, tel, instOpts)
	if err != nil {
		return err
	}

	r := &DeploymentSummaryReconciler{Client: mgr.GetClient()}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		WithOptions(inst.ControllerOptions(controllerName, controller.Options{})). // ctrlscope: the queue
		// ctrlscope: For(&appsv1.Deployment{}, WithPredicates(GenerationChangedPredicate)), observed
		Watches(inst.For(controllerName, &appsv1.Deployment{}, predicate.GenerationChangedPredicate{})).
		// ctrlscope: Owns(&corev1.ConfigMap{}), observed
		Watches(inst.Owns(controllerName, &appsv1.Deployment{}, &corev1.ConfigMap{})).
		Complete(inst.Reconciler(controllerName, r)) // ctrlscope: reconcile records, writes
	if err != nil {
		tel.SetupError(controllerName, err.Error())
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
