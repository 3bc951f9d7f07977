// Package testtel is the instrumentation tests' harness: a Telemetry publishing to a real Redis
// under a private prefix (deleted afterwards), and the topics read back as a dashboard reads them.
package testtel

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/internal/testredis"
)

// Start is the fake clocks' start: 2023-11-14T22:13:20Z, the protocol vectors' wall_ms.
var Start = time.UnixMilli(1_700_000_000_000)

// Harness: RDB, the publisher (not started: tests flush it), the worker's Telemetry, its clock.
type Harness struct {
	RDB    *redis.Client
	Pub    *ctrlscope.Publisher
	Tel    *ctrlscope.Telemetry
	Clock  *clocktesting.FakeClock // nil with a real or given clock
	Prefix string
}

// Options: Worker ["test"]; Clock, else a FakeClock at Start unless RealClock.
type Options struct {
	Worker    string
	Clock     clock.PassiveClock
	RealClock bool // e.g. for controller-runtime's priority queue, which keeps its own time
}

// New builds a Harness, or skips the test without Redis (fails in CI).
func New(t testing.TB, o Options) *Harness {
	t.Helper()
	rdb := testredis.Client(t)
	if o.Worker == "" {
		o.Worker = "test"
	}
	h := &Harness{RDB: rdb, Prefix: testredis.Prefix("test")}
	clk := o.Clock
	if clk == nil && !o.RealClock {
		h.Clock = clocktesting.NewFakeClock(Start)
		clk = h.Clock
	}
	pub, err := ctrlscope.NewPublisher(testredis.URL(), ctrlscope.PublisherOptions{Prefix: h.Prefix, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	h.Pub, h.Tel = pub, ctrlscope.NewTelemetry(pub, o.Worker, ctrlscope.TelemetryOptions{Clock: clk})
	t.Cleanup(func() {
		pub.Stop(time.Second)
		testredis.CleanPrefix(rdb, h.Prefix)
	})
	return h
}

// Flush sends everything buffered.
func (h *Harness) Flush(t testing.TB) {
	t.Helper()
	for {
		n, err := h.Pub.Flush(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// Read returns a topic's records in order, read as a dashboard reader does (ctrlscope.TopicState),
// and the state its snapshot hash holds, which must be exact as of the topic's last frame.
func (h *Harness) Read(t testing.TB, topic string) ([]map[string]any, map[string]any) {
	t.Helper()
	ctx := context.Background()
	entries, err := h.RDB.XRange(ctx, h.Prefix+"stream:"+topic, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	s := ctrlscope.NewTopicState()
	var recs []map[string]any
	for _, e := range entries {
		got, err := s.Apply(e.ID, []byte(e.Values["f"].(string)))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, got...)
	}
	hash, err := h.RDB.HGetAll(ctx, h.Prefix+"snap:"+topic).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(hash) > 0 && len(entries) > 0 && hash["__id__"] != entries[len(entries)-1].ID {
		t.Fatalf("the snapshot of %s is not as of its last frame", topic)
	}
	state := map[string]any{}
	for k, v := range hash {
		if k == "__id__" {
			continue
		}
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			t.Fatalf("state %s[%s] is not JSON: %v", topic, k, err)
		}
		state[k] = x
	}
	return recs, state
}
