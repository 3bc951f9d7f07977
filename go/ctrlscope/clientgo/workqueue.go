package clientgo

// A drop-in client-go workqueue (TypedRateLimitingInterface) that publishes every operation per
// key: add, dedup, defer, get, done, requeue, add_after, add_rate_limited (with the delay the rate
// limiter chose), forget and shutdown (protocol/README.md, QueueOp).
//
// How it sees what the queue does without reaching into it: the queue topic's state is the
// protocol's queue item model, folded from these very records (ctrlscope.FoldQueueOp), and that
// model is client-go's: a key is queued, processing, processing-and-dirty, waiting for a delayed
// add, or idle with a requeue count. So an Add is classified from the key's current item the way
// client-go's queue decides it (queued or already dirty: dedup; processing: defer, queued again at
// Done; otherwise add), the rate limiter is wrapped to learn the delay When() chose, and the delayed
// adds the inner queue performs on its own are mirrored by a timer of ours that publishes the add
// when the delay is over. Depth is the inner queue's own Len().
//
// The inner queue stays the real one (client-go's, or controller-runtime's priority queue), so
// ordering, fairness and metrics are upstream's. One window is not exact: an Add that races a Get
// of the same key on another goroutine may be classified before the Get is published. When the
// inner queue's delayed add fires before ours, the Get that takes the key publishes the add first.

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// RateLimiter wraps a TypedRateLimiter to remember the delay it chose for each item, which the
// queue publishes with add_rate_limited.
type RateLimiter[T comparable] struct {
	inner workqueue.TypedRateLimiter[T]
	mu    sync.Mutex
	last  map[T]time.Duration
}

// ObserveRateLimiter wraps limiter; build the inner queue with the result.
func ObserveRateLimiter[T comparable](limiter workqueue.TypedRateLimiter[T]) *RateLimiter[T] {
	if r, ok := limiter.(*RateLimiter[T]); ok {
		return r
	}
	return &RateLimiter[T]{inner: limiter, last: map[T]time.Duration{}}
}

// When asks the wrapped limiter and remembers its answer.
func (r *RateLimiter[T]) When(item T) time.Duration {
	d := r.inner.When(item)
	r.mu.Lock()
	r.last[item] = d
	r.mu.Unlock()
	return d
}

// Forget forwards to the wrapped limiter.
func (r *RateLimiter[T]) Forget(item T) {
	r.inner.Forget(item)
	r.mu.Lock()
	delete(r.last, item)
	r.mu.Unlock()
}

// NumRequeues forwards to the wrapped limiter.
func (r *RateLimiter[T]) NumRequeues(item T) int { return r.inner.NumRequeues(item) }

func (r *RateLimiter[T]) takeLast(item T) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.last[item]
	return d, ok
}

// Queue is an observed TypedRateLimitingInterface.
type Queue[T comparable] struct {
	inner   workqueue.TypedRateLimitingInterface[T]
	limiter *RateLimiter[T]
	tel     *ctrlscope.Telemetry
	name    string
	qt      *ctrlscope.QueueTopic
	keyOf   func(T) string
	clock   clock.WithTicker
	pq      bool

	mu    sync.Mutex // orders the records of one queue (each op and its record under it)
	depth int        // the inner queue's Len when an op last asked it (q.mu)

	timerMu sync.Mutex
	pending delayHeap[T]
	byKey   map[string]*delayed[T]
	firing  map[string]*delayed[T] // due, off the heap, not yet published
	kick    chan struct{}
	stop    chan struct{}
	once    sync.Once
}

