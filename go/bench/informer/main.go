// Command informer: client-go's SharedIndexInformer on the canned Pod watch stream that
// bench/informer.py serves, one handler enqueueing each object's key into a client-go workqueue
// (the work shape of bench/informer.py's ctrlscope contender). Prints one JSON line with events/s.
//
//	informer -url http://127.0.0.1:PORT -n 10000 [-mode plain|ctrlscope] [-cpuprofile FILE]
//
// Mode ctrlscope (instrumented.go; absent when built with -tags noctrlscope) is the same pipeline
// observed by ctrlscope: ObserveInformer, Handlers and the observed workqueue, publishing to Redis.
package main

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlscope/ctrlscope/go/bench/internal/benchkit"
)

// pipeline is one mode's informer, queue and handler; finish releases what it holds and returns
// extra fields for the result line.
type pipeline struct {
	informer cache.SharedIndexInformer
	queue    benchkit.Queue
	finish   func() map[string]any
}

type builder func(url string, counter *benchkit.Counter, f benchkit.Flags) (*pipeline, error)

var modes = map[string]builder{"plain": plain}

func plain(url string, counter *benchkit.Counter, _ benchkit.Flags) (*pipeline, error) {
	inf, err := benchkit.PodInformer(benchkit.RestConfig(url))
	if err != nil {
		return nil, err
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench"})
	if _, err := inf.AddEventHandler(benchkit.EnqueueHandler(q, counter)); err != nil {
		return nil, err
	}
	return &pipeline{informer: inf, queue: q, finish: func() map[string]any { return map[string]any{} }}, nil
}

func main() {
	benchkit.Setup()
	url := flag.String("url", "", "the stream server (bench/informer.py's StreamServer)")
	n := flag.Int("n", 10_000, "watch events in the canned stream (half ADDED, half MODIFIED)")
	f := benchkit.CommonFlags("plain, ctrlscope")
	flag.Parse()
	build, ok := modes[*f.Mode]
	if !ok {
		benchkit.Fail(fmt.Errorf("mode %q not built in (built: %v)", *f.Mode, keys(modes)))
	}
	counter := benchkit.NewCounter(*n)
	p, err := build(*url, counter, f)
	if err != nil {
		benchkit.Fail(err)
	}
	stopProfile := benchkit.Profile(*f.CPUProfile)
	elapsed, cpu, err := benchkit.RunInformer(p.informer, counter, *n/2, 5*time.Minute)
	stopProfile()
	if err != nil {
		benchkit.Fail(err)
	}
	depth := p.queue.Len()
	p.queue.ShutDown()
	out := p.finish()
	out["events"], out["elapsed_s"], out["events_per_s"], out["queue_len"] = *n, elapsed, float64(*n)/elapsed, depth
	out["cpu_s"], out["cpu_us_per_event"] = cpu, cpu/float64(*n)*1e6
	benchkit.Emit(*f.Mode, out)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
