package clientgo

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/internal/testtel"
)

type queueRecord struct {
	Op       string   `json:"op"`
	Key      string   `json:"key"`
	Depth    int      `json:"depth"`
	Delay    *float64 `json:"delay"`
	Requeues *int     `json:"requeues"`
}

// readQueue returns every queue record published to the queue's topic and its final state.
func readQueue(t *testing.T, h *testtel.Harness, name string) ([]queueRecord, map[string]any) {
	t.Helper()
	topic := h.Tel.Topic(ctrlscope.TopicKindQueue, name)
	recs, state := h.Read(t, topic)
	var out []queueRecord
	for _, r := range recs {
		b, _ := json.Marshal(r)
		var q queueRecord
		_ = json.Unmarshal(b, &q)
		out = append(out, q)
	}
	return out, state
}

func ops(recs []queueRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Op+" "+r.Key)
	}
	return out
}

func TestQueueTellsClientGosStory(t *testing.T) {
	h := newHarness(t)
	clk := h.Clock
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Second)
	q := NewRateLimitingQueue[string](h.Tel, "podsets", limiter, QueueOptions[string]{Clock: clk})

	q.Add("default/a")
	q.Add("default/a") // already queued: dedup
	key, _ := q.Get()
	q.Add(key)  // being processed: defer (dirty)
	q.Add(key)  // already dirty: dedup
	q.Done(key) // dirty: back in the queue (requeue)
	key, _ = q.Get()
	q.AddRateLimited(key) // 5 ms, first retry
	q.Done(key)
	q.AddRateLimited(key) // 10 ms: a key keeps its earliest ready time
	clk.Step(6 * time.Millisecond)
	// Both the inner queue's timer and ours (which publishes the add) must have fired.
	waitFor(t, func() bool {
		it, _ := h.Tel.QueueItem("podsets", "default/a")
		return q.Len() == 1 && it.S == ctrlscope.QueueItemStateQueued
	})
	key, _ = q.Get()
	q.Forget(key)
	q.Done(key)
	q.ShutDown()
	h.Flush(t)

	recs, state := readQueue(t, h, "podsets")
	want := []string{"add default/a", "dedup default/a", "get default/a", "defer default/a", "dedup default/a",
		"done default/a", "requeue default/a", "get default/a", "add_rate_limited default/a", "done default/a",
		"add_rate_limited default/a", "add default/a", "get default/a", "forget default/a", "done default/a", "shutdown "}
	got := ops(recs)
	if len(got) != len(want) {
		t.Fatalf("records:\n got  %v\n want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: got %q want %q\n all: %v", i, got[i], want[i], got)
		}
	}
	if d := *recs[8].Delay; d != 0.005 {
		t.Errorf("first retry delay %v, want the limiter's 0.005", d)
	}
	if d := *recs[10].Delay; d != 0.01 {
		t.Errorf("second retry delay %v, want 0.01", d)
	}
	if n := *recs[10].Requeues; n != 2 {
		t.Errorf("second retry requeues %d, want 2", n)
	}
	if n := *recs[13].Requeues; n != 2 {
		t.Errorf("forget clears %d, want 2", n)
	}
	if len(state) != 0 {
		t.Errorf("a forgotten, done key leaves no state: %v", state)
	}
}

// A delayed add the inner queue fires before our timer does is published when the key is handed
// out: add, then get (with the time it waited: none, it was just added), and our timer is
// dropped, so it publishes no second add when it fires. Get and done carry the time the key
// waited queued and was processing, read off its item in the same step as the record.
func TestGetOfAKeyWhoseDelayedAddFiredFirst(t *testing.T) {
	h := newHarness(t)
	innerClock := testingclock.NewFakeClock(h.Clock.Now()) // the inner queue's; ours is h.Clock
	limiter := ObserveRateLimiter[string](workqueue.DefaultTypedControllerRateLimiter[string]())
	inner := workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "late", Clock: innerClock})
	q := WrapQueue[string](h.Tel, "late", inner, limiter, QueueOptions[string]{Clock: h.Clock})

	q.AddAfter("default/a", time.Second)
	innerClock.Step(time.Second) // the inner queue's timer fires; ours has not
	waitFor(t, func() bool { return inner.Len() == 1 })
	key, _ := q.Get()
	h.Clock.Step(3 * time.Millisecond) // processing for 3 ms
	q.Done(key)
	h.Clock.Step(2 * time.Second) // our timer's time: it was dropped, it publishes nothing
	q.Add("default/b")
	h.Clock.Step(5 * time.Millisecond) // queued for 5 ms
	key, _ = q.Get()
	q.Done(key)
	q.ShutDown()
	h.Flush(t)

	topic := h.Tel.Topic(ctrlscope.TopicKindQueue, "late")
	recs, _ := h.Read(t, topic)
	var got []string
	for _, r := range recs {
		s := r["op"].(string) + " " + r["key"].(string)
		if d, ok := r["duration"].(float64); ok {
			s += " " + strconv.FormatFloat(d, 'f', -1, 64)
		}
		got = append(got, s)
	}
	want := []string{"add_after default/a", "add default/a", "get default/a 0", "done default/a 0.003",
		"add default/b", "get default/b 0.005", "done default/b 0", "shutdown "}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("records:\n got  %v\n want %v", got, want)
	}
}
