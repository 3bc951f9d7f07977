package ctrlscope

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
