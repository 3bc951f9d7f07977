package ctrlscope

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// redisURL is REDIS_URL or the local default. The tests use a real Redis: in CI one always runs
// (.ci/run starts it), so an unreachable one fails there and is skipped only on a developer's machine.
func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

func testRedis(t *testing.T) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		_ = rdb.Close()
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s: %v", redisURL(), err)
		}
		t.Skipf("no Redis at %s (%v); CI runs these", redisURL(), err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func cleanPrefix(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
