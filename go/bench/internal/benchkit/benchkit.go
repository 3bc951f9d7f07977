// Package benchkit is what the Go benchmark programs share: a rest.Config for bench/informer.py's
// canned Pod watch stream, the informer pipeline (SharedIndexInformer -> one handler -> a
// workqueue), a Telemetry publishing to a real Redis under a throwaway prefix, CPU profiles, and
// the one JSON line every program prints for the Python driver.
package benchkit

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// Setup makes the reflector LIST then WATCH, as the Python contenders do: client-go 0.35+
// defaults to a streaming watch-list (sendInitialEvents), which the canned server does not answer
// with the initial-events-end bookmark. Call it first thing: client-go reads the variable once, on
// the first feature-gate check. It also silences klog (the watch that a finished run cancels
// logs an error).
func Setup() {
	_ = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	klog.SetLogger(logr.Discard())
}

// RestConfig talks plain HTTP to the stream server at url, JSON (the server speaks nothing else),
// without client-side rate limiting (a LIST and a WATCH are all the informer sends).
func RestConfig(url string) *rest.Config {
	return &rest.Config{Host: url, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
}

// PodInformer is a SharedIndexInformer on all Pods with the namespace index, as client-go's
// informer factory builds it.
func PodInformer(cfg *rest.Config) (cache.SharedIndexInformer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())
	return cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}), nil
}

// Queue is the part of a workqueue the informer benchmark's handler uses.
type Queue interface {
	Add(item string)
	Len() int
	ShutDown()
}

// Counter counts handler calls and closes Done at the target. With a mark, it also notes the time
// and CPU of the mark-th call: the timed window of a run that first fills the cache (untimed)
// and then times the events after it.
type Counter struct {
	n      atomic.Int64
	target int64
	mark   int64
	Done   chan struct{}
	At     atomic.Int64 // UnixNano of the target-th call
	MarkAt atomic.Int64 // UnixNano of the mark-th call (0: no mark)
	// CPU seconds of the process at the mark-th call (math.Float64bits).
	markCPU atomic.Uint64
}

// NewCounter counts to target.
func NewCounter(target int) *Counter {
	return &Counter{target: int64(target), Done: make(chan struct{})}
}

// NewMarkedCounter counts to target and marks the mark-th call (mark 0: none).
func NewMarkedCounter(target, mark int) *Counter {
	c := NewCounter(target)
	c.mark = int64(mark)
	return c
}

// Hit counts one call.
func (c *Counter) Hit() {
	n := c.n.Add(1)
	if n == c.mark {
		c.MarkAt.Store(time.Now().UnixNano())
		c.markCPU.Store(math.Float64bits(CPUSeconds()))
	}
	if n == c.target {
		c.At.Store(time.Now().UnixNano())
		close(c.Done)
	}
}

// N is the count so far.
func (c *Counter) N() int { return int(c.n.Load()) }

// EnqueueHandler is the benchmark's one handler: add and update enqueue the object's key (the
// same work shape as bench/informer.py's ctrlscope contender), then count.
func EnqueueHandler(q Queue, c *Counter) cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			panic(err)
		}
		q.Add(key)
		c.Hit()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(obj) },
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}
}

// RunInformer runs inf until counter is done (or timeout) and returns the seconds from Run (or
// from the counter's mark) to the target-th handler call and the process CPU seconds meanwhile,
// checking the cache holds wantCached objects. The informer stops when it returns; its cache
// stays.
func RunInformer(inf cache.SharedIndexInformer, counter *Counter, wantCached int, timeout time.Duration) (float64,
	float64, error) {
	stop := make(chan struct{})
	defer close(stop)
	cpu0 := CPUSeconds()
	start := time.Now()
	go inf.Run(stop)
	select {
	case <-counter.Done:
	case <-time.After(timeout):
		return 0, 0, fmt.Errorf("timeout: %d of %d handler calls", counter.N(), counter.target)
	}
	cpu := CPUSeconds() - cpu0
	begin := start.UnixNano()
	if counter.mark > 0 { // time only what follows the mark
		begin, cpu = counter.MarkAt.Load(), cpu+cpu0-math.Float64frombits(counter.markCPU.Load())
	}
	elapsed := time.Duration(counter.At.Load() - begin).Seconds()
	if got := len(inf.GetStore().ListKeys()); got != wantCached {
		return 0, 0, fmt.Errorf("cache holds %d objects, want %d", got, wantCached)
	}
	return elapsed, cpu, nil
}