// QueueOptions: KeyOf names an item ("namespace/name"; default fmt-less for strings and
// reconcile.Request-like types via their String method); Clock [real].
//
// PriorityQueue says the inner queue is controller-runtime's priority queue, which keeps one entry
// per key where client-go keeps a FIFO entry and a separate delayed add: a delayed add (AddAfter,
// AddRateLimited) of a key that is already ready (queued, or dirty while processing) is absorbed by
// it, and an Add of a key waiting for a delayed add makes it ready at once and cancels the delayed
// add. The queue publishes those as such (the absorbed delayed add with delay 0, no add when the
// cancelled delay would have been over).
type QueueOptions[T comparable] struct {
	KeyOf         func(T) string
	Clock         clock.WithTicker
	PriorityQueue bool
}

// NewRateLimitingQueue is workqueue.NewTypedRateLimitingQueueWithConfig, observed: name is the
// queue's topic (use the controller's name: the dashboard pairs queue/{c} with controller/{c}).
func NewRateLimitingQueue[T comparable](tel *ctrlscope.Telemetry, name string, limiter workqueue.TypedRateLimiter[T],
	opts QueueOptions[T]) *Queue[T] {
	rl := ObserveRateLimiter(limiter)
	cfg := workqueue.TypedRateLimitingQueueConfig[T]{Name: name}
	if opts.Clock != nil {
		cfg.Clock = opts.Clock
	}
	return WrapQueue(tel, name, workqueue.NewTypedRateLimitingQueueWithConfig[T](rl, cfg), rl, opts)
}

