package ctrlruntime

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

// Key names a request as informers key objects: "namespace/name", or "name" when cluster-scoped
// (reconcile.Request's String gives "/name" there).
func Key(r reconcile.Request) string { return clientgo.NamespacedKey(r.NamespacedName) }

// ControllerOptions returns o with NewQueue set so that the controller's workqueue publishes its
// per-key state to queue/{name} (name: the controller's name, which is also the queue's). Pass
// the result to builder.WithOptions or controller.New.
//
// The queue is the one controller-runtime would build: with UsePriorityQueue unset or true (in o
// or in the manager's controller options) its priority queue, else client-go's rate-limiting
// queue; a NewQueue already in o is kept and its queue observed. The rate limiter controller-runtime
// passes in (o.RateLimiter or upstream's default for the queue kind) is wrapped so that
// add_rate_limited can say which delay it chose, and described on the controller's components entry
// (rate_limiter), so that the page can say which part of it chose each delay and what comes next. A priority queue comes back as a
// priorityqueue.PriorityQueue, so the controller keeps adding with priorities (low for the initial
// list's events, a Result's Priority) and taking the highest first.
func (i *Instrumentation) ControllerOptions(name string, o controller.Options) controller.Options {
	cfg := i.mgr.GetControllerOptions()
	usePQ := ptr.Deref(o.UsePriorityQueue, ptr.Deref(cfg.UsePriorityQueue, true))
	workers := o.MaxConcurrentReconciles
	if workers <= 0 {
		workers = cfg.MaxConcurrentReconciles
	}
	if workers <= 0 {
		workers = 1
	}
	i.mu.Lock()
	i.controller(name).workers = workers
	i.mu.Unlock()
	i.publishController(name)
	o.NewQueue = i.newQueue(name, usePQ, o.NewQueue)
	return o
}

type newQueueFunc = func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request]

func (i *Instrumentation) newQueue(name string, usePQ bool, user newQueueFunc) newQueueFunc {
	return func(controllerName string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		observed := clientgo.ObserveRateLimiter(rl)
		i.tel.ControllerRateLimiter(name, clientgo.DescribeRateLimiter(rl))
		var inner workqueue.TypedRateLimitingInterface[reconcile.Request]
		switch {
		case user != nil:
			inner = user(controllerName, observed)
		case usePQ: // as controller-runtime's default NewQueue builds it
			inner = priorityqueue.New(controllerName, func(o *priorityqueue.Opts[reconcile.Request]) {
				o.Log = i.mgr.GetLogger().WithValues("controller", controllerName)
				o.RateLimiter = observed
			})
		default:
			inner = workqueue.NewTypedRateLimitingQueueWithConfig(observed,
				workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: controllerName})
		}
		pq, isPQ := inner.(priorityqueue.PriorityQueue[reconcile.Request])
		q := clientgo.WrapQueue(i.tel, controllerName, inner, observed, clientgo.QueueOptions[reconcile.Request]{
			KeyOf: Key, Clock: i.opts.Clock, PriorityQueue: isPQ})
		base := &observedQueue{Queue: q, i: i, name: name}
		// controller-runtime calls NewQueue in Start, then starts its sources and waits for their
		// caches before starting the workers: the controller is "started" once they synced.
		go base.reportStarted()
		if isPQ {
			return &observedPriorityQueue{observedQueue: base, pq: pq}
		}
		return base
	}
}

// observedQueue is the classic queue, observed; it says when the controller stops.
type observedQueue struct {
	*clientgo.Queue[reconcile.Request]
	i    *Instrumentation
	name string
}

func (q *observedQueue) reportStarted() {
	for !q.i.synced(q.name) {
		if q.ShuttingDown() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	q.setStarted(true)
}

func (q *observedQueue) setStarted(started bool) {
	q.i.mu.Lock()
	c := q.i.controller(q.name)
	changed := c.started != started
	c.started = started
	q.i.mu.Unlock()
	if changed {
		q.i.publishController(q.name)
	}
}

// ShutDown shuts the queue down: the controller stopped.
func (q *observedQueue) ShutDown() {
	q.Queue.ShutDown()
	q.setStarted(false)
}

// ShutDownWithDrain shuts the queue down after the items being processed are done.
func (q *observedQueue) ShutDownWithDrain() {
	q.Queue.ShutDownWithDrain()
	q.setStarted(false)
}

// observedPriorityQueue is controller-runtime's priority queue, observed: a
// priorityqueue.PriorityQueue whose AddWithOpts and GetWithPriority publish like Add and Get.
type observedPriorityQueue struct {
	*observedQueue
	pq priorityqueue.PriorityQueue[reconcile.Request]
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = (*observedPriorityQueue)(nil)

// AddWithOpts adds items with a priority, a delay, or rate limited (the rate limiter's delay, or
// o.After when shorter), published as add, add_after or add_rate_limited per item.
func (q *observedPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, item := range items {
		q.AddWith(item, o.After, o.RateLimited, func() { q.pq.AddWithOpts(o, item) })
	}
}

// GetWithPriority takes the highest-priority ready item (published as get).
func (q *observedPriorityQueue) GetWithPriority() (reconcile.Request, int, bool) {
	item, priority, shutdown := q.pq.GetWithPriority()
	if !shutdown {
		q.Got(item)
	}
	return item, priority, shutdown
}
