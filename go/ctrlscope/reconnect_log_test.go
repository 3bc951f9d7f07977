package ctrlscope

// What the publisher says about its connection: nothing while it is healthy or while Redis is down,
// one line per reconnect (go-redis' pool logs nothing of it either). A healthy start used to log ~10 lines of
// "redis: connection pool: failed to dial after 1 attempts: ctrlscope: reconnected to Redis…":
// go-redis v9.23 runs pipelines on a pool of their own, whose first dial the redial guard, which
// then failed dials, refused while the publisher counted itself connected.

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/ctrlscope/ctrlscope/go/internal/testredis"
)

// lines collects log lines from the publisher's Logf and go-redis' process-wide logger.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fmt.Sprintf(format, args...))
}

func (l *lines) Printf(_ context.Context, format string, args ...any) { l.Logf(format, args...) }

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

func TestAHealthyStartLogsNothingAndAReconnectLogsOneLine(t *testing.T) {
	log := &lines{}
	redis.SetLogger(log)
	t.Cleanup(logging.Enable) // go-redis' default logger again
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{Logf: log.Logf, FlushInterval: 5 * time.Millisecond})
	ctx := context.Background()
	// The one connection the publisher will use, made before it starts (so it is allowed), known by id.
	id, err := p.Redis().ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	tel := NewTelemetry(p, "quiet", TelemetryOptions{})
	tel.Controller("c", nil, 1, true)
	publishFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			p.Publish("t", rec(0))
			time.Sleep(3 * time.Millisecond)
		}
	}
	// Past a presence refresh (every 2 s), so every kind of call the loop makes has run.
	publishFor(2500 * time.Millisecond)
	if got := log.all(); len(got) != 0 {
		t.Fatalf("a healthy start logged %d line(s): %q", len(got), got)
	}
	if n := len(frames(t, rdb, prefix, "t")); n < 50 {
		t.Fatalf("only %d frames went out", n)
	}
	if err := rdb.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	before := len(frames(t, rdb, prefix, "t"))
	publishFor(time.Second)
	got := log.all()
	if len(got) != 1 || !strings.HasPrefix(got[0], "ctrlscope: reconnected to Redis after ") ||
		!strings.HasSuffix(got[0], "; it kept every frame") {
		t.Fatalf("a reconnect logged %q; want one line 'ctrlscope: reconnected to Redis after … ; it kept every frame'", got)
	}
	if strings.Contains(got[0], "\n") {
		t.Fatalf("not one line: %q", got[0])
	}
	if after := len(frames(t, rdb, prefix, "t")); after <= before {
		t.Fatalf("no frame went out after the reconnect (%d then %d)", before, after)
	}
	t.Logf("the line: %s", got[0])
}

func TestAnOutageLogsNothingUntilTheOneLineOfTheReconnect(t *testing.T) {
	server, _ := redisBinaries(t)
	log := &lines{}
	redis.SetLogger(log)
	t.Cleanup(logging.Enable)
	port := freePort(t)
	start := func() *exec.Cmd {
		t.Helper()
		c := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
		defer rdb.Close()
		testredis.WaitFor(t, func() bool { return rdb.Ping(context.Background()).Err() == nil })
		return c
	}
	srv := start()
	p, err := NewPublisher("redis://127.0.0.1:"+strconv.Itoa(port)+"/0", PublisherOptions{Logf: log.Logf})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Stop(time.Second)
	publishFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			p.Publish("t", rec(0))
			time.Sleep(5 * time.Millisecond)
		}
	}
	publishFor(300 * time.Millisecond)
	_ = srv.Process.Kill()
	_ = srv.Wait()
	publishFor(3 * time.Second) // the loop retries with its backoff (up to 2 s), more than once
	if got := log.all(); len(got) != 0 || p.RedisErrors.Load() < 2 {
		t.Fatalf("while Redis was down (%d failed rounds): %q; want nothing", p.RedisErrors.Load(), got)
	}
	start()
	testredis.WaitFor(t, p.Connected)
	got := log.all()
	// (Followed by what became of a frame in flight when Redis died, if there was one: void.)
	if len(got) != 1 || !strings.HasPrefix(got[0], "ctrlscope: reconnected to Redis after ") ||
		!strings.Contains(got[0], "; it had lost its data (a new epoch): rewriting every topic") {
		t.Fatalf("the reconnect logged %q; want one line saying Redis came back without its data", got)
	}
	t.Logf("the line: %s", got[0])
}