// CPUSeconds is the process's user + system CPU time so far: on a noisy machine the CPU a run
// took is steadier than its wall-clock rate.
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// Profile starts a CPU profile into path ("" : none); call the result to stop it.
func Profile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		Fail(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		Fail(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// HeapAndRSS is the live Go heap after two collections and the process's resident set, in bytes:
// what a cache costs is the difference between two calls, one before it filled and one after.
func HeapAndRSS() (heap, rss uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, resident uint64
		if _, err := fmt.Sscan(string(b), &size, &resident); err == nil {
			rss = resident * uint64(os.Getpagesize())
		}
	}
	return ms.HeapAlloc, rss
}

// Emit prints the result line the Python driver reads: one JSON object, always with "mode" and
// "gomaxprocs".
func Emit(mode string, fields map[string]any) {
	fields["mode"] = mode
	fields["gomaxprocs"] = runtime.GOMAXPROCS(0)
	b, err := json.Marshal(fields)
	if err != nil {
		Fail(err)
	}
	fmt.Println(string(b))
}

// Fail prints err and exits 1.
func Fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

// Flags every program takes.
type Flags struct {
	Mode       *string
	CPUProfile *string
	RedisURL   *string
}

// CommonFlags registers -mode, -cpuprofile and -redis.
func CommonFlags(modes string) Flags {
	return Flags{
		Mode:       flag.String("mode", "plain", "what to run: "+modes),
		CPUProfile: flag.String("cpuprofile", "", "write a CPU profile of the timed run here"),
		RedisURL:   flag.String("redis", "redis://127.0.0.1:6379/0", "Redis the instrumented mode publishes to"),
	}
}

// Telemetry is a Telemetry publishing to a real Redis under a throwaway prefix; Close stops the
// publisher (flushing what is left) and deletes every key under the prefix.
type Telemetry struct {
	Tel    *ctrlscope.Telemetry
	Pub    *ctrlscope.Publisher
	Prefix string
	rdb    *redis.Client
}

// NewTelemetry connects to url (failing if Redis does not answer) and starts a publisher.
func NewTelemetry(url, worker string) (*Telemetry, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		return nil, fmt.Errorf("no Redis at %s: %w", url, err)
	}
	prefix := fmt.Sprintf("ctrlscope-gobench-%d-%d:", os.Getpid(), time.Now().UnixNano())
	pub, err := ctrlscope.NewPublisher(url, ctrlscope.PublisherOptions{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	pub.Start()
	return &Telemetry{Tel: ctrlscope.NewTelemetry(pub, worker, ctrlscope.TelemetryOptions{}), Pub: pub,
		Prefix: prefix, rdb: rdb}, nil
}

// Close flushes and stops the publisher, then deletes the prefix's keys. It returns how long the
// final flush took and the publisher's counters.
func (t *Telemetry) Close() map[string]any {
	start := time.Now()
	t.Pub.Stop(30 * time.Second)
	flush := time.Since(start).Seconds()
	ctx := context.Background()
	deleted := 0
	iter := t.rdb.Scan(ctx, 0, t.Prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for i := 0; i < len(keys); i += 500 {
		n, _ := t.rdb.Del(ctx, keys[i:min(i+500, len(keys))]...).Result()
		deleted += int(n)
	}
	_ = t.rdb.Close()
	return map[string]any{"final_flush_s": flush, "records_published": t.Pub.RecordsPublished.Load(),
		"frames_published": t.Pub.FramesPublished.Load(), "records_dropped": t.Pub.RecordsDropped.Load(),
		"buffer_peak":  t.Pub.BufferPeak.Load(),
		"redis_errors": t.Pub.RedisErrors.Load(), "redis_keys_deleted": deleted}
}
