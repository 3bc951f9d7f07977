// Package clientgo shows a client-go program's informers, event handlers, workqueues and API
// requests working live on the ctrlscope dashboard (protocol/README.md), without replacing any of
// them: it observes the real objects from the seams client-go offers.
//
//   - WrapConfig wraps a rest.Config's transport: every LIST (its resourceVersion and item count),
//     every WATCH (how it started and ended: closed, expired, throttled, error) and every write made
//     with a Reconcile's context (method, path, status). Watch bodies are never decoded.
//   - GuardWrites, applied before WrapConfig, makes the worker read-only anywhere but ctrlscope's
//     simulated cluster unless allowWrites: a write fails before it is sent, with a *ReadOnlyError,
//     and is published as refused (never as a failed API write). Exempt path prefixes (a
//     leader-election Lease) may always be written.
//   - ObserveInformer, on a SharedIndexInformer (a factory's included) before it starts: its cache as
//     compact summaries, its watch events, relists, resyncs and tombstones, the reflector's states.
//   - HandlerFuncs and Handlers wrap a ResourceEventHandler: each call with its duration and
//     outcome (a panic is published, then re-raised).
//   - NewRateLimitingQueue and WrapQueue: a drop-in workqueue whose every add, dedup, defer, get,
//     done, requeue, delayed and rate-limited add and forget is published per key.
//
// A complete program is go/examples/informer/main.go (README's "Go controllers" section shows it):
//
//	pub, _ := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{}) // REDIS_URL, CTRLSCOPE_PREFIX
//	pub.Start()
//	defer pub.Stop(5 * time.Second)
//	tel := ctrlscope.NewTelemetry(pub, "my-worker", ctrlscope.TelemetryOptions{})
//	config, _ = clientgo.GuardWrites(tel, config, false)
//	config = clientgo.WrapConfig(tel, config) // before kubernetes.NewForConfig
//	observed, _ := clientgo.ObserveInformer(tel, "apps/v1/Deployment", informer)
//	informer.AddEventHandler(clientgo.HandlerFuncs(tel, "apps/v1/Deployment", "print", funcs))
//
// plus a ctrlscope.MetricsSampler for the overview's numbers, and observed.Stopped() on the way out.
// A controller-runtime manager uses package ctrlruntime, which builds on this one.
package clientgo
