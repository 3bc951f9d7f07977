package ctrlscope

// Provenance (protocol v1.7, README "Provenance, self-triggering and findings"): why each attempt
// ran. A workqueue merges the causes of a reconcile, so the observer keeps them instead, per
// controller and request key: the triggers pending since the key's last reconcile_start.
//
//   - an event record whose requests name the key leaves an "event" trigger (a "resync" one for an
//     update that did not change the resourceVersion): its time, object key, type, source, rv and,
//     when the record has them, diff, diff_more and self;
//   - a reconcile ending in error, panic or requeue leaves a "retry" trigger, whose delay is the
//     delay of the key's add_rate_limited that follows (or precedes) it; requeue_after leaves a
//     "requeue_after" trigger with its delay.
//
// reconcile_start takes them: the last TriggersMax in the record's triggers, how many in all in
// trigger_count, and self_triggered when every one was the controller's own write coming back.
//
// Self: each 2xx write of the controller that returned a resourceVersion is remembered (the last
// WrittenMax, rv -> the key its path names); an event whose new object has one of those rvs, for
// that key, is the write coming back. The API server sends a write's watch event and its answer at
// about the same time, on two connections: the event may reach the controller first. So the
// transport says when a write is sent (WriteStarted), and the record of an event of a key the
// controller is writing (or of any key while it creates) is parked until the answers of the writes
// in flight when it arrived are read, at most selfWaitLimit (a loaded CI run recorded a status
// write's own event without self). The event handler never waits for them: it did once, and fell
// behind its watch while the controller kept writing. Events after a parked one are parked behind
// it (their order is kept); an attempt of a key a parked event maps to releases it first (it is
// one of the attempt's triggers).
//
// All of it lives in the controller's ControllerTopic, under its mu, and each record is published
// under that lock too: an event record is before a reconcile_start record exactly when its trigger
// is in that attempt's triggers. Lock order: ControllerTopic.mu, then the Telemetry's, then the
// publisher's.

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"time"
)

// selfWaitLimit bounds how long an event's record is parked for the answer to a write of its key
// in flight.
const selfWaitLimit = time.Second

// writesInFlight is a controller's writes sent and not yet answered, of the key their path names
// ("" for a create): each write's done channel, closed once it is answered.
type writesInFlight struct {
	writes []chan struct{}
}

// WriteStarted: a write with a Reconcile's context is about to be sent (the transport calls it
// before sending, and the returned func once the answer was reported with RequestRV, or the write
// failed). Nothing to do unless detections are on (self is theirs).
func (t *Telemetry) WriteStarted(ctx context.Context, method, path string) (finished func()) {
	controller := ReconcilingController(ctx)
	if method == "GET" || controller == "" || t.detect == nil {
		return func() {}
	}
	c := t.ControllerTopic(controller)
	k := writtenKeyOf(path)
	key := ""
	if k.known {
		key = k.key
	}
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = map[string]*writesInFlight{}
	}
	w := c.inflight[key]
	if w == nil {
		w = &writesInFlight{}
		c.inflight[key] = w
	}
	done := make(chan struct{})
	w.writes = append(w.writes, done)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		close(done)
		for i, d := range w.writes {
			if d == done {
				w.writes = append(w.writes[:i], w.writes[i+1:]...)
				break
			}
		}
		if len(w.writes) == 0 && c.inflight[key] == w {
			delete(c.inflight, key)
		}
		next := c.releaseParkedLocked(c.tel.now(), "")
		c.mu.Unlock()
		c.tel.pub.after(next)
	}
}

// inflightLocked is the writes of key (and creates) in flight now: an event arriving now waits
// for their answers. Only those: a write sent after the event arrived cannot be what it shows, and
// a controller that keeps writing a key always has one in flight.
func (c *ControllerTopic) inflightLocked(key string) []chan struct{} { // c.mu held
	var waits []chan struct{}
	for _, k := range [2]string{key, ""} {
		if w := c.inflight[k]; w != nil {
			waits = append(waits, w.writes...)
		}
	}
	return waits
}

// parkedEvent is an event record held back until the writes in flight when it arrived are
// answered (waits closed) or its deadline passes: only then can self be decided.
type parkedEvent struct {
	e            EventCall
	rb, tb       *record // the record and the trigger's fields, built but for self and ts
	kind         TriggerKind
	resync       bool
	newRV, oldRV string
	paths        []string
	more         int
	at           float64 // wall ms when it arrived: the record's ts
	waits        []chan struct{}
	deadline     float64 // wall ms, on the telemetry's clock
}

func (p *parkedEvent) answered() bool {
	for _, done := range p.waits {
		select {
		case <-done:
		default:
			return false
		}
	}
	return true
}

