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
)

func TestDumpFrameBytes(t *testing.T) {
	dir := os.Getenv("CTRLSCOPE_FRAME_BYTES_DUMP")
	if dir == "" {
		t.Skip("set CTRLSCOPE_FRAME_BYTES_DUMP to a directory")
	}
	rdb := testRedis(t)
	for name, v := range loadVectors(t, "encode") {
		if !supported(v) { // as TestEncodeVectors: capabilities the Go publisher does not offer
			continue
		}
		ctx := context.Background()
		prefix := fmt.Sprintf("ctrlscope-go-bytes-%s:", randomHex(4))
		runEncodeSteps(t, v, prefix)
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
		cleanPrefix(rdb, prefix)
		if err := os.WriteFile(filepath.Join(dir, name+".bytes"), []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
