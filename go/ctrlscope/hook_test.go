package ctrlscope

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
)

// recordingHook notes what a Hook is handed; its links are strings naming the call that left them.
type recordingHook struct {
	events   []EventDerived
	attempts []Attempt
	ended    []ReconcileResult
	delays   []float64
	writes   []string // "controller method path rv attempt"
}

type hookAttemptKey struct{}

func (h *recordingHook) Event(controller string, e EventCall, d EventDerived) any {
	h.events = append(h.events, d)
	if d.Self {
		return "self " + e.Key + " " + d.RV
	}
	return string(e.Event) + " " + e.Key
}

func (h *recordingHook) ReconcileStart(ctx context.Context, controller, key string, worker int, a Attempt) context.Context {
	h.attempts = append(h.attempts, a)
	return context.WithValue(ctx, hookAttemptKey{}, len(h.attempts))
}

func (h *recordingHook) ReconcileEnd(controller, key string, result ReconcileResult, requeueAfter time.Duration,
	errText string) any {
	h.ended = append(h.ended, result)
	return "attempt " + string(result)
}

func (h *recordingHook) RateLimited(controller, key string, delay *float64) {
	h.delays = append(h.delays, *delay)
}

func (h *recordingHook) Request(ctx context.Context, controller, method, path string, code int, _ time.Duration, rv string) {
	n, _ := ctx.Value(hookAttemptKey{}).(int)
	h.writes = append(h.writes, controller+" "+method+" "+path+" "+rv+" "+string(rune('0'+n)))
}

func (h *recordingHook) WriteRefused(context.Context, string, string, string, WriteRefusal) {}

func obj(rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns", "resourceVersion": rv},
		"data":     map[string]any{"n": rv}}}
}