// releaseParkedLocked publishes the parked events, in order, up to the first one still waiting
// for an answer within its limit; with request set, also every one up to the last that maps to it,
// answered or not (its attempt is starting).
func (c *ControllerTopic) releaseParkedLocked(now float64, request string) next { // c.mu held
	if len(c.parked) == 0 {
		return nextNothing
	}
	last := -1
	if request != "" {
		for i, p := range c.parked {
			if contains(p.e.Requests, request) {
				last = i
			}
		}
	}
	n, nx := 0, nextNothing
	for ; n < len(c.parked); n++ {
		p := &c.parked[n]
		if n > last && len(p.waits) > 0 && now < p.deadline && !p.answered() {
			break
		}
		nx = max(nx, c.emitEventLocked(p))
		*p = parkedEvent{} // its record went back to the pool; the objects it held go too
	}
	c.parked = append(c.parked[:0], c.parked[n:]...)
	return nx
}

// EventCall is one controller event: a watched object's event mapped to requests (or dropped by
// the predicate FilteredBy). Source, Old and New are v1.7's optional arguments: the handler that
// mapped it (ctrlruntime.HandlerName), the event's objects (New: the object, a delete's last known
// state; Old: an update's previous object). With them the record says rv, old_rv, diff and self.
type EventCall struct {
	Event      ControllerEvent
	Key        string
	Requests   []string
	FilteredBy string
	Source     string
	Old, New   any
}

// trigger is one cause pending for a key's next attempt.
type trigger struct {
	kind TriggerKind
	ts   float64
	// event and resync: the fields after ts, as JSON (`,"key":…,"type":…,…`), and the diff paths.
	fields []byte
	paths  []string
	self   bool
	// event and resync, for a Hook: the event's type, object key, source and rv
	event  ControllerEvent
	key    string
	source string
	rv     string
	// retry and requeue_after
	result   ReconcileResult
	delay    float64
	hasDelay bool
	// what the Hook returned for the call that left it (hook.go)
	link any
}

func (tr *trigger) appendJSON(b []byte) []byte {
	b = append(b, `{"kind":`...)
	b = appendString(b, string(tr.kind))
	b = append(b, `,"ts":`...)
	b = appendFloat(b, tr.ts)
	switch tr.kind {
	case TriggerKindEvent, TriggerKindResync:
		b = append(b, tr.fields...)
	case TriggerKindRetry:
		b = append(b, `,"result":`...)
		b = appendString(b, string(tr.result))
		b = append(b, `,"delay":`...)
		if tr.hasDelay {
			b = appendFloat(b, tr.delay)
		} else {
			b = append(b, "null"...)
		}
	case TriggerKindRequeueAfter:
		b = append(b, `,"delay":`...)
		b = appendFloat(b, tr.delay)
	}
	return append(b, '}')
}

// pendingTriggers are a key's triggers since its last reconcile_start: the last TriggersMax of
// them, how many in all, and whether every one was a self event.
type pendingTriggers struct {
	list    []trigger
	count   int
	allSelf bool
	// retry is the index in list of the retry trigger the key's last attempt left (-1: none), whose
	// delay the key's next add_rate_limited sets.
	retry int
}

func (pt *pendingTriggers) add(tr trigger) {
	if pt.count == 0 {
		pt.allSelf = true
		pt.retry = -1
	}
	pt.count++
	pt.allSelf = pt.allSelf && tr.kind == TriggerKindEvent && tr.self
	if len(pt.list) == TriggersMax {
		copy(pt.list, pt.list[1:])
		pt.list = pt.list[:TriggersMax-1]
		pt.retry--
	}
	pt.list = append(pt.list, tr)
}

// written remembers the last WrittenMax resourceVersions a controller's writes returned (the
// latest write of an rv counts as the newest), and the key each write's path named.
type written struct {
	keys  map[string]writtenEntry
	order []writtenAt // oldest first; an rv written again leaves a stale entry behind
	seq   uint64
}

type writtenEntry struct {
	key   string
	known bool // false: a create (a collection's path), which names no key
	seq   uint64
}

type writtenAt struct {
	rv  string
	seq uint64
}

func (w *written) add(rv string, k writtenKey) {
	if w.keys == nil {
		w.keys = map[string]writtenEntry{}
	}
	w.seq++
	w.keys[rv] = writtenEntry{key: k.key, known: k.known, seq: w.seq}
	w.order = append(w.order, writtenAt{rv, w.seq})
	for len(w.keys) > WrittenMax {
		oldest := w.order[0]
		w.order = w.order[1:]
		if e, ok := w.keys[oldest.rv]; ok && e.seq == oldest.seq {
			delete(w.keys, oldest.rv)
		}
	}
	if len(w.order) > 2*WrittenMax { // drop the stale entries
		live := w.order[:0]
		for _, at := range w.order {
			if w.keys[at.rv].seq == at.seq {
				live = append(live, at)
			}
		}
		w.order = live
	}
}

// self: rv was written by the controller, to key (or by a create).
func (w *written) self(rv, key string) bool {
	e, ok := w.keys[rv]
	return ok && (!e.known || e.key == key)
}

type writtenKey struct {
	key   string
	known bool
}

