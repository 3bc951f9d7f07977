package clientgo

// Handler records after the watch records of the events that caused them.
//
// client-go hands every notification to each handler of an informer on a goroutine of its own (a
// processorListener per handler, with its own buffer): the observing handler that publishes the
// watch record (informer.go) and a user's handler (handlers.go, or a controller-runtime event
// handler) receive the same notification independently, and the user's may return first.
// Published as it returned, its handler record would come before the watch event that caused it,
// and a reader would show the effect above its cause.
//
// So a handler record of an observed informer is published once the observing handler has
// processed its notification: at once when the user's handler returns later (the usual case), else
// it is parked and published right after the watch record, which then takes the time the first
// parked call started (the event was in the cache before any handler ran). Nothing waits: the
// user's handler returns at once either way, as client-go runs it.
//
// Which notification a call answers: the notifications of one key reach every handler in
// resourceVersion order (a watch event's object, a relist's, a resync's cached one, a tombstone's
// last known), so the observer keeps, per key, the highest resourceVersion it processed, and a
// call whose object is at or below it comes after its event. A key the observer saw deleted is
// forgotten after forgetDeleted (a handler further behind than that has its calls published at
// once). An object without a numeric resourceVersion is published at once, and a parked call
// whose notification the observer does not process within parkLimit (it stopped) is published
// then. Time is the telemetry's clock (TelemetryOptions.Clock): parkLimit's timer is its AfterFunc
// when it has one (k8s.io/utils/clock.WithDelayedExecution: a FakeClock in tests), else the wall
// clock's, so that a test with a fake clock, not the machine's speed, decides when a parked call
// expires (a loaded CI run took > parkLimit between two of a test's calls and saw one expire).

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

const (
	parkLimit     = 250 * time.Millisecond
	forgetDeleted = time.Minute
)

// causalOrder orders one observed informer's handler records after its watch records.
type causalOrder struct {
	it    *ctrlscope.InformerTopic
	clock clock.PassiveClock

	mu sync.Mutex
	// seen: per key, the highest resourceVersion the observing handler processed. A key is in
	// deleted (oldest first) from the observer's delete on, until forgetDeleted later or its next
	// notification; an entry of deleted whose rv no longer equals seen's is stale and skipped.
	seen    map[string]uint64
	deleted []deletion
	// parked: per key, handler calls published before the observer processed their notification,
	// in the order they returned; every parked call is in parked exactly once, and timer is armed
	// while any is.
	parked map[string][]parkedCall
	timer  interface{ Stop() bool } // a *time.Timer or a clock.Timer
}

type deletion struct {
	key string
	rv  uint64
	at  time.Time
}

type parkedCall struct {
	rv     uint64
	call   ctrlscope.HandlerCall
	parked time.Time
}

func newCausalOrder(it *ctrlscope.InformerTopic, clk clock.PassiveClock) *causalOrder {
	return &causalOrder{it: it, clock: clk, seen: map[string]uint64{}, parked: map[string][]parkedCall{}}
}

// afterParkLimit arms the timer that expires parked calls (c.mu held), on the clock's own timers
// if it has them. expire runs on a goroutine of its own either way: a FakeClock calls an AfterFunc
// callback while it holds its lock, and expire reads the clock.
func (c *causalOrder) afterParkLimit() {
	if d, ok := c.clock.(clock.WithDelayedExecution); ok {
		c.timer = d.AfterFunc(parkLimit, func() { go c.expire() })
		return
	}
	c.timer = time.AfterFunc(parkLimit, c.expire)
}

func parseRV(obj any) (uint64, bool) {
	n, err := strconv.ParseUint(ctrlscope.ResourceVersion(obj), 10, 64)
	return n, err == nil
}

// observed runs publish (the watch or fifo record of the observer's notification of key for obj,
// or nothing), then publishes the calls parked for it, under the lock that orders them. publish gets
// the time the first of those calls started (zero when none is parked: now).
func (c *causalOrder) observed(key string, obj any, deleted bool, publish func(firstCall time.Time)) {
	rv, ok := parseRV(obj)
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var ready []parkedCall
	if ok {
		if rv > c.seen[key] {
			c.seen[key] = rv
		}
		seen := c.seen[key]
		waiting := c.parked[key]
		rest := waiting[:0]
		for _, p := range waiting {
			if p.rv <= seen {
				ready = append(ready, p)
			} else {
				rest = append(rest, p)
			}
		}
		if len(rest) == 0 {
			delete(c.parked, key)
		} else {
			c.parked[key] = rest
		}
		if deleted {
			c.deleted = append(c.deleted, deletion{key: key, rv: seen, at: now})
		}
	}
	var first time.Time
	for _, p := range ready {
		if start := p.call.At.Add(-p.call.Duration); first.IsZero() || start.Before(first) {
			first = start
		}
	}
	publish(first)
	for _, p := range ready {
		c.it.Handler(p.call)
	}
	c.forgetLocked(now)
}

// forgetLocked drops the keys deleted more than forgetDeleted ago (c.mu held).
func (c *causalOrder) forgetLocked(now time.Time) {
	n := 0
	for ; n < len(c.deleted) && now.Sub(c.deleted[n].at) > forgetDeleted; n++ {
		d := c.deleted[n]
		if c.seen[d.key] == d.rv && len(c.parked[d.key]) == 0 {
			delete(c.seen, d.key)
		}
	}
	c.deleted = c.deleted[n:]
}

// handled publishes call, a user handler's call that just returned, after the observer's record
// of its notification: now if that is out, else once it is (or parkLimit from now).
func (c *causalOrder) handled(call ctrlscope.HandlerCall) {
	rv, ok := parseRV(call.New)
	if !ok {
		c.it.Handler(call)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Calls of one handler stay in their order: behind a parked call of the key, park too.
	if seen, known := c.seen[call.Key]; known && seen >= rv && len(c.parked[call.Key]) == 0 {
		c.it.Handler(call)
		return
	}
	c.parked[call.Key] = append(c.parked[call.Key], parkedCall{rv: rv, call: call, parked: c.clock.Now()})
	if c.timer == nil {
		c.afterParkLimit()
	}
}

// expire publishes the calls parked for parkLimit or longer, oldest key first.
func (c *causalOrder) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	c.releaseLocked(c.clock.Now().Add(-parkLimit))
	if len(c.parked) > 0 {
		c.afterParkLimit()
	}
}

// releaseLocked publishes every key's parked calls if its oldest was parked at or before before
// (c.mu held); a key's calls go out together, in their order.
func (c *causalOrder) releaseLocked(before time.Time) {
	for key, calls := range c.parked {
		if calls[0].parked.After(before) {
			continue
		}
		for _, p := range calls {
			c.it.Handler(p.call)
		}
		delete(c.parked, key)
	}
}

// flush publishes every parked call (the informer stopped: no notification will come for them).
func (c *causalOrder) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(c.clock.Now().Add(time.Hour))
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}
