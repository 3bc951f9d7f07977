package ctrlscope

// Presence and retention against a real Redis (protocol/redis-layout.md, "Presence and retention";
// tests/telemetry/test_presence.py is the Python publisher's twin): every run says who it is and
// what it publishes, and that it stopped; its keys carry the retention as TTL, refreshed while it
// runs; a snapshot found gone is rewritten whole by a reset frame.

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlscope/ctrlscope/go/internal/testredis"
)

func presence(t *testing.T, rdb *redis.Client, prefix, src string) map[string]any {
	t.Helper()
	raw, err := rdb.HGet(context.Background(), prefix+"publishers", src).Result()
	if err != nil {
		t.Fatalf("no presence entry for %s: %v", src, err)
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func pttl(t *testing.T, rdb *redis.Client, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestARunAnnouncesItsWorkerAndTopicsAndSaysWhenItStopped(t *testing.T) {
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{Retention: 2 * time.Minute})
	tel := NewTelemetry(p, "go demo", TelemetryOptions{}) // its topic segment is go_demo
	p.Publish("w/go_demo/queue/a", rec(1))
	ctx := context.Background()
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	e := presence(t, rdb, prefix, p.Name())
	host, _ := os.Hostname()
	want := map[string]any{"role": "worker", "name": tel.Worker(), "host": host, "pid": float64(os.Getpid()),
		"stopped": nil, "topics": []any{"w/go_demo/components", "w/go_demo/queue/a"}, "retention": 120.0,
		"v": ProtocolVersion}
	for k, v := range want {
		if !reflect.DeepEqual(e[k], v) {
			t.Errorf("presence %q = %#v, want %#v", k, e[k], v)
		}
	}
	if len(e) != 10 {
		t.Errorf("presence entry has keys %v, want exactly role name host pid started seen stopped topics retention v", e)
	}
	now := wallMs(time.Now())
	if seen := e["seen"].(float64); seen > now || seen < now-5000 || e["started"].(float64) > seen {
		t.Errorf("started %v, seen %v, now %v", e["started"], seen, now)
	}

	// Started, the loop keeps the entry fresh by itself; Stop writes "stopped" once.
	rdb.HDel(ctx, prefix+"publishers", p.Name())
	p.Start()
	testredis.WaitFor(t, func() bool { return rdb.HExists(ctx, prefix+"publishers", p.Name()).Val() })
	started := presence(t, rdb, prefix, p.Name())["started"].(float64)
	p.Stop(5 * time.Second)
	e = presence(t, rdb, prefix, p.Name())
	stopped, ok := e["stopped"].(float64)
	if !ok || stopped < started || e["started"].(float64) != started {
		t.Fatalf("after Stop: started %v, stopped %v (want a time after %v)", e["started"], e["stopped"], started)
	}
}

func TestTopicKeysGetTheRetentionAsTTLRefreshedEveryQuarter(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	retention := 2 * time.Minute
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{Retention: retention, Clock: clk})
	topic := "w/demo/informer/pods"
	p.SetState(topic, "ns/p0", []byte(`{"rv":"0"}`))
	ctx := context.Background()
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.refreshDue(ctx); err != nil {
		t.Fatal(err)
	}
	keys := []string{prefix + "snap:" + topic, prefix + "stream:" + topic}
	fresh := func(what string) {
		t.Helper()
		for _, k := range keys {
			if d := pttl(t, rdb, k); d <= retention-10*time.Second || d > retention {
				t.Fatalf("%s: TTL of %s is %v, want about %v", what, k, d, retention)
			}
		}
	}
	fresh("after the first frame")

	for _, k := range keys {
		rdb.PExpire(ctx, k, time.Minute) // as if the last refresh were long ago
	}
	clk.Step(retention/4 - PresenceRefresh - time.Second)
	p.Publish(topic, rec(1))
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.refreshDue(ctx); err != nil {
		t.Fatal(err)
	}
	if d := pttl(t, rdb, keys[0]); d > time.Minute {
		t.Fatalf("TTL refreshed long before retention/4 (%v): every round would cost a PEXPIRE per topic", d)
	}
	clk.Step(PresenceRefresh) // the TTLs are looked at with the presence entry's refresh
	if err := p.refreshDue(ctx); err != nil {
		t.Fatal(err)
	}
	fresh("by retention/4")
}

func TestASnapshotFoundGoneIsRewrittenByAResetFrameAndGetsItsTTLAgain(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	retention := 2 * time.Minute
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{Retention: retention, Clock: clk})
	topic := "w/demo/informer/pods"
	for _, k := range []string{"ns/p0", "ns/p1", "ns/p2"} {
		p.SetState(topic, k, []byte(`{"rv":"1"}`))
	}
	ctx := context.Background()
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.refreshDue(ctx); err != nil {
		t.Fatal(err)
	}
	snap := prefix + "snap:" + topic
	rdb.Del(ctx, snap) // expired during an outage, or an operator forgot the worker
	clk.Step(retention / 4)
	if err := p.refreshDue(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p.SnapshotsRewritten.Load(); n != 1 {
		t.Fatalf("SnapshotsRewritten = %d, want 1", n)
	}
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fs := frames(t, rdb, prefix, topic)
	if last := fs[len(fs)-1]; last["reset"] != true || len(fs) != 2 {
		t.Fatalf("frames %v: want the first reset frame and a second one rewriting the hash", fs)
	}
	state, err := rdb.HGetAll(ctx, snap).Result()
	if err != nil {
		t.Fatal(err)
	}
	delete(state, "__id__")
	if len(state) != 3 {
		t.Fatalf("snapshot after the rewrite %v, want the whole state", state)
	}
	// The reset recreated the hash without a TTL: the loop's next round sets it, not retention/4 later.
	if err := p.refreshDue(ctx); err != nil {
		t.Fatal(err)
	}
	if d := pttl(t, rdb, snap); d <= retention-10*time.Second || d > retention {
		t.Fatalf("TTL of the recreated snapshot is %v, want about %v", d, retention)
	}
}

func TestParseRetention(t *testing.T) {
	for raw, want := range map[string]time.Duration{"": DefaultRetention, "  ": DefaultRetention,
		"3600": time.Hour, "60": time.Minute, "90m": 90 * time.Minute, " 6h ": 6 * time.Hour, "2d": 48 * time.Hour,
		"1.5h": 90 * time.Minute, "120s": 2 * time.Minute} {
		if got, err := ParseRetention(raw); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"abc", "1h30m", "-5", "10x", "1e3", "59", "0", "30s", "0.5m"} {
		if got, err := ParseRetention(raw); err == nil || !strings.Contains(err.Error(), EnvRetention) {
			t.Errorf("ParseRetention(%q) = %v, %v; want an error naming %s", raw, got, err, EnvRetention)
		}
	}
}

func TestABadRetentionIsRefusedWithAClearError(t *testing.T) {
	t.Setenv(EnvRetention, "an hour")
	_, err := NewPublisher(redisURL(), PublisherOptions{})
	if err == nil || !strings.Contains(err.Error(), `not "an hour"`) {
		t.Fatalf("NewPublisher with %s=%q: %v", EnvRetention, "an hour", err)
	}
	t.Setenv(EnvRetention, "90m")
	p, err := NewPublisher(redisURL(), PublisherOptions{})
	if err != nil || p.Retention() != 90*time.Minute {
		t.Fatalf("NewPublisher with %s=90m: %v, %v", EnvRetention, p, err)
	}
	p.Stop(0)
	if _, err := NewPublisher(redisURL(), PublisherOptions{Retention: 30 * time.Second}); err == nil {
		t.Fatal("a Retention under MinRetention was accepted")
	}
}
