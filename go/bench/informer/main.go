// Command informer: client-go's SharedIndexInformer on the canned Pod watch stream that
// bench/informer.py serves, one handler enqueueing each object's key into a client-go workqueue
// (the work shape of bench/informer.py's ctrlscope contender). Prints one JSON line with events/s.
//
//	informer -url http://127.0.0.1:PORT -n 10000 [-cached N] [-timed-from K] [-memory]
//	         [-mode plain|ctrlscope] [-cpuprofile FILE]
//	informer -kubeconfig FILE -namespace NS -n 10000 [-content-type json|protobuf]
//	         (-replay-from RV | -phase TAG)
//
// By default the stream is half ADDED, half MODIFIED (bench/informer.py): -cached says how many
// objects the cache holds at the end when it is not, and -timed-from times only the events after
// the K-th (bench/informer_scale.py's MODIFIED-heavy streams fill the cache first, untimed).
// -memory (mode plain only) replaces the workqueue by a handler that only counts and reports the
// cache's cost: the live heap after GC and the resident set, before and after, per cached object.
//
// With -kubeconfig it reads a real API server's stream instead, in JSON or protobuf (real.go).
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

var modes = map[string]builder{"plain": plain, "count": count}

// count: the informer and a handler that only counts, so that what stays on the heap is the cache.
func count(url string, counter *benchkit.Counter, _ benchkit.Flags) (*pipeline, error) {
	inf, err := benchkit.PodInformer(benchkit.RestConfig(url))
	if err != nil {
		return nil, err
	}
	hit := func(any) { counter.Hit() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: hit, UpdateFunc: func(_, obj any) { hit(obj) }}); err != nil {
		return nil, err
	}
	return &pipeline{informer: inf, queue: nopQueue{}, finish: func() map[string]any { return map[string]any{} }}, nil
}

type nopQueue struct{}

func (nopQueue) Add(string) {}
func (nopQueue) Len() int   { return 0 }
func (nopQueue) ShutDown()  {}

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
	cached := flag.Int("cached", -1, "objects cached at the end (default n/2)")
	timedFrom := flag.Int("timed-from", 0, "time only the handler calls after this many")
	memory := flag.Bool("memory", false, "report the cache's heap and RSS per object (mode count)")
	var real realFlags
	flag.StringVar(&real.kubeconfig, "kubeconfig", "", "a real API server instead of -url (real.go)")
	flag.StringVar(&real.namespace, "namespace", "", "with -kubeconfig: the Pods of this namespace")
	flag.StringVar(&real.contentType, "content-type", "json", "with -kubeconfig: json or protobuf")
	flag.StringVar(&real.replayFrom, "replay-from", "", "with -kubeconfig: LIST answers empty at this RV")
	flag.StringVar(&real.phase, "phase", "", "with -kubeconfig: count objects annotated bench/phase=PHASE")
	f := benchkit.CommonFlags("plain, count, ctrlscope")
	flag.Parse()
	if real.kubeconfig != "" {
		real.n = *n
		runReal(real)
		return
	}
	if *cached < 0 {
		*cached = *n / 2
	}
	if *memory {
		*f.Mode = "count"
	}
	build, ok := modes[*f.Mode]
	if !ok {
		benchkit.Fail(fmt.Errorf("mode %q not built in (built: %v)", *f.Mode, keys(modes)))
	}
	counter := benchkit.NewMarkedCounter(*n, *timedFrom)
	p, err := build(*url, counter, f)
	if err != nil {
		benchkit.Fail(err)
	}
	heap0, rss0 := benchkit.HeapAndRSS()
	stopProfile := benchkit.Profile(*f.CPUProfile)
	elapsed, cpu, err := benchkit.RunInformer(p.informer, counter, *cached, 10*time.Minute)
	stopProfile()
	if err != nil {
		benchkit.Fail(err)
	}
	depth := p.queue.Len()
	p.queue.ShutDown()
	out := p.finish()
	if *memory {
		heap1, rss1 := benchkit.HeapAndRSS()
		out["cached"] = len(p.informer.GetStore().ListKeys()) // keeps the cache alive until measured
		out["heap_bytes_per_object"] = (float64(heap1) - float64(heap0)) / float64(*cached)
		out["rss_bytes_per_object"] = (float64(rss1) - float64(rss0)) / float64(*cached)
	}
	timed := *n - *timedFrom
	out["events"], out["elapsed_s"], out["events_per_s"], out["queue_len"] = timed, elapsed, float64(timed)/elapsed, depth
	out["cpu_s"], out["cpu_us_per_event"] = cpu, cpu/float64(timed)*1e6
	benchkit.Emit(*f.Mode, out)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
