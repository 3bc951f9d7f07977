package clientgo

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func handlerRecords(t *testing.T, f *telFixture) []map[string]any {
	t.Helper()
	recs, _ := f.topic(t, deployTopic)
	var out []map[string]any
	for _, r := range recs {
		if r["k"] == "handler" {
			out = append(out, r)
		}
	}
	return out
}

// TestHandlers: each call is a handler record timed on the telemetry's clock; a tombstone says so.
func TestHandlers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.UnixMilli(1_700_000_000_000))
	f := newTelFixture(t, clk)
	var got []string
	h := Handlers(f.Tel, "apps/v1/Deployment", "print", cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { clk.Step(250 * time.Millisecond); got = append(got, "add") },
		UpdateFunc: func(_, _ any) { got = append(got, "update") },
		DeleteFunc: func(obj any) { clk.Step(time.Second); got = append(got, "delete") },
	})
	a1 := deployment("default", "a", 1)
	a1.ResourceVersion = "7"
	a2 := a1.DeepCopy()
	a2.ResourceVersion = "9"
	h.OnAdd(a1, false)
	h.OnUpdate(a1, a2)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: a2})
	if fmt.Sprint(got) != "[add update delete]" {
		t.Fatalf("the wrapped handler ran %v", got)
	}
	recs := handlerRecords(t, f)
	if len(recs) != 3 {
		t.Fatalf("records %v", recs)
	}
	want := []map[string]any{
		{"handler": "print", "event": "add", "key": "default/a", "outcome": "ok", "duration": 0.25, "rv": "7", "old_rv": nil},
		{"handler": "print", "event": "update", "key": "default/a", "outcome": "ok", "duration": 0.0, "rv": "9", "old_rv": "7"},
		{"handler": "print", "event": "delete", "key": "default/a", "outcome": "ok", "duration": 1.0, "rv": "9", "tombstone": true},
	}
	for i, w := range want {
		for k, v := range w {
			if recs[i][k] != v {
				t.Fatalf("record %d: %s = %v, want %v (%v)", i, k, recs[i][k], v, recs[i])
			}
		}
	}
	if _, ok := recs[0]["tombstone"]; ok {
		t.Fatalf("tombstone on a plain add: %v", recs[0])
	}
}

// TestHandlerPanic: a panic is published as outcome error with its text, then raised again with
// the same value (client-go does not swallow handler panics).
func TestHandlerPanic(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.UnixMilli(1_700_000_000_000))
	f := newTelFixture(t, clk)
	h := HandlerFuncs(f.Tel, "apps/v1/Deployment", "crashy", cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ any) { clk.Step(time.Second / 2); panic("boom") },
	})
	if h.AddFunc != nil || h.DeleteFunc != nil {
		t.Fatal("HandlerFuncs set functions the handler did not have")
	}
	d := deployment("default", "a", 1)
	d.ResourceVersion = "3"
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		h.OnUpdate(d, d)
	}()
	if recovered != "boom" {
		t.Fatalf("re-raised %v, want the handler's own panic value", recovered)
	}
	h.OnAdd(d, false) // no AddFunc: nothing ran, nothing published
	recs := handlerRecords(t, f)
	if len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	r := recs[0]
	if r["outcome"] != "error" || r["error"] != "panic: boom" || r["event"] != "update" || r["handler"] != "crashy" ||
		r["duration"] != 0.5 || r["key"] != "default/a" {
		t.Fatalf("record %v", r)
	}
}
