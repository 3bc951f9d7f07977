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
// answer at about the same time, and the event may be handled before the answer is read. An event
// of a key the controller is writing waits for that answer, so it is still the write coming back.
func TestAnEventBeforeItsWritesAnswerIsStillSelf(t *testing.T) {
	pub, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{Name: "race", BufferLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h := &recordingHook{}
	tel := NewTelemetry(pub, "race", TelemetryOptions{Hook: h})
	ct := tel.ControllerTopic("c")
	key, path := "ns/a", "/api/v1/namespaces/ns/configmaps/a/status"
	ctx := ct.ReconcileStart(context.Background(), key, 0)
	finished := tel.WriteStarted(ctx, "PUT", path)
	handled := make(chan struct{})
	go func() { // the informer's handler, with the write's event
		ct.Event(EventCall{Event: ControllerEventUpdate, Key: key, Requests: []string{key}, Old: obj("2"), New: obj("3")})
		close(handled)
	}()
	select {
	case <-handled:
		t.Fatal("the event was recorded while its key's write was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	tel.RequestRV(ctx, "PUT", path, 200, time.Millisecond, "3") // the answer, read after the event arrived
	finished()
	<-handled
	if len(h.events) != 1 || !h.events[0].Self {
		t.Fatalf("events %+v: want the update with rv 3 as the controller's own", h.events)
	}
}

// A controller that keeps writing a key always has a write of it in flight. The event waits for
// the write that was in flight when it arrived, not for the next one: waiting until none was in
// flight made every event of a busy key wait the whole limit, and the handler fell behind the watch.
func TestAnEventWaitsOnlyForTheWritesSentBeforeItArrived(t *testing.T) {
	pub, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{Name: "busy", BufferLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &recordingHook{}
	tel := NewTelemetry(pub, "busy", TelemetryOptions{Hook: h, Clock: clk})
	ct := tel.ControllerTopic("c")
	key, path := "ns/a", "/api/v1/namespaces/ns/configmaps/a/status"
	ctx := ct.ReconcileStart(context.Background(), key, 0)
	first := tel.WriteStarted(ctx, "PUT", path) // the write whose event comes next
	handled := make(chan struct{})
	go func() {
		ct.Event(EventCall{Event: ControllerEventUpdate, Key: key, Requests: []string{key}, Old: obj("2"), New: obj("3")})
		close(handled)
	}()
	for deadline := time.Now().Add(5 * time.Second); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the event is not waiting for the write in flight")
		}
	}
	next := tel.WriteStarted(ctx, "PUT", path) // the key's next write, sent after the event arrived
	defer next()
	tel.RequestRV(ctx, "PUT", path, 200, time.Millisecond, "3") // the first one's answer
	first()
	select {
	case <-handled:
	case <-time.After(5 * time.Second):
		t.Fatal("the event waited for a write sent after it arrived")
	}
	if len(h.events) != 1 || !h.events[0].Self {
		t.Fatalf("events %+v: want the update with rv 3 as the controller's own", h.events)
	}
}

// A write that is never answered holds an event of its key at most selfWaitLimit (on the
// telemetry's clock), and the event is then not the controller's own.
func TestAnEventWaitsForAWriteInFlightAtMostTheLimit(t *testing.T) {
	pub, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{Name: "limit", BufferLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &recordingHook{}
	tel := NewTelemetry(pub, "limit", TelemetryOptions{Hook: h, Clock: clk})
	ct := tel.ControllerTopic("c")
	key := "ns/a"
	ctx := ct.ReconcileStart(context.Background(), key, 0)
	finished := tel.WriteStarted(ctx, "POST", "/api/v1/namespaces/ns/configmaps") // a create: any key waits
	defer finished()
	handled := make(chan struct{})
	go func() {
		ct.Event(EventCall{Event: ControllerEventUpdate, Key: key, Requests: []string{key}, Old: obj("2"), New: obj("3")})
		close(handled)
	}()
	for deadline := time.Now().Add(5 * time.Second); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
		select {
		case <-handled:
			t.Fatal("the event did not wait for the create in flight")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the event is not waiting on the telemetry's clock")
		}
	}
	clk.Step(selfWaitLimit - time.Millisecond)
	select {
	case <-handled:
		t.Fatal("the event went on before the limit")
	case <-time.After(20 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	<-handled
	if len(h.events) != 1 || h.events[0].Self {
		t.Fatalf("events %+v: want one, not the controller's own", h.events)
	}
}