// WrapQueue observes inner, which must have been built with limiter (from ObserveRateLimiter), so
// that add_rate_limited can say which delay it chose.
func WrapQueue[T comparable](tel *ctrlscope.Telemetry, name string, inner workqueue.TypedRateLimitingInterface[T],
	limiter *RateLimiter[T], opts QueueOptions[T]) *Queue[T] {
	if opts.KeyOf == nil {
		opts.KeyOf = DefaultKey[T]
		if f, ok := any(func(s string) string { return s }).(func(T) string); ok {
			opts.KeyOf = f // DefaultKey of a string, without boxing it
		}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	q := &Queue[T]{inner: inner, limiter: limiter, tel: tel, name: name, qt: tel.QueueTopic(name), keyOf: opts.KeyOf, clock: opts.Clock,
		pq: opts.PriorityQueue, byKey: map[string]*delayed[T]{}, firing: map[string]*delayed[T]{}, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	go q.fireLoop()
	return q
}

// Inner is the wrapped queue.
func (q *Queue[T]) Inner() workqueue.TypedRateLimitingInterface[T] { return q.inner }

func seconds(d time.Duration) *float64 { s := d.Seconds(); return &s }

func (q *Queue[T]) record(op ctrlscope.QueueOp, key string, depth int, delay, duration *float64,
	requeues *int) (ctrlscope.QueueItem, bool) {
	return q.qt.Record(ctrlscope.QueueRecord{Op: op, Key: key, Depth: depth, Delay: delay, Duration: duration,
		Requeues: requeues})
}

// len is the inner queue's Len, remembered for Forget (q.mu held). controller-runtime's priority
// queue applies its buffered adds on every Len, so the wrapper asks once per operation at most.
func (q *Queue[T]) len() int {
	q.depth = q.inner.Len()
	return q.depth
}

// Add adds item (published as add, dedup or defer).
func (q *Queue[T]) Add(item T) {
	if q.inner.ShuttingDown() {
		return // upstream ignores it
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inner.Add(item)
	q.addedNowLocked(q.keyOf(item))
}

// addedNowLocked publishes an add the inner queue made at once (q.mu held).
func (q *Queue[T]) addedNowLocked(key string) {
	if q.pq {
		q.cancel(key) // the priority queue made a waiting key ready: its delayed add is gone
	}
	q.addedLocked(key)
}

func (q *Queue[T]) addedLocked(key string) {
	// Classified (add, dedup or defer) from the key's item and published in one step (RecordAdd).
	q.qt.RecordAdd(key, q.len())
}

// Len is the inner queue's.
func (q *Queue[T]) Len() int { return q.inner.Len() }

// Get blocks for the next item; published as get with the time since its first unprocessed add.
func (q *Queue[T]) Get() (T, bool) {
	item, shutdown := q.inner.Get()
	if shutdown {
		return item, shutdown
	}
	q.gotLocked(item)
	return item, false
}

// Got publishes get for item, taken from the inner queue by other means than Get (e.g.
// controller-runtime's GetWithPriority).
func (q *Queue[T]) Got(item T) { q.gotLocked(item) }

func (q *Queue[T]) gotLocked(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := q.keyOf(item)
	// Published with the time since the key's first unprocessed add. A key our model does not have
	// queued is one whose delayed add the inner queue fired before our timer did: RecordTimed
	// publishes that add first, and our timer is dropped, so the story stays whole.
	if _, _, addedFirst := q.qt.RecordTimed(ctrlscope.QueueOpGet, key, q.len()); addedFirst {
		q.cancel(key)
	}
}

// Done marks item processed; a key added meanwhile is queued again (published as requeue).
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := q.keyOf(item)
	depth := q.len() // done reports the depth before a dirty key goes back in
	q.inner.Done(item)
	// Published with the time the key was processing, read off its item in the same step.
	if it, _, _ := q.qt.RecordTimed(ctrlscope.QueueOpDone, key, depth); it.Dirty {
		q.record(ctrlscope.QueueOpRequeue, key, q.len(), nil, nil, nil)
	}
}

// ShutDown shuts the inner queue down.
func (q *Queue[T]) ShutDown() {
	q.inner.ShutDown()
	q.shutdown()
}

// ShutDownWithDrain shuts down after the items being processed are done.
func (q *Queue[T]) ShutDownWithDrain() {
	q.inner.ShutDownWithDrain()
	q.shutdown()
}

func (q *Queue[T]) shutdown() {
	q.once.Do(func() {
		close(q.stop)
		q.mu.Lock()
		q.record(ctrlscope.QueueOpShutdown, "", q.len(), nil, nil, nil)
		q.mu.Unlock()
	})
}

// ShuttingDown is the inner queue's.
func (q *Queue[T]) ShuttingDown() bool { return q.inner.ShuttingDown() }

// AddAfter adds item after d (published as add_after; the add itself when d is over).
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	if q.inner.ShuttingDown() {
		return
	}
	if d <= 0 {
		q.Add(item)
		return
	}
	q.AddWith(item, d, false, func() { q.inner.AddAfter(item, d) })
}

// AddRateLimited adds item after the rate limiter's delay (published with that delay and the
// limiter's requeue count, this retry included).
func (q *Queue[T]) AddRateLimited(item T) {
	if q.inner.ShuttingDown() {
		return
	}
	q.AddWith(item, 0, true, func() { q.inner.AddRateLimited(item) })
}

// AddWith runs add, which adds item to the inner queue by other means than Add, AddAfter and
// AddRateLimited (controller-runtime's AddWithOpts, with a priority), and publishes it as those
// would: rateLimited as add_rate_limited (delay: the limiter's choice, or after when that is
// shorter, as the priority queue decides), after > 0 as add_after, otherwise as an add.
func (q *Queue[T]) AddWith(item T, after time.Duration, rateLimited bool, add func()) {
	if q.inner.ShuttingDown() {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	key := q.keyOf(item)
	if !rateLimited && after <= 0 {
		add()
		q.addedNowLocked(key)
		return
	}
	absorbed := false
	if q.pq { // a key the priority queue holds ready keeps being ready: the delay is absorbed
		it, ok := q.qt.Item(key)
		absorbed = ok && (it.S == ctrlscope.QueueItemStateQueued || it.Dirty)
	}
	add()
	// Len first: controller-runtime's priority queue applies adds from a buffer (asking the rate
	// limiter only then) and Len flushes that buffer.
	depth := q.len()
	d := after
	if rateLimited {
		last, _ := q.limiter.takeLast(item)
		if d <= 0 || last < d {
			d = last
		}
	}
	if absorbed {
		d = 0
	}
	if rateLimited {
		n := q.limiter.NumRequeues(item)
		q.record(ctrlscope.QueueOpAddRateLimited, key, depth, seconds(d), nil, &n)
	} else if d > 0 {
		q.record(ctrlscope.QueueOpAddAfter, key, depth, seconds(d), nil, nil)
	}
	if d <= 0 {
		q.addedLocked(key) // a zero delay adds at once: that add is its own record
		return
	}
	q.schedule(item, key, d)
}

// Forget clears the rate limiter's count for item (published with the count being cleared).
// Forget does not change the queue: its depth is the one the queue's last operation saw (a Len of
// controller-runtime's priority queue applies its add buffer, which is not free).
func (q *Queue[T]) Forget(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.limiter.NumRequeues(item)
	q.inner.Forget(item)
	q.record(ctrlscope.QueueOpForget, q.keyOf(item), q.depth, nil, nil, &n)
}

// NumRequeues is the rate limiter's count for item.
func (q *Queue[T]) NumRequeues(item T) int { return q.inner.NumRequeues(item) }

// -- delayed adds -------------------------------------------------------------------------------
// The inner queue adds a delayed item back on its own timer; ours fires at the same ready time and
// publishes that add. Like client-go's delaying queue, a key keeps its earliest ready time.

type delayed[T comparable] struct {
	item     T
	key      string
	at       time.Time
	index    int
	canceled bool // by cancel, after fireLoop took it off the heap and before it published it
}

type delayHeap[T comparable] []*delayed[T]

func (h delayHeap[T]) Len() int           { return len(h) }
func (h delayHeap[T]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *delayHeap[T]) Push(x any)        { e := x.(*delayed[T]); e.index = len(*h); *h = append(*h, e) }
func (h *delayHeap[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (q *Queue[T]) schedule(item T, key string, d time.Duration) {
	at := q.clock.Now().Add(d)
	q.timerMu.Lock()
	if e, ok := q.byKey[key]; ok {
		if at.Before(e.at) {
			e.at = at
			heap.Fix(&q.pending, e.index)
		}
	} else {
		e := &delayed[T]{item: item, key: key, at: at}
		heap.Push(&q.pending, e)
		q.byKey[key] = e
	}
	q.timerMu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// cancel drops key's pending delayed add (the priority queue's Add of a waiting key, or a get that
// shows the inner queue's delayed add fired first), also one fireLoop has taken off the heap as due
// but not published yet (it waits for q.mu, which the caller holds).
func (q *Queue[T]) cancel(key string) {
	q.timerMu.Lock()
	if e, ok := q.byKey[key]; ok {
		heap.Remove(&q.pending, e.index)
		delete(q.byKey, key)
	}
	if e, ok := q.firing[key]; ok {
		e.canceled = true
		delete(q.firing, key)
	}
	q.timerMu.Unlock()
}

func (q *Queue[T]) fireLoop() {
	for {
		q.timerMu.Lock()
		var wait time.Duration = -1
		now := q.clock.Now()
		var due []*delayed[T]
		for q.pending.Len() > 0 {
			e := q.pending[0]
			if e.at.After(now) {
				wait = e.at.Sub(now)
				break
			}
			heap.Pop(&q.pending)
			delete(q.byKey, e.key)
			q.firing[e.key] = e
			due = append(due, e)
		}
		q.timerMu.Unlock()
		if len(due) > 0 {
			q.mu.Lock()
			for _, e := range due {
				q.timerMu.Lock()
				canceled := e.canceled
				if q.firing[e.key] == e {
					delete(q.firing, e.key)
				}
				q.timerMu.Unlock()
				if !canceled && !q.inner.ShuttingDown() {
					q.addedLocked(e.key)
				}
			}
			q.mu.Unlock()
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if wait >= 0 {
			timer = q.clock.NewTimer(wait)
			fire = timer.C()
		}
		select {
		case <-q.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-q.kick:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}
