package ctrlruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// harness (as in clientgo/harness_test.go): a Telemetry publishing to a real Redis under a private prefix, on a fake clock.
type harness struct {
	rdb    *redis.Client
	pub    *ctrlscope.Publisher
	tel    *ctrlscope.Telemetry
	clock  *clocktesting.FakeClock
	prefix string
}

func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// newHarness runs on a fake clock; newRealHarness on the real one, for controller-runtime's
// priority queue, which keeps its own time (time.Now) and cannot be given a fake clock.
func newHarness(t *testing.T) *harness { return newHarnessOn(t, false) }

func newRealHarness(t *testing.T) *harness { return newHarnessOn(t, true) }

func newHarnessOn(t *testing.T, real bool) *harness {
	t.Helper()
	opts, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s: %v", redisURL(), err)
		}
		t.Skipf("no Redis at %s (%v); CI runs these", redisURL(), err)
	}
	prefix := fmt.Sprintf("ctrlscope-go-test-%d:", time.Now().UnixNano())
	clk := clocktesting.NewFakeClock(time.UnixMilli(1_700_000_000_000))
	popts := ctrlscope.PublisherOptions{Prefix: prefix, Clock: clk}
	if real {
		popts.Clock = nil
	}
	pub, err := ctrlscope.NewPublisher(redisURL(), popts)
	if err != nil {
		t.Fatal(err)
	}
	topts := ctrlscope.TelemetryOptions{Clock: clk}
	if real {
		topts.Clock = nil
	}
	h := &harness{rdb: rdb, pub: pub, clock: clk, prefix: prefix,
		tel: ctrlscope.NewTelemetry(pub, "test", topts)}
	t.Cleanup(func() {
		pub.Stop(time.Second)
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		_ = rdb.Close()
	})
	return h
}

func (h *harness) flush(t *testing.T) {
	t.Helper()
	for {
		n, err := h.pub.Flush(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// read returns a topic's records in order, read as a dashboard reader does, and its snapshot state.
func (h *harness) read(t *testing.T, topic string) ([]map[string]any, map[string]any) {
	t.Helper()
	entries, err := h.rdb.XRange(context.Background(), h.prefix+"stream:"+topic, "-", "+").Result()
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
	hash, err := h.rdb.HGetAll(context.Background(), h.prefix+"snap:"+topic).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(hash) > 0 && len(entries) > 0 && hash["__id__"] != entries[len(entries)-1].ID {
		t.Fatalf("snapshot of %s is not as of the last frame", topic)
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

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
