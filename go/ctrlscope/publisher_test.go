package ctrlscope

// The publisher's loop against a real Redis (protocol/redis-layout.md, "The publisher's loop"):
// batching, exactly-once retries, epoch changes, bounded buffers, and never blocking the caller.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func newTestPublisher(t *testing.T, opts PublisherOptions) (*Publisher, *redis.Client, string) {
	t.Helper()
	rdb := testRedis(t)
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("ctrlscope-go-pub-%s:", randomHex(4))
	}
	p, err := NewPublisher(redisURL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second); cleanPrefix(rdb, opts.Prefix) })
	return p, rdb, opts.Prefix
}

func frames(t *testing.T, rdb *redis.Client, prefix, topic string) []map[string]any {
	t.Helper()
	entries, err := rdb.XRange(context.Background(), prefix+"stream:"+topic, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range entries {
		var f map[string]any
		if err := json.Unmarshal([]byte(e.Values["f"].(string)), &f); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func rec(i int) []byte {
	return []byte(fmt.Sprintf(`{"k":"queue","op":"add","key":"k%d","depth":0,"ts":1}`, i))
}

func TestOneFramePerTopicPerFlushAtMostMaxRecords(t *testing.T) {
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{MaxFrameRecords: 100})
	for i := 0; i < 250; i++ {
		p.Publish("w/t/queue/a", rec(i))
		if i%2 == 0 {
			p.Publish("w/t/queue/b", rec(i))
		}
	}
	ctx := context.Background()
	var sent []int
	for {
		n, err := p.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		sent = append(sent, n)
	}
	if fmt.Sprint(sent) != "[100 100 100 75]" {
		t.Fatalf("records per flush %v, want at most 100 each, oldest first", sent)
	}
	total := 0
	for _, topic := range []string{"w/t/queue/a", "w/t/queue/b"} {
		fs := frames(t, rdb, prefix, topic)
		for i, f := range fs {
			if int(f["seq"].(float64)) != i+1 {
				t.Fatalf("%s frame %d has seq %v", topic, i, f["seq"])
			}
			total += len(f["r"].([]any))
		}
		if fs[0]["reset"] != true {
			t.Fatalf("a publisher's first frame on a topic is a reset: %v", fs[0])
		}
	}
	if total != 375 {
		t.Fatalf("%d records reached Redis, want 375", total)
	}
	if got := p.RecordsPublished.Load(); got != 375 {
		t.Fatalf("RecordsPublished %d", got)
	}
}

func TestRetriedFrameAppliesOnce(t *testing.T) {
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{})
	ctx := context.Background()
	p.Publish("w/t/queue/a", rec(1))
	p.SetState("w/t/queue/a", "k1", []byte(`{"requeues":0,"s":"queued"}`))
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Publish("w/t/queue/a", rec(2))
	records := p.takeRecords()
	built := p.buildFrames(records)
	epoch, _ := p.ensureEpoch(ctx)
	// The same frame twice, as after a reply lost in flight: frame.lua applies a (src, seq) once.
	for attempt, want := range []int64{1, 2} {
		res, err := p.send(ctx, epoch, built)
		if err != nil {
			t.Fatal(err)
		}
		if res[0] != want {
			t.Fatalf("attempt %d: status %d, want %d", attempt, res[0], want)
		}
	}
	if n := len(frames(t, rdb, prefix, "w/t/queue/a")); n != 2 {
		t.Fatalf("stream holds %d frames, want 2 (the retry was a duplicate)", n)
	}
}

func TestEpochChangeRewritesEverySnapshotAndResendsRecords(t *testing.T) {
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{})
	ctx := context.Background()
	p.SetState("w/t/informer/x", "default/a", []byte(`{"rv":"1"}`))
	p.SetState("w/t/queue/a", "k1", []byte(`{"requeues":0,"s":"queued"}`))
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cleanPrefix(rdb, prefix) // Redis lost our data (a restart without persistence)
	p.Publish("w/t/queue/a", rec(7))
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"w/t/informer/x", "w/t/queue/a"} {
		fs := frames(t, rdb, prefix, topic)
		if len(fs) != 1 || fs[0]["reset"] != true {
			t.Fatalf("%s after the epoch change: %v, want one reset frame", topic, fs)
		}
		n, _ := rdb.HLen(ctx, prefix+"snap:"+topic).Result()
		if n != 2 { // the key and __id__
			t.Fatalf("%s snapshot has %d fields, want it rewritten from the mirror", topic, n)
		}
	}
	if recs := frames(t, rdb, prefix, "w/t/queue/a")[0]["r"].([]any); len(recs) != 1 {
		t.Fatalf("the record published meanwhile was not resent: %v", recs)
	}
}

func TestFullBufferDropsOldestAndSaysSo(t *testing.T) {
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{BufferLimit: 10})
	for i := 0; i < 15; i++ {
		p.Publish("w/t/queue/a", rec(i))
	}
	if _, err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := frames(t, rdb, prefix, "w/t/queue/a")[0]
	if f["dropped"] != 5.0 || len(f["r"].([]any)) != 10 {
		t.Fatalf("frame: dropped %v, %d records; want 5 dropped, the newest 10 kept", f["dropped"], len(f["r"].([]any)))
	}
	if first := f["r"].([]any)[0].(map[string]any)["key"]; first != "k5" {
		t.Fatalf("oldest kept record is %v, want k5", first)
	}
}

func TestPublishNeverBlocksWithoutRedis(t *testing.T) {
	p, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{BufferLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Stop(100 * time.Millisecond)
	start := time.Now()
	for i := 0; i < 5000; i++ {
		p.Publish("w/t/queue/a", rec(i))
		p.SetState("w/t/queue/a", "k", []byte(`{}`))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("5000 publishes took %v with Redis away", d)
	}
	if p.Connected() {
		t.Fatal("connected to a port nobody listens on")
	}
	if got := p.RecordsDropped.Load(); got != 4000 {
		t.Fatalf("dropped %d, want 4000 (buffer of 1000)", got)
	}
}

func TestBadRedisURLIsAClearError(t *testing.T) {
	if _, err := NewPublisher("http://nope", PublisherOptions{}); err == nil {
		t.Fatal("no error for a URL that is not redis://")
	}
}