// writtenKeyOf is the object key a write's path names (README: the query dropped, segments
// percent-decoded, the /api/{v}/ or /apis/{g}/{v}/ prefix removed; namespaces/{ns}/{res}/{name}[/…]
// is ns/name, {res}/{name}[/…] is name, a collection names none).
func writtenKeyOf(path string) writtenKey {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if s == "" {
			continue
		}
		if v, err := url.PathUnescape(s); err == nil {
			s = v
		}
		segs = append(segs, s)
	}
	var rest []string
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		rest = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		rest = segs[3:]
	default:
		return writtenKey{}
	}
	switch {
	case len(rest) >= 3 && rest[0] == "namespaces":
		if len(rest) >= 4 {
			return writtenKey{key: rest[1] + "/" + rest[3], known: true}
		}
		return writtenKey{}
	case len(rest) >= 2:
		return writtenKey{key: rest[1], known: true}
	}
	return writtenKey{}
}

// present: v is an object, not nil nor a typed nil.
func present(v any) bool {
	if v == nil {
		return false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Interface, reflect.Slice:
		return !rv.IsNil()
	}
	return true
}

// Event: a watched object's event reached the controller, mapped to requests or dropped by the
// predicate filteredBy ("" when it passed). EventCall says more (v1.7).
func (t *Telemetry) Event(controller string, event ControllerEvent, key string, requests []string, filteredBy string) {
	t.ControllerTopic(controller).Event(EventCall{Event: event, Key: key, Requests: requests, FilteredBy: filteredBy})
}

// Event publishes e as the controller's event record and leaves a trigger for each key it requests.
func (c *ControllerTopic) Event(e EventCall) {
	requests := e.Requests
	if requests == nil {
		requests = []string{}
	}
	rb := newRecord(RecordKindEvent).str("event", string(e.Event)).str("key", e.Key).strs("requests", requests).
		optStr("filtered_by", e.FilteredBy)
	hook := c.tel.hook
	if c.detect() == nil {
		next := c.publish(rb.done(c.tel.now()))
		rb.release()
		if hook != nil && len(e.Requests) > 0 {
			hook.Event(c.name, e, EventDerived{RV: ResourceVersion(e.New)})
		}
		c.tel.pub.after(next)
		return
	}
	// the trigger's fields after kind and ts, built beside the record's
	tb := newFields()
	tb.str("key", e.Key).str("type", string(e.Event)).optStr("source", e.Source)
	if e.Source != "" {
		rb.str("source", e.Source)
	}
	hasNew, hasOld := present(e.New), present(e.Old)
	newRV := ""
	if hasNew {
		newRV = ResourceVersion(e.New)
		rb.optStr("rv", newRV)
	}
	tb.optStr("rv", newRV)
	resync := false
	var paths []string
	oldRV, more := "", 0
	if e.Event == ControllerEventUpdate && hasNew && hasOld {
		oldRV = ResourceVersion(e.Old)
		resync = newRV != "" && newRV == oldRV
		paths, more = Diff(e.Old, e.New)
		if paths == nil {
			paths = []string{}
		}
		rb.optStr("old_rv", oldRV).strs("diff", paths)
		tb.strs("diff", paths)
		if more > 0 {
			rb.int("diff_more", more)
			tb.int("diff_more", more)
		}
	}
	kind := TriggerKindEvent
	if resync {
		kind = TriggerKindResync
	}
	t := c.tel
	// A value, copied into c.parked only when it is parked: most events are not, and allocate nothing.
	p := parkedEvent{e: e, rb: rb, tb: tb, kind: kind, resync: resync, newRV: newRV, oldRV: oldRV, paths: paths,
		more: more, at: t.now()}
	c.mu.Lock()
	if !resync && newRV != "" {
		p.waits = c.inflightLocked(e.Key) // its own write's answer may not have been read yet
	}
	if len(p.waits) > 0 || len(c.parked) > 0 {
		p.deadline = p.at + float64(selfWaitLimit/time.Millisecond)
		c.parked = append(c.parked, p)
		c.mu.Unlock()
		return
	}
	next := c.emitEventLocked(&p)
	c.mu.Unlock()
	t.pub.after(next)
}

// emitEventLocked decides p's self, publishes its record and leaves a trigger for each key it
// requests; the caller calls the publisher's after with the result once it holds no lock.
func (c *ControllerTopic) emitEventLocked(p *parkedEvent) next { // c.mu held
	e, rb, tb := &p.e, p.rb, p.tb
	self := !p.resync && p.newRV != "" && c.written.self(p.newRV, e.Key)
	if self {
		rb.boolean("self", true)
		tb.boolean("self", true)
	}
	next := c.publish(rb.done(p.at))
	if len(e.Requests) > 0 {
		var link any
		if hook := c.tel.hook; hook != nil {
			d := EventDerived{RV: p.newRV, OldRV: p.oldRV, Self: self}
			if !p.resync {
				d.Diff, d.DiffMore = p.paths, p.more
			}
			link = hook.Event(c.name, *e, d)
		}
		fields := append([]byte(nil), tb.b...)
		for i, key := range e.Requests {
			if i > 0 && contains(e.Requests[:i], key) {
				continue
			}
			c.keyLocked(key).triggers.add(trigger{kind: p.kind, ts: p.at, fields: fields, paths: p.paths, self: self,
				event: e.Event, key: e.Key, source: e.Source, rv: p.newRV, link: link})
		}
	}
	rb.release()
	tb.release()
	return next
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
