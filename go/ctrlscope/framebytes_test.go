package ctrlscope

// TestDumpFrameBytes writes the raw bytes of every frame and snapshot value the encode vectors
// produce to $CTRLSCOPE_FRAME_BYTES_DUMP (skipped without it): diffing two builds' dumps shows
// whether a change altered any published byte (the vectors themselves compare decoded JSON).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestDumpFrameBytes(t *testing.T) {
	dir := os.Getenv("CTRLSCOPE_FRAME_BYTES_DUMP")
	if dir == "" {
		t.Skip("set CTRLSCOPE_FRAME_BYTES_DUMP to a directory")
	}
	rdb := testRedis(t)
	for name, v := range loadVectors(t, "encode") {
		ctx := context.Background()
		prefix := fmt.Sprintf("ctrlscope-go-bytes-%s:", randomHex(4))
		clk := clocktesting.NewFakePassiveClock(time.UnixMilli(int64(num(v["wall_ms"]))))
		pub, err := NewPublisher(redisURL(), PublisherOptions{Prefix: prefix, Name: str(v["publisher"]), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		tel := NewTelemetry(pub, str(v["worker"]), TelemetryOptions{Runtime: Runtime(str(v["runtime"])), Clock: clk})
		rctx := context.Background()
		for _, raw := range v["steps"].([]any) {
			s := raw.(map[string]any)
			switch {
			case s["advance"] != nil:
				clk.SetTime(clk.Now().Add(seconds(s["advance"])))
			case s["flush"] == true:
				if _, err := pub.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			default:
				call(t, tel, &rctx, s)
			}
		}
		var out strings.Builder
		topics, _ := rdb.SMembers(ctx, prefix+"topics").Result()
		sort.Strings(topics)
		for _, topic := range topics {
			entries, _ := rdb.XRange(ctx, prefix+"stream:"+topic, "-", "+").Result()
			for _, e := range entries {
				fmt.Fprintf(&out, "frame %s %s\n", topic, e.Values["f"])
			}
			hash, _ := rdb.HGetAll(ctx, prefix+"snap:"+topic).Result()
			keys := make([]string, 0, len(hash))
			for k := range hash {
				if k != "__id__" {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&out, "snap %s %q %s\n", topic, k, hash[k])
			}
		}
		pub.Stop(time.Second)
		cleanPrefix(rdb, prefix)
		if err := os.WriteFile(filepath.Join(dir, name+".bytes"), []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
