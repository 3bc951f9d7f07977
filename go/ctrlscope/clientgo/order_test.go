package clientgo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// causalFixture: an observed Deployment informer that never starts, whose handlers the test calls
// in the order it wants client-go's goroutines to have run them.
func causalFixture(t *testing.T) (*telFixture, *clocktesting.FakeClock, observingHandler, cache.ResourceEventHandler, *Informer) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.UnixMilli(1_700_000_000_000))
	f := newTelFixture(t, clk)
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Apps().V1().Deployments().Informer()
	name := InformerName(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	o, err := ObserveInformer(f.Tel, name, inf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stopped)
	user := Handlers(f.Tel, name, "print", cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { clk.Step(3 * time.Millisecond) },
		UpdateFunc: func(_, _ any) { clk.Step(3 * time.Millisecond) },
		DeleteFunc: func(any) {},
	})
	return f, clk, observingHandler{o}, user, o
}

// watchAndHandlerRecords: the topic's watch and handler records in order, as "k event key rv @ts"
// (ts: ms after the fixture's epoch; a handler's is its start, ts - duration).
func watchAndHandlerRecords(t *testing.T, f *telFixture) []string {
	t.Helper()
	f.Flush(t)
	recs, _ := f.Read(t, deployTopic)
	var out []string
	for _, r := range recs {
		ts := r["ts"].(float64) - 1_700_000_000_000
		switch r["k"] {
		case "watch":
			out = append(out, fmt.Sprintf("watch %s %s %s @%g", r["type"], r["key"], r["rv"], ts))
		case "handler":
			out = append(out, fmt.Sprintf("handler %s %s %s @%g", r["event"], r["key"], r["rv"], ts-r["duration"].(float64)*1000))
		}
	}
	return out
}

// TestHandlerRecordAfterItsWatchEvent: a user's handler that returns before the observing handler
// processed the same notification (client-go runs them on goroutines of their own) has its record
// published after the watch record, which takes the time the call started; a call after the
// observer's is published at once; the calls of one key keep their order.
func TestHandlerRecordAfterItsWatchEvent(t *testing.T) {
	f, clk, observer, user, _ := causalFixture(t)
	a := deployment("default", "a", 1)
	a.ResourceVersion = "10"
	a2 := a.DeepCopy()
	a2.ResourceVersion = "11"
	b := deployment("default", "b", 1)
	b.ResourceVersion = "12"

	user.OnAdd(a, false) // ran first: 0-3 ms
	clk.Step(time.Millisecond)
	user.OnUpdate(a, a2) // 4-7 ms, still ahead of the observer
	clk.Step(time.Millisecond)
	// A loaded machine between two calls: real time passes parkLimit, the clock does not, and the
	// calls stay parked (a wall-clock parkLimit published them here, in a loaded CI run).
	time.Sleep(parkLimit + 50*time.Millisecond)
	if got := watchAndHandlerRecords(t, f); len(got) != 0 {
		t.Fatalf("published before the observer saw the event: %v", got)
	}
	observer.OnAdd(a, false) // 8 ms: the watch event ADDED a; the add call goes out after it
	clk.Step(time.Millisecond)
	observer.OnUpdate(a, a2)         // 9 ms
	observer.OnAdd(b, false)         // 9 ms: the observer first this time
	user.OnAdd(b, false)             // 9-12 ms: published at once
	observer.OnDelete(a2.DeepCopy()) // not seen by the user's handler yet: nothing parked for it
	got := watchAndHandlerRecords(t, f)
	want := []string{
		"watch ADDED default/a 10 @0", "handler add default/a 10 @0",
		"watch MODIFIED default/a 11 @4", "handler update default/a 11 @4",
		"watch ADDED default/b 12 @9", "handler add default/b 12 @9",
		"watch DELETED default/a 11 @12",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestParkedHandlerRecordIsPublishedAnyway: a call whose notification the observer never
// processes is published after parkLimit on the telemetry's clock (not before, however slow the
// machine), and at once when the informer stops.
func TestParkedHandlerRecordIsPublishedAnyway(t *testing.T) {
	f, clk, _, user, o := causalFixture(t)
	a := deployment("default", "a", 1)
	a.ResourceVersion = "10"
	user.OnAdd(a, false)
	clk.Step(parkLimit - time.Millisecond)
	time.Sleep(50 * time.Millisecond) // a timer wrongly fired would publish from its own goroutine
	if got := watchAndHandlerRecords(t, f); len(got) != 0 {
		t.Fatalf("published before parkLimit passed on the clock: %v", got)
	}
	clk.Step(time.Millisecond)
	eventually(t, "the parked call to be published", func() bool { return len(watchAndHandlerRecords(t, f)) == 1 })
	b := deployment("default", "b", 1)
	b.ResourceVersion = "11"
	user.OnAdd(b, false)
	o.Stopped()
	if got := watchAndHandlerRecords(t, f); len(got) != 2 || !strings.HasPrefix(got[1], "handler add default/b 11") {
		t.Fatalf("not published when the informer stopped: %v", got)
	}
}
