// Package testredis gives the Go tests a real Redis: REDIS_URL or the local default. CI always has
// one (.ci/run starts it), so an unreachable Redis fails the tests there and skips them only on a
// developer's machine.
package testredis

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL is REDIS_URL or redis://127.0.0.1:6379/0.
func URL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Client connects to the test Redis (closed when the test ends), or skips (fails in CI).
func Client(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		_ = rdb.Close()
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s: %v", URL(), err)
		}
		t.Skipf("no Redis at %s (%v); CI runs these", URL(), err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// CleanPrefix deletes every key under prefix.
func CleanPrefix(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// Prefix is a key prefix no other test run uses.
func Prefix(what string) string {
	return "ctrlscope-go-" + what + "-" + time.Now().Format("150405.000000000") + ":"
}

// WaitFor polls cond every millisecond for up to 5 s.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
