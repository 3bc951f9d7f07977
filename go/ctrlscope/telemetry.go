package ctrlscope

// Telemetry turns observations into the protocol's records and topic state (protocol/README.md §2,
// §4, §5), the Go twin of ctrlscope's Python TelemetryObserver: the same calls give the same frames,
// which protocol/vectors/encode fix for both.
//
// Topics, one set per worker (replicas use distinct worker names):
//   - w/{worker}/informer/{name}: list, watch, bookmark, watch start/end, backoff, state, fifo and
//     handler records; state: the cache as summaries.
//   - w/{worker}/queue/{name}: queue records; state: each key's QueueItem (FoldQueueOp).
//   - w/{worker}/controller/{name}: event, reconcile_start, reconcile and write records; state: per
//     key the last reconcile. controller/leader-{lock}: leader records.
//   - w/{worker}/watcher/{name} (v1.6): a program's own raw watch loop: watcher, watch_start, watch,
//     watch_end, state and read records; no state (it has no cache).
//   - w/{worker}/components: one entry per worker/informer/controller/lease/cluster/watcher.
//   - w/{worker}/status/{table}: rows a controller reports; w/{worker}/metrics: samples.
//
// Every method is safe for concurrent use and does no I/O: it builds a few bytes and hands them to
// the Publisher's buffer.
//
// Which controller made an API write: Go has no goroutine identity, so the Reconcile's context
// carries it. ReconcileStart returns a context that Request (the REST transport's observer) reads.

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Telemetry publishes observations of one worker (one process) through a Publisher.
type Telemetry struct {
	pub    *Publisher
	worker string
	clock  clock.PassiveClock

	mu          sync.Mutex
	topics      map[[2]string]string
	components  map[string]map[string]any
	queueTopics map[string]*QueueTopic // their items are the publisher's state entries
	ctrlTopics  map[string]*ControllerTopic
	informers   map[string]*informerCounts // the values' fields are guarded by the publisher's mu
	infTopics   map[string]*InformerTopic
	ctrls       map[string]*controllerCounts
	watchers    map[string]*watcherCounts

	// detect is the findings' thresholds; nil: provenance and detection are off (v1.7, detect.go).
	detect *DetectConfig
	// hook sees the controllers' calls beside the publisher (hook.go); nil: none.
	hook Hook

	componentsTopic string
	// MetricsTopic and ErrorsTopic are this worker's metrics and errors topics.
	MetricsTopic, ErrorsTopic string
}

// reconcileSummaryCap holds a summary without its error text: {"attempts":N,"result":"requeue_after",
// "at":<wall ms>,"duration":<s>,"error":null} is under 110 bytes.
const reconcileSummaryCap = 128

// appendReconcileSummary appends a key's last reconcile, a controller topic's state value, byte for
// byte as encoding/json writes {"attempts","result","at","duration","error"} (error null when "").
func appendReconcileSummary(b []byte, attempts int, result string, at, duration float64, errText string) []byte {
	b = append(b, `{"attempts":`...)
	b = strconv.AppendInt(b, int64(attempts), 10)
	b = append(b, `,"result":`...)
	b = appendJSONString(b, result)
	b = append(b, `,"at":`...)
	b = appendJSONFloat(b, at)
	b = append(b, `,"duration":`...)
	b = appendJSONFloat(b, duration)
	b = append(b, `,"error":`...)
	if errText == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, errText)
	}
	return append(b, '}')
}

type informerCounts struct {
	Watch         int `json:"watch"`
	Fifo          int `json:"fifo"`
	Cache         int `json:"cache"`
	Handlers      int `json:"handlers"`
	HandlerErrors int `json:"handler_errors"`
	FifoDepth     int `json:"fifo_depth"`
	Size          int `json:"size"`
}

type controllerCounts struct {
	Writes         int    `json:"writes"`
	WriteErrors    int    `json:"write_errors"`
	WriteConflicts int    `json:"write_conflicts"`
	WritesRefused  int    `json:"writes_refused"` // v1.4: never sent, so in neither Writes nor WriteErrors
	LastResult     string `json:"last_result"`
}

// watcherCounts are a raw watcher's stage counters (v1.6; Python's WATCHER_COUNTERS).
type watcherCounts struct {
	Watch       int `json:"watch"`
	WatchStarts int `json:"watch_starts"`
	WatchEnds   int `json:"watch_ends"`
	Expired     int `json:"expired"`
	Reads       int `json:"reads"`
	ReadErrors  int `json:"read_errors"`
}

// TelemetryOptions: Runtime labels the worker on the dashboard [go]; Clock [real]; Detect the
// findings' thresholds (v1.7) [from the environment: DetectConfigFromEnv; a variable that is not a
// valid threshold is logged through the publisher's Logf and the defaults are kept]; NoDetect
// turns provenance and detection off (the records are a 1.6 publisher's, apart from the version).
//
// Hook, when set, sees the controllers' events, attempts and writes beside the publisher (hook.go;
// the OpenTelemetry sink of package ctrlscope/otel is one).
type TelemetryOptions struct {
	Runtime  Runtime
	Clock    clock.PassiveClock
	Detect   *DetectConfig
	NoDetect bool
	Hook     Hook
}

