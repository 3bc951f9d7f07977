package otel

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func linkAttrs(l sdktrace.Link) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range l.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// keeping keeps its spans at shutdown (the in-memory exporter's own Shutdown forgets them).
type keeping struct{ *tracetest.InMemoryExporter }

func (keeping) Shutdown(context.Context) error { return nil }

// The sink driven by a Telemetry as a controller-runtime worker drives it: a failed attempt whose
// rate-limited add comes after its end (its span waits for the delay), the retry it leaves linked
// to it, a requeue_after and the attempt it causes, a write under its attempt, a refused write, and
// an attempt still running at shutdown -- spans recorded by the SDK's in-memory exporter.
func TestSinkSpansFollowTheProvenance(t *testing.T) {
	exp := keeping{tracetest.NewInMemoryExporter()}
	sink := New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	pub, err := ctrlscope.NewPublisher("redis://127.0.0.1:1/0", ctrlscope.PublisherOptions{Name: "sink", BufferLimit: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	tel := ctrlscope.NewTelemetry(pub, "sink", ctrlscope.TelemetryOptions{Hook: sink})
	ct, qt := tel.ControllerTopic("c"), tel.QueueTopic("c")
	key := "ns/a"
	ctx := context.Background()

	ct.Event(ctrlscope.EventCall{Event: ctrlscope.ControllerEventCreate, Key: key, Requests: []string{key},
		Source: "controller/c (For)"})
	ct.Event(ctrlscope.EventCall{Event: ctrlscope.ControllerEventUpdate, Key: "ns/b", FilteredBy: "P"}) // no span
	ct.ReconcileStart(ctx, key, 0)
	ct.ReconcileEnd(key, 0, time.Millisecond, ctrlscope.ReconcileResultError, 0, "boom")
	if n := len(exp.GetSpans()); n != 1 {
		t.Fatalf("the failed attempt's span ended before its delay came: %d spans", n)
	}
	delay := 0.005
	qt.Record(ctrlscope.QueueRecord{Op: ctrlscope.QueueOpAddRateLimited, Key: key, Delay: &delay})
	rctx := ct.ReconcileStart(ctx, key, 0)
	tel.RequestRV(rctx, "PUT", "/api/v1/namespaces/ns/configmaps/a", 200, time.Millisecond, "7")
	tel.RequestRV(rctx, "GET", "/api/v1/namespaces/ns/configmaps/a", 200, time.Millisecond, "") // no span
	tel.WriteRefused(rctx, "DELETE", "/api/v1/namespaces/ns/configmaps/a", ctrlscope.WriteRefusalReadOnly)
	ct.ReconcileEnd(key, 0, time.Millisecond, ctrlscope.ReconcileResultRequeueAfter, 2*time.Second, "")
	ct.ReconcileStart(ctx, key, 0) // never ends: Shutdown ends it
	if err := sink.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	spans := exp.GetSpans().Snapshots()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	events, attempts := byName["event create ns/a"], byName["reconcile c"]
	if len(spans) != 6 || len(events) != 1 || len(attempts) != 3 {
		t.Fatalf("spans: %v", byName)
	}
	// attempts end in order: the failed one once its delay came, then the requeue_after, then the
	// one Shutdown ended
	failed, requeued, last := attempts[0], attempts[1], attempts[2]
	a := attrs(failed)
	if a["ctrlscope.result"].AsString() != "error" || a["ctrlscope.rate_limiter.delay"].AsFloat64() != 0.005 ||
		failed.Status().Code != codes.Error || failed.Status().Description != "boom" {
		t.Errorf("failed attempt: %v %v", a, failed.Status())
	}
	if l := failed.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != events[0].SpanContext().SpanID() ||
		linkAttrs(l[0])["ctrlscope.event.source"].AsString() != "controller/c (For)" {
		t.Errorf("failed attempt's links: %+v", l)
	}
	if l := requeued.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != failed.SpanContext().SpanID() ||
		linkAttrs(l[0])["ctrlscope.trigger.kind"].AsString() != "retry" || linkAttrs(l[0])["ctrlscope.delay"].AsFloat64() != 0.005 {
		t.Errorf("retry link: %+v", l)
	}
	if a := attrs(requeued); a["ctrlscope.requeue_after"].AsFloat64() != 2 || a["ctrlscope.trigger_count"].AsInt64() != 1 {
		t.Errorf("requeued attempt: %v", a)
	}
	if l := last.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != requeued.SpanContext().SpanID() ||
		linkAttrs(l[0])["ctrlscope.trigger.kind"].AsString() != "requeue_after" {
		t.Errorf("requeue_after link: %+v", l)
	}
	if _, ok := attrs(last)["ctrlscope.result"]; ok {
		t.Errorf("the attempt Shutdown ended has a result: %v", attrs(last))
	}
	writes := byName["PUT /api/v1/namespaces/ns/configmaps/a"]
	if len(writes) != 1 {
		t.Fatalf("write spans: %v", writes)
	}
	write := writes[0]
	if write.Parent().SpanID() != requeued.SpanContext().SpanID() || write.SpanKind() != trace.SpanKindClient ||
		attrs(write)["http.response.status_code"].AsInt64() != 200 || attrs(write)["ctrlscope.rv"].AsString() != "7" {
		t.Errorf("write span: parent %v, %v", write.Parent(), attrs(write))
	}
	refused := byName["DELETE /api/v1/namespaces/ns/configmaps/a"]
	if len(refused) != 1 || refused[0].Status().Code != codes.Error ||
		attrs(refused[0])["ctrlscope.write.refused"].AsString() != string(ctrlscope.WriteRefusalReadOnly) {
		t.Errorf("refused write: %v", refused)
	}
}
