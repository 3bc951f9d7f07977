// Package ctrlruntime shows a controller-runtime manager's controllers working live on the
// ctrlscope dashboard: per-key workqueue state, the watch events that woke a controller, every
// Reconcile attempt with its result, retries and backoff, API writes per Reconcile, the manager's
// informers, leader election and controller-runtime's own metrics (protocol/README.md).
//
// Nothing in controller-runtime is replaced: its workqueue (the priority queue or client-go's
// rate-limiting queue), its controller loop, its handlers, predicates and caches stay upstream's.
// The package wraps the seams controller-runtime offers for this:
//
//   - controller.Options.NewQueue (ControllerOptions): the controller's own queue, built as
//     upstream builds it, observed by clientgo.Queue, which publishes every add, dedup, get, done,
//     requeue, delayed and rate-limited add and forget per key;
//   - reconcile.Reconciler (Reconciler): each call is a reconcile_start and a reconcile record,
//     and its context names the controller so that the REST transport (clientgo.WrapConfig)
//     attributes the API writes it makes;
//   - handler.EventHandler and predicate.Predicate (Handler, Predicates, For, Owns): each watch
//     event is an event record with the requests the handler enqueued or the predicate that
//     dropped it;
//   - the manager (Instrument): a runnable on every replica that samples
//     sigs.k8s.io/controller-runtime/pkg/metrics.Registry once a second, announces the cluster,
//     and reports leader election; the cache's informers for the watched types are observed
//     through clientgo.ObserveInformer.
//
// A user adds, in main.go (a complete program is go/examples/manager/main.go, which README's
// "Go controllers" section shows):
//
//	tel := ctrlscope.NewTelemetry(pub, "my-worker", ctrlscope.TelemetryOptions{})
//	cfg, _ = clientgo.GuardWrites(tel, cfg, allowWrites) // read-only unless allowed
//	cfg = clientgo.WrapConfig(tel, cfg)                 // both before ctrl.NewManager
//	mgr, _ := ctrl.NewManager(cfg, ctrl.Options{...})
//	inst, _ := ctrlruntime.Instrument(mgr, tel, ctrlruntime.Options{})
//	ctrl.NewControllerManagedBy(mgr).Named("c").
//		WithOptions(inst.ControllerOptions("c", controller.Options{})).
//		Watches(inst.For("c", &appsv1.Deployment{}, predicate.GenerationChangedPredicate{})).
//		Watches(inst.Owns("c", &appsv1.Deployment{}, &corev1.ConfigMap{})).
//		Complete(inst.Reconciler("c", r))
//
// (For and Owns return the three arguments of builder.Watches: the object, the observed handler
// controller-runtime's own For and Owns would install, and the observed predicates.) Instrument
// samples controller-runtime's metrics itself: no ctrlscope.MetricsSampler is needed next to it.
package ctrlruntime