// NewTelemetry announces worker (its components entry worker/{worker}: runtime, protocol
// version, publisher id; the publisher's presence entry: role worker, name worker) and returns
// the encoder for its observations.
func NewTelemetry(pub *Publisher, worker string, opts TelemetryOptions) *Telemetry {
	if opts.Runtime == "" {
		opts.Runtime = RuntimeGo
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	t := &Telemetry{pub: pub, worker: TopicPart(worker), clock: opts.Clock, topics: map[[2]string]string{},
		components: map[string]map[string]any{}, queueTopics: map[string]*QueueTopic{},
		ctrlTopics: map[string]*ControllerTopic{}, informers: map[string]*informerCounts{}, infTopics: map[string]*InformerTopic{},
		ctrls: map[string]*controllerCounts{}, watchers: map[string]*watcherCounts{}, hook: opts.Hook}
	switch {
	case opts.NoDetect:
	case opts.Detect != nil:
		d := *opts.Detect
		t.detect = &d
	default:
		d, err := DetectConfigFromEnv(nil)
		if err != nil {
			pub.opts.Logf("ctrlscope: %v; detecting with the default thresholds", err)
			def := DefaultDetectConfig()
			d = &def
		}
		t.detect = d
	}
	if t.detect != nil {
		pub.addFlushHook(t.evaluate)
	}
	t.componentsTopic = mustTopic(t.worker, TopicKindComponents, "")
	t.MetricsTopic = mustTopic(t.worker, TopicKindMetrics, "")
	t.ErrorsTopic = mustTopic(t.worker, TopicKindErrors, "")
	t.component(t.worker, ComponentKindWorker, map[string]any{"runtime": string(opts.Runtime),
		"protocol": ProtocolVersion, "publisher": pub.Name()})
	// The presence entry names the worker as the dashboard does: by its topic segment.
	pub.Describe(WorkerRole, t.worker)
	return t
}

// Worker is the worker's topic segment; Publisher the publisher it writes through.
func (t *Telemetry) Worker() string            { return t.worker }
func (t *Telemetry) Publisher() *Publisher     { return t.pub }
func (t *Telemetry) Clock() clock.PassiveClock { return t.clock }

// Topic is this worker's topic of kind for component name.
func (t *Telemetry) Topic(kind TopicKind, name string) string {
	t.mu.Lock()
	topic := t.topicLocked(kind, name)
	t.mu.Unlock()
	return topic
}

func (t *Telemetry) topicLocked(kind TopicKind, name string) string { // t.mu held
	k := [2]string{string(kind), name}
	topic, ok := t.topics[k]
	if !ok {
		topic = mustTopic(t.worker, kind, name)
		t.topics[k] = topic
	}
	return topic
}

func (t *Telemetry) now() float64 { return wallMs(t.clock.Now()) }

func (t *Telemetry) emit(kind TopicKind, name string, r *record) {
	t.pub.Publish(t.Topic(kind, name), r.done(t.now()))
	r.release()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return b
}

func (t *Telemetry) component(name string, kind ComponentKind, fields map[string]any) {
	key := string(kind) + "/" + name
	t.mu.Lock()
	c := t.components[key]
	if c == nil {
		c = map[string]any{"kind": string(kind), "name": name}
		t.components[key] = c
	}
	for k, v := range fields {
		c[k] = v
	}
	value := mustJSON(c)
	t.mu.Unlock()
	t.pub.SetState(t.componentsTopic, key, value)
}

// DescribeCluster says which cluster the worker talks to: a name and the server URL (never a
// credential: pass no user info).
func (t *Telemetry) DescribeCluster(name, server, version string) {
	t.component(name, ComponentKindCluster, map[string]any{"server": server, "version": version})
}

// -- stage counters ---------------------------------------------------------------------------

func (t *Telemetry) informerCounts(name string) *informerCounts { // t.mu held
	c := t.informers[name]
	if c == nil {
		c = &informerCounts{}
		t.informers[name] = c
	}
	return c
}

func (t *Telemetry) controllerCounts(name string) *controllerCounts { // t.mu held
	c := t.ctrls[name]
	if c == nil {
		c = &controllerCounts{}
		t.ctrls[name] = c
	}
	return c
}

// Stages are cumulative counters per pipeline stage for the metrics sample (the dashboard draws
// every controller's pipeline with live rates from two samples): per informer watch events, FIFO
// deltas, cache writes, handler calls and failures, FIFO depth and cache size; per controller API
// writes from Reconcile, failed ones, conflicts and the last result; v1.6: per raw watcher events,
// watches opened, streams ended and of those by 410, GETs and failed GETs.
func (t *Telemetry) Stages() map[string]any {
	t.mu.Lock()
	live := make(map[string]*informerCounts, len(t.informers))
	for name, c := range t.informers {
		live[name] = c
	}
	t.pub.mu.Lock()
	informers := make(map[string]informerCounts, len(live))
	for name, c := range live {
		informers[name] = *c
	}
	t.pub.mu.Unlock()
	ctrls := make(map[string]controllerCounts, len(t.ctrls))
	for name, c := range t.ctrls {
		ctrls[name] = *c
	}
	watchers := make(map[string]watcherCounts, len(t.watchers))
	for name, c := range t.watchers {
		watchers[name] = *c
	}
	t.mu.Unlock()
	for name, c := range informers {
		c.Size = t.pub.StateLen(t.Topic(TopicKindInformer, name))
		informers[name] = c
	}
	return map[string]any{"informers": informers, "controllers": ctrls, "watchers": watchers}
}

// -- informer / reflector ----------------------------------------------------------------------

// Informer: an informer started (its FIFO model, e.g. "DeltaFIFO", and resync period).
func (t *Telemetry) Informer(informer, fifo string, resyncPeriod time.Duration) {
	t.InformerWithScope(informer, fifo, resyncPeriod, InformerScope{})
}

// InformerScope is what narrows an informer (protocol v1.3, the InformerScope table): the zero
// value of a field means it does not narrow that way, and is not published.
type InformerScope struct {
	Namespace     string // the one namespace it lists and watches ("": all)
	LabelSelector string // as sent with its LIST and WATCH
	FieldSelector string
	MetadataOnly  bool   // the cache holds PartialObjectMetadata (a metadatainformer)
	Transform     string // what changes each object before it is cached, for people ("strip managedFields")
}

// informerScopeFields are the protocol's InformerScope fields, in its order (INFORMER_SCOPE_FIELDS).
var informerScopeFields = []string{"namespace", "label_selector", "field_selector", "metadata_only", "transform"}

// fields are the scope's published fields, in the protocol's order.
func (s InformerScope) fields() [][2]any {
	var out [][2]any
	for i, v := range []any{s.Namespace, s.LabelSelector, s.FieldSelector, s.MetadataOnly, s.Transform} {
		if v != "" && v != false {
			out = append(out, [2]any{informerScopeFields[i], v})
		}
	}
	return out
}

// InformerWithScope: an informer started, narrowed by scope (v1.3). An informer announced again
// replaces its component's scope fields.
func (t *Telemetry) InformerWithScope(informer, fifo string, resyncPeriod time.Duration, scope InformerScope) {
	fields := map[string]any{"fifo": fifo, "resync_period": resyncPeriod.Seconds(), "synced": false}
	rec := newRecord(RecordKindInformer).str("fifo", fifo).float("resync_period", resyncPeriod.Seconds())
	for _, f := range scope.fields() {
		k := f[0].(string)
		fields[k] = f[1]
		if b, ok := f[1].(bool); ok {
			rec.boolean(k, b)
		} else {
			rec.str(k, f[1].(string))
		}
	}
	t.mu.Lock()
	if c := t.components[string(ComponentKindInformer)+"/"+informer]; c != nil {
		for _, k := range informerScopeFields {
			delete(c, k)
		}
	}
	t.informerCounts(informer)
	t.mu.Unlock()
	t.component(informer, ComponentKindInformer, fields)
	it := t.InformerTopic(informer)
	it.record(rec, it.informerStartedLocked)
}

// List: a LIST finished (errText "" when it succeeded).
func (t *Telemetry) List(informer, resourceVersion string, items int, duration time.Duration, errText string) {
	it := t.InformerTopic(informer)
	it.record(newRecord(RecordKindList).str("rv", resourceVersion).int("items", items).
		float("duration", duration.Seconds()).optStr("error", errText),
		func(now float64) next { return it.listedLocked(now, errText) })
	if errText == "" {
		t.component(informer, ComponentKindInformer, map[string]any{"rv": resourceVersion, "listed": items})
	}
}

// WatchStart: a WATCH opened from resourceVersion.
func (t *Telemetry) WatchStart(informer, resourceVersion string) {
	it := t.InformerTopic(informer)
	it.record(newRecord(RecordKindWatchStart).str("rv", resourceVersion),
		func(now float64) next { return it.watchStartedLocked(now, resourceVersion) })
}

// WatchEvent: one watch event reached the cache.
func (t *Telemetry) WatchEvent(informer string, eventType WatchEventType, key, resourceVersion string) {
	t.InformerTopic(informer).WatchEvent(eventType, key, resourceVersion)
}

// Bookmark: a BOOKMARK advanced the resourceVersion.
func (t *Telemetry) Bookmark(informer, resourceVersion string) {
	it := t.InformerTopic(informer)
	it.record(newRecord(RecordKindBookmark).str("rv", resourceVersion),
		func(now float64) next { return it.watchAliveLocked(now, resourceVersion) })
	t.component(informer, ComponentKindInformer, map[string]any{"rv": resourceVersion})
}

// WatchEnd: a watch ended (errText "" unless reason is an error).
func (t *Telemetry) WatchEnd(informer string, reason WatchEndReason, errText string) {
	it := t.InformerTopic(informer)
	it.record(newRecord(RecordKindWatchEnd).str("reason", string(reason)).optStr("error", errText),
		func(now float64) next { return it.watchEndedLocked(now, reason) })
}

// Backoff: the reflector waits delay before listing or watching again.
func (t *Telemetry) Backoff(informer string, delay time.Duration, reason string) {
	t.emit(TopicKindInformer, informer, newRecord(RecordKindBackoff).float("delay", delay.Seconds()).
		str("reason", reason))
}

// ReflectorState: the reflector's state changed.
func (t *Telemetry) ReflectorState(informer string, state ReflectorState) {
	it := t.InformerTopic(informer)
	it.record(newRecord(RecordKindState).str("state", string(state)),
		func(now float64) next { return it.reflectorStateLocked(now, state) })
	if state == ReflectorStateSynced {
		t.component(informer, ComponentKindInformer, map[string]any{"synced": true})
	} else {
		t.component(informer, ComponentKindInformer, map[string]any{"state": string(state)})
	}
}

// StoreUpsert: obj is in the cache under key now.
func (t *Telemetry) StoreUpsert(informer, key string, obj any) {
	t.InformerTopic(informer).StoreUpsert(key, obj)
}

// StoreDelete: key left the cache.
func (t *Telemetry) StoreDelete(informer, key string) {
	t.InformerTopic(informer).StoreDelete(key)
}

// StoreReplace: the cache now holds exactly items (a relist), key -> object.
func (t *Telemetry) StoreReplace(informer string, items map[string]any) {
	topic := t.Topic(TopicKindInformer, informer)
	gone := 0
	for _, key := range t.pub.StateKeys(topic) {
		if _, ok := items[key]; !ok {
			t.pub.SetState(topic, key, nil)
			gone++
		}
	}
	it := t.InformerTopic(informer)
	p := t.pub
	for key, obj := range items {
		s := Summarize(obj)
		p.mu.Lock()
		it.setSummaryLocked(key, s)
		p.mu.Unlock()
	}
	p.mu.Lock()
	it.counts.Cache += gone + len(items)
	p.mu.Unlock()
}

// Fifo: a delta entered (FifoOpQueued) or left (FifoOpPopped) the informer's queue.
func (t *Telemetry) Fifo(informer string, op FifoOp, key string, delta DeltaType, depth int) {
	t.InformerTopic(informer).Fifo(op, key, delta, depth)
}

// HandlerCall is one event handler call: which handler, which event, its outcome.
type HandlerCall struct {
	Handler   string
	Event     HandlerEvent
	Key       string
	Outcome   HandlerOutcome
	Duration  time.Duration
	Error     string
	Old, New  any       // the objects the handler received (only their resourceVersions are published)
	Tombstone bool      // a delete seen only by a relist: the last known object
	At        time.Time // when the call returned, the record's time (zero: now)
}

// Handler: an event handler ran.
func (t *Telemetry) Handler(informer string, c HandlerCall) {
	t.InformerTopic(informer).Handler(c)
}

// InformerTopic is one informer's topic, for an observer that publishes every event of the
// informer: it saves looking the informer up per call. Its methods are safe for concurrent use.
type InformerTopic struct {
	tel    *Telemetry
	name   string
	topic  string
	ts     *topicState     // the publisher's, from the first record on (guarded by the publisher's mu)
	counts *informerCounts // its fields guarded by the publisher's mu

	// mu guards the informer's rules and findings (findings.go). Lock order: mu, then the
	// Telemetry's, then the publisher's.
	mu       sync.Mutex
	rules    informerRules
	findings findingBook
}

// InformerTopic is informer's topic handle (the same one for every call with the same name).
func (t *Telemetry) InformerTopic(informer string) *InformerTopic {
	t.mu.Lock()
	defer t.mu.Unlock()
	it := t.infTopics[informer]
	if it == nil {
		it = &InformerTopic{tel: t, name: informer, topic: t.topicLocked(TopicKindInformer, informer),
			counts: t.informerCounts(informer)}
		it.findings = findingBook{tel: t, comp: ComponentKindInformer, name: informer, publish: it.publishRecord}
		t.infTopics[informer] = it
	}
	return it
}

// Topic is the informer's topic name.
func (it *InformerTopic) Topic() string { return it.topic }

func (it *InformerTopic) state() *topicState { // the publisher's mu held
	if it.ts == nil {
		it.ts = it.tel.pub.topic(it.topic)
	}
	return it.ts
}

// publishRecord publishes rec; the caller calls the publisher's after with the result once it
// holds no lock.
func (it *InformerTopic) publishRecord(rec []byte) next {
	p := it.tel.pub
	p.mu.Lock()
	n := p.publishLocked(it.state(), rec)
	p.mu.Unlock()
	return n
}

// record publishes r at now on the informer's topic, then (detection on) applies rule, under
// it.mu: a finding's record follows the record of the call that opened, changed or closed it.
func (it *InformerTopic) record(r *record, rule func(now float64) next) {
	if it.tel.detect == nil {
		next := it.publishRecord(r.done(it.tel.now()))
		r.release()
		it.tel.pub.after(next)
		return
	}
	it.mu.Lock()
	now := it.tel.now()
	next := it.publishRecord(r.done(now))
	r.release()
	next = max(next, rule(now))
	it.mu.Unlock()
	it.tel.pub.after(next)
}

// publish publishes r (finished at now) and counts it with count, under the publisher's lock.
func (it *InformerTopic) publish(r *record, now float64, count func(c *informerCounts)) {
	rec := r.done(now)
	p := it.tel.pub
	p.mu.Lock()
	next := p.publishLocked(it.state(), rec)
	count(it.counts)
	p.mu.Unlock()
	r.release()
	p.after(next)
}

func countWatch(c *informerCounts)   { c.Watch++ }
func countHandler(c *informerCounts) { c.Handlers++ }
func countHandlerError(c *informerCounts) {
	c.Handlers++
	c.HandlerErrors++
}

// WatchEvent is Telemetry.WatchEvent for this informer.
func (it *InformerTopic) WatchEvent(eventType WatchEventType, key, resourceVersion string) {
	it.WatchEventAt(time.Time{}, eventType, key, resourceVersion)
}

// WatchEventAt is WatchEvent at time at (zero: now): for an observer that learns of the event only
// after something it caused (a handler call that started at at).
func (it *InformerTopic) WatchEventAt(at time.Time, eventType WatchEventType, key, resourceVersion string) {
	r := newRecord(RecordKindWatch).str("type", string(eventType)).str("key", key).str("rv", resourceVersion)
	if it.tel.detect == nil {
		it.publish(r, it.eventTime(at), countWatch)
		return
	}
	it.mu.Lock()
	now := it.eventTime(at)
	it.publish(r, now, countWatch)
	n := it.watchAliveLocked(now, resourceVersion)
	it.mu.Unlock()
	it.tel.pub.after(n)
}

// eventTime is now, or at when that is earlier (and not zero).
func (it *InformerTopic) eventTime(at time.Time) float64 {
	now := it.tel.now()
	if !at.IsZero() {
		now = min(now, wallMs(at))
	}
	return now
}

// StoreUpsert is Telemetry.StoreUpsert for this informer.
func (it *InformerTopic) StoreUpsert(key string, obj any) {
	s := Summarize(obj)
	p := it.tel.pub
	p.mu.Lock()
	it.setSummaryLocked(key, s)
	it.counts.Cache++
	p.mu.Unlock()
}

// setSummaryLocked sets key's state value to s, written straight into the entry.
func (it *InformerTopic) setSummaryLocked(key string, s Summary) { // the publisher's mu held
	t := it.state()
	e := it.tel.pub.entry(t, key)
	e.val = s.appendJSON(e.val[:0])
	t.setLive(e, valueRaw)
}

// StoreDelete is Telemetry.StoreDelete for this informer.
func (it *InformerTopic) StoreDelete(key string) {
	p := it.tel.pub
	p.mu.Lock()
	it.state().deleteLocked(key)
	it.counts.Cache++
	p.mu.Unlock()
}

// Fifo is Telemetry.Fifo for this informer.
func (it *InformerTopic) Fifo(op FifoOp, key string, delta DeltaType, depth int) {
	r := newRecord(RecordKindFifo).str("op", string(op)).str("key", key).str("delta", string(delta)).
		int("depth", depth)
	rec := r.done(it.tel.now())
	p := it.tel.pub
	p.mu.Lock()
	next := p.publishLocked(it.state(), rec)
	c := it.counts
	c.FifoDepth = depth
	if op == FifoOpQueued {
		c.Fifo++
	}
	p.mu.Unlock()
	r.release()
	p.after(next)
}

// Handler is Telemetry.Handler for this informer.
func (it *InformerTopic) Handler(c HandlerCall) {
	r := newRecord(RecordKindHandler).str("handler", c.Handler).str("event", string(c.Event)).str("key", c.Key).
		str("outcome", string(c.Outcome)).float("duration", c.Duration.Seconds()).optStr("error", c.Error).
		optStr("rv", ResourceVersion(c.New)).optStr("old_rv", ResourceVersion(c.Old))
	if c.Tombstone {
		r.boolean("tombstone", true)
	}
	var now float64
	if c.At.IsZero() {
		now = it.tel.now()
	} else {
		now = wallMs(c.At)
	}
	if c.Outcome == HandlerOutcomeError {
		it.publish(r, now, countHandlerError)
	} else {
		it.publish(r, now, countHandler)
	}
}

// -- workqueue ---------------------------------------------------------------------------------

// QueueRecord is one workqueue operation; Delay, Requeues and Duration are optional (nil: null).
type QueueRecord struct {
	Op       QueueOp
	Key      string
	Depth    int
	Delay    *float64 // seconds
	Requeues *int
	Duration *float64 // seconds
}

// Queue: one workqueue operation. The key's item follows by FoldQueueOp.
func (t *Telemetry) Queue(queue string, q QueueRecord) { t.QueueTopic(queue).Record(q) }

// QueueItem is key's current item on queue (what the fold of its records says), if any.
func (t *Telemetry) QueueItem(queue, key string) (QueueItem, bool) {
	return t.QueueTopic(queue).Item(key)
}

// QueueTopic is one queue's topic, for a wrapper that publishes every operation of the queue: it
// saves looking the queue up per operation. Its methods are safe for concurrent use.
type QueueTopic struct {
	tel   *Telemetry
	topic string
	ts    *topicState // the publisher's, from the first record on (guarded by the publisher's mu)
	// ctrl is the controller named like the queue, whose findings its records feed (v1.7: waiting,
	// and a retry's delay).
	ctrl *ControllerTopic
}

// QueueTopic is queue's topic handle (the same one for every call with the same name).
func (t *Telemetry) QueueTopic(queue string) *QueueTopic {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queueTopics[queue]
	if q == nil {
		q = &QueueTopic{tel: t, topic: t.topicLocked(TopicKindQueue, queue), ctrl: t.controllerTopicLocked(queue)}
		t.queueTopics[queue] = q
	}
	return q
}

// Topic is the queue's topic name.
func (q *QueueTopic) Topic() string { return q.topic }

// Record publishes one operation of the queue and returns the key's item after it (ok false: the
// key is gone, or the record has no key). The record, the fold and the state change happen
// under the publisher's one lock, so that two goroutines' operations on one queue reach the state
// in the order of their records, and a frame never has the one without the other.
func (q *QueueTopic) Record(r QueueRecord) (QueueItem, bool) {
	detect := q.tel.detect != nil
	if detect {
		q.ctrl.mu.Lock()
	}
	now := q.tel.now()
	rb := newRecord(RecordKindQueue).str("op", string(r.Op)).str("key", r.Key).int("depth", r.Depth).
		optFloat("delay", r.Delay).optInt("requeues", r.Requeues).optFloat("duration", r.Duration)
	rec := rb.done(now)
	p := q.tel.pub
	var item QueueItem
	var ok bool
	p.mu.Lock()
	if q.ts == nil {
		q.ts = p.topic(q.topic)
	}
	next := p.publishLocked(q.ts, rec)
	if r.Key != "" {
		item, ok = p.foldQueueLocked(q.ts, r.Key, r.Op, now, r.Delay, r.Requeues)
	}
	p.mu.Unlock()
	rb.release()
	if detect {
		next = max(next, q.ctrl.queueOpLocked(r.Op, r.Key, now, r.Delay))
		q.ctrl.mu.Unlock()
	}
	p.after(next)
	if hook := q.tel.hook; hook != nil && r.Op == QueueOpAddRateLimited && r.Key != "" {
		hook.RateLimited(q.ctrl.name, r.Key, r.Delay)
	}
	return item, ok
}

// RecordAdd publishes an add of key at depth, classified from the key's current item the way
// client-go's queue decides it: a key queued or already dirty is a dedup, one processing a defer,
// any other an add. Classification, record and fold happen under the publisher's one lock.
func (q *QueueTopic) RecordAdd(key string, depth int) (QueueOp, QueueItem, bool) {
	detect := q.tel.detect != nil
	if detect {
		q.ctrl.mu.Lock()
	}
	now := q.tel.now()
	p := q.tel.pub
	p.mu.Lock()
	if q.ts == nil {
		q.ts = p.topic(q.topic)
	}
	op := QueueOpAdd
	e := q.ts.state[key]
	if e != nil && e.live && e.kind == valueQueueItem {
		switch {
		case e.item.S == QueueItemStateQueued || e.item.Dirty:
			op = QueueOpDedup
		case e.item.S == QueueItemStateProcessing:
			op = QueueOpDefer
		}
	}
	next, item, ok := q.publishOpLocked(e, op, key, depth, nil, now)
	p.mu.Unlock()
	if detect {
		next = max(next, q.ctrl.queueOpLocked(op, key, now, nil))
		q.ctrl.mu.Unlock()
	}
	p.after(next)
	return op, item, ok
}

// RecordTimed publishes a get or a done of key at depth whose duration is read off the key's item
// in the same step: for get, how long it waited queued; for done, how long it was processing (none
// when the item is not in that state). It returns the item as the get or done found it (had
// false: none).
//
// A get of a key the item does not have queued is the inner queue handing out a key whose delayed
// add fired before the wrapper's timer did: that add is published first, at depth+1 (addedFirst;
// the caller drops its timer), and the item returned is the one it made. A wrapper would otherwise ask Item, then Record: two turns of the
// publisher's lock and two lookups of the key on every get and every done.
func (q *QueueTopic) RecordTimed(op QueueOp, key string, depth int) (prev QueueItem, had, addedFirst bool) {
	detect := q.tel.detect != nil
	if detect {
		q.ctrl.mu.Lock()
	}
	now := q.tel.now()
	p := q.tel.pub
	var next next
	p.mu.Lock()
	if q.ts == nil {
		q.ts = p.topic(q.topic)
	}
	e := q.ts.state[key]
	had = e != nil && e.live && e.kind == valueQueueItem
	if had {
		prev = e.item
	}
	if op == QueueOpGet && (!had || prev.S != QueueItemStateQueued) {
		next, prev, had = q.publishOpLocked(e, QueueOpAdd, key, depth+1, nil, now)
		if detect { // its findings publish too: not under the publisher's lock
			p.mu.Unlock()
			next = max(next, q.ctrl.queueOpLocked(QueueOpAdd, key, now, nil))
			p.mu.Lock()
		}
		e = q.ts.state[key]
		addedFirst = true
	}
	in := QueueItemStateProcessing
	if op == QueueOpGet {
		in = QueueItemStateQueued
	}
	var took *float64
	var seconds float64
	if had && prev.S == in && prev.Since > 0 {
		// since and now are both µs-rounded wall ms: their difference, rounded to the µs, is what
		// the clock said (and is written without strconv).
		seconds = math.Round((now-prev.Since)*1e3) / 1e6
		took = &seconds
	}
	n, _, _ := q.publishOpLocked(e, op, key, depth, took, now)
	next = max(next, n)
	p.mu.Unlock()
	if detect {
		next = max(next, q.ctrl.queueOpLocked(op, key, now, nil))
		q.ctrl.mu.Unlock()
	}
	p.after(next)
	return prev, had, addedFirst
}

// publishOpLocked publishes op of key at depth (no delay, no requeues; duration nil: none) and
// folds it into key's item, e its entry (nil: none) (publisher's mu held).
func (q *QueueTopic) publishOpLocked(e *stateEntry, op QueueOp, key string, depth int, duration *float64,
	now float64) (next, QueueItem, bool) {
	p := q.tel.pub
	rb := newRecord(RecordKindQueue).str("op", string(op)).str("key", key).int("depth", depth).
		optFloat("delay", nil).optInt("requeues", nil).optFloat("duration", duration)
	n := p.publishLocked(q.ts, rb.done(now))
	rb.release()
	if key == "" {
		return n, QueueItem{}, false
	}
	item, ok := p.foldQueueEntryLocked(q.ts, e, key, op, now, nil, nil)
	return n, item, ok
}

// Item is key's current item, if any.
func (q *QueueTopic) Item(key string) (QueueItem, bool) {
	p := q.tel.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := q.ts
	if ts == nil {
		if ts = p.topics[q.topic]; ts == nil {
			return QueueItem{}, false
		}
	}
	if e := ts.state[key]; e != nil && e.live && e.kind == valueQueueItem {
		return e.item, true
	}
	return QueueItem{}, false
}

// foldQueueLocked applies one queue record to key's item in t's state (FoldQueueOp).
func (p *Publisher) foldQueueLocked(t *topicState, key string, op QueueOp, now float64, delay *float64,
	requeues *int) (QueueItem, bool) { // p.mu held
	return p.foldQueueEntryLocked(t, t.state[key], key, op, now, delay, requeues)
}

// foldQueueEntryLocked is foldQueueLocked with key's entry (nil: none) already looked up.
func (p *Publisher) foldQueueEntryLocked(t *topicState, e *stateEntry, key string, op QueueOp, now float64,
	delay *float64, requeues *int) (QueueItem, bool) { // p.mu held
	var prev *QueueItem
	if e != nil && e.live && e.kind == valueQueueItem {
		prev = &e.item
	}
	item, ok := FoldQueueOp(prev, op, now, delay, requeues)
	if !ok {
		t.deleteLocked(key)
		return item, false
	}
	if e == nil {
		e = p.entry(t, key)
	}
	e.item = item
	e.val = e.val[:0]
	t.setLive(e, valueQueueItem)
	return item, true
}

// -- controllers -------------------------------------------------------------------------------

// Controller: the controller's shape (the informers it watches, its worker count, started).
func (t *Telemetry) Controller(controller string, watches []string, workers int, started bool) {
	if watches == nil {
		watches = []string{}
	}
	t.component(controller, ComponentKindController, map[string]any{"watches": watches, "workers": workers,
		"started": started})
	t.mu.Lock()
	t.controllerCounts(controller)
	t.mu.Unlock()
}

type reconcileKey struct{}

// ControllerTopic is one controller's topic, for a wrapper that publishes every Reconcile of the
// controller: it saves looking the controller up per call. Its methods are safe for concurrent use.
type ControllerTopic struct {
	tel      *Telemetry
	name     string
	ctxValue any // name, boxed once for the Reconcile contexts
	topic    string
	ts       *topicState       // the publisher's, from the first record on (publisher's mu)
	counts   *controllerCounts // from the first ReconcileEnd on (tel.mu)
	known    atomic.Bool       // the controller has its components entry
	// lastResult is counts.LastResult as last set (written under tel.mu), read without it.
	lastResult atomic.Value // ReconcileResult

	// mu guards what follows: provenance and findings (provenance.go, findings.go). Lock order:
	// mu, then the Telemetry's, then the publisher's.
	mu        sync.Mutex
	keys      map[string]*keyState // keys with something kept (keyState.empty)
	written   written
	inflight  map[string]*writesInFlight // writes sent, not yet answered (provenance.go)
	parked    []parkedEvent              // event records waiting for those answers, in order (provenance.go)
	findings  findingBook
	streaking map[string]*keyState // keys with a self-triggered streak
	running   map[string]*keyState // keys with an attempt running
	due       dueHeap              // ready keys by when they wait too long (stale entries skipped)
	limiter   RateLimiterSpec      // its queue's, for failing's max_delay
}

// keyLocked is key's state, created if need be.
func (c *ControllerTopic) keyLocked(key string) *keyState { // c.mu held
	ks := c.keys[key]
	if ks == nil {
		if c.keys == nil {
			c.keys = map[string]*keyState{}
		}
		ks = &keyState{}
		c.keys[key] = ks
	}
	return ks
}

// publish publishes rec on the controller's topic; the caller calls the publisher's after with the
// result once it holds no lock. With detection on it is called with c.mu held, so that records and
// the provenance and findings they change keep one order.
func (c *ControllerTopic) publish(rec []byte) next {
	p := c.tel.pub
	p.mu.Lock()
	if c.ts == nil {
		c.ts = p.topic(c.topic)
	}
	n := p.publishLocked(c.ts, rec)
	p.mu.Unlock()
	return n
}

// ControllerTopic is controller's topic handle (the same one for every call with the same name).
func (t *Telemetry) ControllerTopic(controller string) *ControllerTopic {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.ctrlTopics[controller]
	if c == nil {
		c = t.controllerTopicLocked(controller)
	}
	return c
}

func (t *Telemetry) controllerTopicLocked(controller string) *ControllerTopic { // t.mu held
	c := t.ctrlTopics[controller]
	if c == nil {
		c = &ControllerTopic{tel: t, name: controller, ctxValue: controller,
			topic: t.topicLocked(TopicKindController, controller)}
		c.findings = findingBook{tel: t, comp: ComponentKindController, name: controller, publish: c.publish}
		t.ctrlTopics[controller] = c
	}
	return c
}

// ReconcileStart: a worker called Reconcile for key. The returned context names the controller, so
// API writes made with it are attributed to this Reconcile (see Request).
func (t *Telemetry) ReconcileStart(ctx context.Context, controller, key string, worker int) context.Context {
	return t.ControllerTopic(controller).ReconcileStart(ctx, key, worker)
}

// ReconcileStart is Telemetry.ReconcileStart for this controller. The record carries the
// triggers pending for key (provenance.go), which it takes.
func (c *ControllerTopic) ReconcileStart(ctx context.Context, key string, worker int) context.Context {
	rb := newRecord(RecordKindReconcileStart).str("key", key).int("worker", worker)
	ctx = context.WithValue(ctx, reconcileKey{}, c.ctxValue)
	hook := c.tel.hook
	if c.detect() == nil {
		next := c.publish(rb.done(c.tel.now()))
		rb.release()
		if hook != nil {
			ctx = hook.ReconcileStart(ctx, c.name, key, worker, Attempt{})
		}
		c.tel.pub.after(next)
		return ctx
	}
	c.mu.Lock()
	// A parked event that maps to this key is one of its triggers: out it goes now, with the events
	// parked before it (an attempt cannot wait; if the event is its key's own write, the attempt
	// that made it was answered before it ended).
	released := c.releaseParkedLocked(c.tel.now(), key)
	ks := c.keyLocked(key)
	pt := &ks.triggers
	rb.key("triggers")
	rb.b = append(rb.b, '[')
	for i := range pt.list {
		if i > 0 {
			rb.b = append(rb.b, ',')
		}
		rb.b = pt.list[i].appendJSON(rb.b)
	}
	rb.b = append(rb.b, ']')
	rb.int("trigger_count", pt.count)
	selfTriggered := pt.count > 0 && pt.allSelf
	if selfTriggered {
		rb.boolean("self_triggered", true)
	}
	now := c.tel.now()
	next := c.publish(rb.done(now))
	rb.release()
	next = max(next, released, c.attemptStartedLocked(key, ks, worker, now, selfTriggered, pt.list))
	if hook != nil {
		ctx = hook.ReconcileStart(ctx, c.name, key, worker, hookTriggers(pt))
	}
	clear(pt.list) // the links and fields the hook or the record held
	*pt = pendingTriggers{list: pt.list[:0]}
	ks.hasRateLimited = false
	c.mu.Unlock()
	c.tel.pub.after(next)
	return ctx
}

// ReconcilingController is the controller whose Reconcile ctx belongs to ("" if none).
func ReconcilingController(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	c, _ := ctx.Value(reconcileKey{}).(string)
	return c
}

// ReconcileEnd: Reconcile returned (or panicked) with result.
func (t *Telemetry) ReconcileEnd(controller, key string, worker int, duration time.Duration, result ReconcileResult,
	requeueAfter time.Duration, errText string) {
	t.ControllerTopic(controller).ReconcileEnd(key, worker, duration, result, requeueAfter, errText)
}

// ReconcileEnd is Telemetry.ReconcileEnd for this controller. The record and the key's summary
// (the topic's state) change under the publisher's one lock; a retry or requeue_after trigger is
// left for the key's next attempt.
func (c *ControllerTopic) ReconcileEnd(key string, worker int, duration time.Duration, result ReconcileResult,
	requeueAfter time.Duration, errText string) {
	t := c.tel
	rb := newRecord(RecordKindReconcile).str("key", key).int("worker", worker).
		float("duration", duration.Seconds()).str("result", string(result)).
		float("requeue_after", requeueAfter.Seconds()).optStr("error", errText)
	p := t.pub
	detect := c.detect() != nil
	if detect {
		c.mu.Lock()
	}
	now := t.now()
	rec := rb.done(now)
	p.mu.Lock()
	if c.ts == nil {
		c.ts = p.topic(c.topic)
	}
	next := p.publishLocked(c.ts, rec)
	e := p.entry(c.ts, key)
	e.count++            // attempts
	if cap(e.val) == 0 { // a key's first summary: one allocation, not append's four growths
		e.val = make([]byte, 0, reconcileSummaryCap+len(errText))
	}
	e.val = appendReconcileSummary(e.val[:0], e.count, string(result), now, duration.Seconds(), errText)
	c.ts.setLive(e, valueRaw)
	p.mu.Unlock()
	rb.release()
	if detect {
		count := 0
		if ks := c.keys[key]; ks != nil {
			count = ks.triggers.count
		}
		next = max(next, c.attemptEndedLocked(key, result, requeueAfter.Seconds(), errText, now))
		if hook := t.hook; hook != nil {
			c.linkLastTrigger(key, count, hook.ReconcileEnd(c.name, key, result, requeueAfter, errText))
		}
		c.mu.Unlock()
	} else if hook := t.hook; hook != nil {
		hook.ReconcileEnd(c.name, key, result, requeueAfter, errText)
	}
	p.after(next)
	if last, _ := c.lastResult.Load().(ReconcileResult); last == result && c.known.Load() {
		return // the counts say so already: no Telemetry lock on every attempt
	}
	t.mu.Lock()
	if c.counts == nil {
		c.counts = t.controllerCounts(c.name)
	}
	c.counts.LastResult = string(result)
	c.lastResult.Store(result)
	known := c.known.Load()
	if !known {
		_, known = t.components[string(ComponentKindController)+"/"+c.name]
	}
	t.mu.Unlock()
	if !known {
		t.component(c.name, ComponentKindController, nil)
	}
	c.known.Store(true)
}

// Request: an API request finished (code 0: no response). Writes made with a Reconcile's context
// become that controller's write records; reads and requests from elsewhere are not published.
func (t *Telemetry) Request(ctx context.Context, method, path string, code int, duration time.Duration) {
	t.RequestRV(ctx, method, path, code, duration, "")
}

// RequestRV is Request with rv, the metadata.resourceVersion of the object the API server answered
// with ("" when none, not JSON, or an error status; v1.7). The write record says it, and a 2xx
// write's rv is remembered: its watch event, when it comes back, is the controller's own (self).
func (t *Telemetry) RequestRV(ctx context.Context, method, path string, code int, duration time.Duration, rv string) {
	if method == "GET" {
		return
	}
	controller := ReconcilingController(ctx)
	if controller == "" {
		return
	}
	r := newRecord(RecordKindWrite).str("method", method).str("path", path).int("code", code).
		float("duration", duration.Seconds())
	if rv != "" {
		r.str("rv", rv)
	}
	t.emit(TopicKindController, controller, r)
	if rv != "" && code >= 200 && code < 300 && t.detect != nil {
		c := t.ControllerTopic(controller)
		c.mu.Lock()
		c.written.add(rv, writtenKeyOf(path))
		c.mu.Unlock()
	}
	if t.hook != nil {
		t.hook.Request(ctx, controller, method, path, code, duration, rv)
	}
	t.mu.Lock()
	c := t.controllerCounts(controller)
	c.Writes++
	if code == 0 || code >= 400 {
		c.WriteErrors++
	}
	if code == 409 { // an optimistic-concurrency conflict: a write from a stale read
		c.WriteConflicts++
	}
	t.mu.Unlock()
}

// WriteRefused: the worker refused a write itself (reason: it is read-only, clientgo.GuardWrites)
// and sent nothing. Not a Request with some code: a refused write is neither an API write nor a
// failed one, so it is published as a write record with "refused" (v1.4) and counted apart.
func (t *Telemetry) WriteRefused(ctx context.Context, method, path string, reason WriteRefusal) {
	controller := ReconcilingController(ctx)
	if controller == "" {
		return
	}
	t.emit(TopicKindController, controller, newRecord(RecordKindWrite).str("method", method).str("path", path).
		int("code", 0).float("duration", 0).str("refused", string(reason)))
	if t.hook != nil {
		t.hook.WriteRefused(ctx, controller, method, path, reason)
	}
	t.mu.Lock()
	t.controllerCounts(controller).WritesRefused++
	t.mu.Unlock()
}

// Leader: leadership of lock name changed or was observed.
func (t *Telemetry) Leader(name, identity string, leader bool, holder string) {
	t.emit(TopicKindController, LeaderPrefix+name, newRecord(RecordKindLeader).str("identity", identity).
		boolean("leader", leader).optStr("holder", holder))
	var h any
	if holder != "" {
		h = holder
	}
	t.component(name, ComponentKindLease, map[string]any{"identity": identity, "leader": leader, "holder": h})
}

// Status sets (value nil: deletes) a row of a table the controller reports about itself.
func (t *Telemetry) Status(table, key string, value map[string]any) {
	var b []byte
	if value != nil {
		b = mustJSON(value)
	}
	t.pub.SetState(t.Topic(TopicKindStatus, table), key, b)
}

// SetupError: a controller could not be set up.
func (t *Telemetry) SetupError(controller, errText string) {
	r := newRecord(RecordKindSetupError).str("controller", controller).str("error", errText)
	t.pub.Publish(t.ErrorsTopic, r.done(t.now()))
	r.release()
}

// DescribeWrites adds to the cluster entry name (as DescribeCluster named it) whether it is
// ctrlscope's simulated cluster (nil: not known yet) and whether this worker writes to it (v1.2).
func (t *Telemetry) DescribeWrites(name string, simulated *bool, writes WriteMode) {
	fields := map[string]any{"writes": string(writes)}
	if simulated != nil {
		fields["simulated"] = *simulated
	}
	t.component(name, ComponentKindCluster, fields)
}

// -- raw watcher (v1.6) -------------------------------------------------------------------------
//
// A raw watcher is a program's own watch loop (clientset...Watch in a for loop): no reflector, no
// FIFO, no cache. These calls report what the loop does; go/cmd/raw-watcher shows them in use.

// Watcher: a raw watch loop started on resource (group/version/resource, "apps/v1/deployments") in
// namespace ("": all), and what it does when its stream ends.
func (t *Telemetry) Watcher(watcher, resource, namespace string, variant WatcherVariant) {
	var ns any
	if namespace != "" {
		ns = namespace
	}
	t.mu.Lock()
	t.watcherCountsLocked(watcher)
	t.mu.Unlock()
	t.component(watcher, ComponentKindWatcher, map[string]any{"resource": resource, "namespace": ns, "variant": string(variant)})
	t.emit(TopicKindWatcher, watcher, newRecord(RecordKindWatcher).str("resource", resource).optStr("namespace", namespace).
		str("variant", string(variant)))
}

func (t *Telemetry) watcherCountsLocked(name string) *watcherCounts { // t.mu held
	c := t.watchers[name]
	if c == nil {
		c = &watcherCounts{}
		t.watchers[name] = c
	}
	return c
}

func (t *Telemetry) countWatcher(name string, count func(c *watcherCounts)) {
	t.mu.Lock()
	count(t.watcherCountsLocked(name))
	t.mu.Unlock()
}

// WatcherState: the loop is watching, or stopped (it returned or panicked: nothing watches any more,
// whatever the program does next). The component says since when.
func (t *Telemetry) WatcherState(watcher string, state ReflectorState) {
	now := t.now()
	t.emit(TopicKindWatcher, watcher, newRecord(RecordKindState).str("state", string(state)))
	t.component(watcher, ComponentKindWatcher, map[string]any{"state": string(state), "since": now})
}

// WatcherWatchStart: the loop opened a watch from resourceVersion ("": from now, existing objects first).
func (t *Telemetry) WatcherWatchStart(watcher, resourceVersion string) {
	t.emit(TopicKindWatcher, watcher, newRecord(RecordKindWatchStart).str("rv", resourceVersion))
	t.countWatcher(watcher, func(c *watcherCounts) { c.WatchStarts++ })
}

// WatcherEvent: the loop received one watch event.
func (t *Telemetry) WatcherEvent(watcher string, eventType WatchEventType, key, resourceVersion string) {
	t.emit(TopicKindWatcher, watcher, newRecord(RecordKindWatch).str("type", string(eventType)).str("key", key).
		str("rv", resourceVersion))
	t.countWatcher(watcher, func(c *watcherCounts) { c.Watch++ })
}

// WatcherWatchEnd: the loop's watch stream ended (errText "" unless there was an error).
func (t *Telemetry) WatcherWatchEnd(watcher string, reason WatchEndReason, errText string) {
	t.emit(TopicKindWatcher, watcher, newRecord(RecordKindWatchEnd).str("reason", string(reason)).optStr("error", errText))
	t.component(watcher, ComponentKindWatcher, map[string]any{"last_end": string(reason)})
	t.countWatcher(watcher, func(c *watcherCounts) {
		c.WatchEnds++
		if reason == WatchEndReasonExpired {
			c.Expired++
		}
	})
}

// WatcherRead: the loop read object key from the API server (GET path; code 0: no response).
func (t *Telemetry) WatcherRead(watcher, key, path string, code int, duration time.Duration) {
	t.emit(TopicKindWatcher, watcher, newRecord(RecordKindRead).str("key", key).str("path", path).int("code", code).
		float("duration", duration.Seconds()))
	t.countWatcher(watcher, func(c *watcherCounts) {
		c.Reads++
		if code == 0 || code >= 400 {
			c.ReadErrors++
		}
	})
}