// A Hook gets each attempt's triggers as its reconcile_start lists them, each with the link the
// call that left it returned: events, a retry (with the rate limiter's delay that followed it) and
// the controller's own write coming back.
func TestHookSeesTheProvenanceWithItsLinks(t *testing.T) {
	pub, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{Name: "hook", BufferLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h := &recordingHook{}
	tel := NewTelemetry(pub, "hook", TelemetryOptions{Hook: h})
	ct, qt := tel.ControllerTopic("c"), tel.QueueTopic("c")
	key := "ns/a"
	ct.Event(EventCall{Event: ControllerEventCreate, Key: key, Requests: []string{key}, New: obj("1")})
	ct.Event(EventCall{Event: ControllerEventUpdate, Key: key, Requests: []string{key}, Old: obj("1"), New: obj("2"),
		Source: "controller/c (For)"})
	ct.Event(EventCall{Event: ControllerEventUpdate, Key: "ns/b", FilteredBy: "P", Old: obj("1"), New: obj("2")})
	ct.ReconcileStart(context.Background(), key, 0)
	ct.ReconcileEnd(key, 0, time.Millisecond, ReconcileResultError, 0, "boom")
	delay := 0.005
	qt.Record(QueueRecord{Op: QueueOpAddRateLimited, Key: key, Depth: 0, Delay: &delay})
	ctx := ct.ReconcileStart(context.Background(), key, 0)
	tel.RequestRV(ctx, "PUT", "/api/v1/namespaces/ns/configmaps/a", 200, time.Millisecond, "3")
	ct.ReconcileEnd(key, 0, time.Millisecond, ReconcileResultSuccess, 0, "")
	ct.Event(EventCall{Event: ControllerEventUpdate, Key: key, Requests: []string{key}, Old: obj("2"), New: obj("3")})
	ct.ReconcileStart(context.Background(), key, 0)

	want := []Attempt{
		{Count: 2, Triggers: []Trigger{
			{Kind: TriggerKindEvent, Type: ControllerEventCreate, Key: key, RV: "1", Link: "create ns/a"},
			{Kind: TriggerKindEvent, Type: ControllerEventUpdate, Key: key, Source: "controller/c (For)", RV: "2",
				Link: "update ns/a"}}},
		{Count: 1, Triggers: []Trigger{
			{Kind: TriggerKindRetry, Result: ReconcileResultError, Delay: 0.005, HasDelay: true, Link: "attempt error"}}},
		{Count: 1, SelfTriggered: true, Triggers: []Trigger{
			{Kind: TriggerKindEvent, Type: ControllerEventUpdate, Key: key, RV: "3", Self: true, Link: "self ns/a 3"}}},
	}
	if !reflect.DeepEqual(h.attempts, want) {
		t.Fatalf("attempts\n got %+v\nwant %+v", h.attempts, want)
	}
	wantEvents := []EventDerived{{RV: "1"}, {RV: "2", OldRV: "1", Diff: []string{"data.n"}},
		{RV: "3", OldRV: "2", Diff: []string{"data.n"}, Self: true}}
	if !reflect.DeepEqual(h.events, wantEvents) { // a predicate's drop (requests: none) is not one
		t.Fatalf("events\n got %+v\nwant %+v", h.events, wantEvents)
	}
	if !reflect.DeepEqual(h.delays, []float64{0.005}) || len(h.ended) != 2 {
		t.Fatalf("delays %v, ended %v", h.delays, h.ended)
	}
	// the write came with the context the hook returned for its attempt (the second)
	if !reflect.DeepEqual(h.writes, []string{"c PUT /api/v1/namespaces/ns/configmaps/a 3 2"}) {
		t.Fatalf("writes %v", h.writes)
	}
}

// The controller's write and its watch event race: the API server sends the event and the write's
// answer at about the same time, and the event may be handled before the answer is read. The record
// of an event of a key the controller is writing is parked until that answer, so it is still the
// write coming back; the handler itself never waits.
func TestAnEventBeforeItsWritesAnswerIsStillSelf(t *testing.T) {
	tel, h := raceTelemetry(t, "race", nil)
	ct := tel.ControllerTopic("c")
	key, path := "ns/a", "/api/v1/namespaces/ns/configmaps/a/status"
	ctx := ct.ReconcileStart(context.Background(), key, 0)
	finished := tel.WriteStarted(ctx, "PUT", path)
	handle(t, ct, key, "3")
	if len(h.events) != 0 {
		t.Fatalf("the event was recorded while its key's write was in flight: %+v", h.events)
	}
	tel.RequestRV(ctx, "PUT", path, 200, time.Millisecond, "3") // the answer, read after the event arrived
	finished()
	if len(h.events) != 1 || !h.events[0].Self {
		t.Fatalf("events %+v: want the update with rv 3 as the controller's own", h.events)
	}
}

// raceTelemetry is a Telemetry with detections on and a recordingHook, on clk when one is given.
func raceTelemetry(t *testing.T, name string, clk *clocktesting.FakeClock) (*Telemetry, *recordingHook) {
	t.Helper()
	pub, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{Name: name, BufferLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h := &recordingHook{}
	opts := TelemetryOptions{Hook: h}
	if clk != nil {
		opts.Clock = clk
	}
	return NewTelemetry(pub, name, opts), h
}

// handle is the informer's handler with an update of key to rv: it must return at once, whatever
// is in flight.
func handle(t *testing.T, ct *ControllerTopic, key, rv string) {
	t.Helper()
	handled := make(chan struct{})
	go func() {
		ct.Event(EventCall{Event: ControllerEventUpdate, Key: key, Requests: []string{key}, Old: obj("2"), New: obj(rv)})
		close(handled)
	}()
	select {
	case <-handled:
	case <-time.After(5 * time.Second):
		t.Fatal("the event handler waited for a write in flight")
	}
}

// A controller that keeps writing a key always has a write of it in flight. The event waits for
// the write that was in flight when it arrived, not for the next one: waiting until none was in
// flight held every event of a busy key the whole limit, and the handler fell behind the watch.
func TestAnEventWaitsOnlyForTheWritesSentBeforeItArrived(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	tel, h := raceTelemetry(t, "busy", clk)
	ct := tel.ControllerTopic("c")
	key, path := "ns/a", "/api/v1/namespaces/ns/configmaps/a/status"
	ctx := ct.ReconcileStart(context.Background(), key, 0)
	first := tel.WriteStarted(ctx, "PUT", path) // the write whose event comes next
	handle(t, ct, key, "3")
	next := tel.WriteStarted(ctx, "PUT", path) // the key's next write, sent after the event arrived
	defer next()
	tel.RequestRV(ctx, "PUT", path, 200, time.Millisecond, "3") // the first one's answer
	first()
	if len(h.events) != 1 || !h.events[0].Self {
		t.Fatalf("events %+v: want the update with rv 3 released as the controller's own", h.events)
	}
}

// A write that is never answered holds an event's record at most selfWaitLimit (on the
// telemetry's clock, checked before every flush), and the event is then not the controller's own.
func TestAnEventWaitsForAWriteInFlightAtMostTheLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	tel, h := raceTelemetry(t, "limit", clk)
	ct := tel.ControllerTopic("c")
	key := "ns/a"
	ctx := ct.ReconcileStart(context.Background(), key, 0)
	finished := tel.WriteStarted(ctx, "POST", "/api/v1/namespaces/ns/configmaps") // a create: any key waits
	defer finished()
	handle(t, ct, key, "3")
	clk.Step(selfWaitLimit - time.Millisecond)
	tel.evaluate()
	if len(h.events) != 0 {
		t.Fatalf("the event went on before the limit: %+v", h.events)
	}
	clk.Step(time.Millisecond)
	tel.evaluate()
	if len(h.events) != 1 || h.events[0].Self {
		t.Fatalf("events %+v: want one, not the controller's own", h.events)
	}
}

// An attempt of a key lists its triggers: a parked event that maps to the key is one, so the
// attempt releases it (undecided as to self) before it takes them; events after a parked one wait
// behind it, in order.
func TestAnAttemptTakesItsKeysParkedEventAsATrigger(t *testing.T) {
	tel, h := raceTelemetry(t, "trigger", nil)
	ct := tel.ControllerTopic("c")
	ctx := ct.ReconcileStart(context.Background(), "ns/z", 0)
	finished := tel.WriteStarted(ctx, "POST", "/api/v1/namespaces/ns/configmaps") // a create: every key waits
	defer finished()
	handle(t, ct, "ns/b", "7")
	handle(t, ct, "ns/c", "8")
	ct.ReconcileStart(context.Background(), "ns/b", 1)
	if len(h.events) != 1 || h.events[0].RV != "7" || len(h.attempts) != 2 {
		t.Fatalf("events %+v, attempts %+v: want ns/b's event out, ns/c's still parked", h.events, h.attempts)
	}
	if got := h.attempts[1]; got.Count != 1 {
		t.Fatalf("the attempt of ns/b has %+v, want the parked event as its one trigger", got)
	}
	ct.ReconcileStart(context.Background(), "ns/c", 2)
	if len(h.events) != 2 || h.events[1].RV != "8" {
		t.Fatalf("events %+v", h.events)
	}
}
