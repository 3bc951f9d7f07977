//go:build !noctrlscope

package main

// Mode ctrlscope: the plain pipeline observed by ctrlscope as a user would wire it: ObserveInformer
// on the informer, Handlers around the handler, the observed workqueue, a Telemetry publishing to a
// real Redis under a throwaway prefix (deleted afterwards). Mode ctrlscope+transport also passes the
// rest config through WrapConfig (list records, watch start and end, reflector states).

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlscope/ctrlscope/go/bench/internal/benchkit"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

func init() {
	modes["ctrlscope"] = func(url string, c *benchkit.Counter, f benchkit.Flags) (*pipeline, error) {
		return instrumented(url, c, f, false)
	}
	modes["ctrlscope+transport"] = func(url string, c *benchkit.Counter, f benchkit.Flags) (*pipeline, error) {
		return instrumented(url, c, f, true)
	}
}

const informerName = "v1/Pod"

func instrumented(url string, counter *benchkit.Counter, f benchkit.Flags, transport bool) (*pipeline, error) {
	t, err := benchkit.NewTelemetry(*f.RedisURL, "gobench-informer")
	if err != nil {
		return nil, err
	}
	var cfg *rest.Config = benchkit.RestConfig(url)
	if transport {
		cfg = clientgo.WrapConfig(t.Tel, cfg)
	}
	inf, err := benchkit.PodInformer(cfg)
	if err != nil {
		return nil, err
	}
	obs, err := clientgo.ObserveInformer(t.Tel, informerName, inf)
	if err != nil {
		return nil, err
	}
	q := clientgo.NewRateLimitingQueue(t.Tel, "bench", workqueue.DefaultTypedControllerRateLimiter[string](),
		clientgo.QueueOptions[string]{})
	if _, err := inf.AddEventHandler(clientgo.Handlers(t.Tel, informerName, "enqueue",
		benchkit.EnqueueHandler(q, counter))); err != nil {
		return nil, err
	}
	return &pipeline{informer: inf, queue: q, finish: func() map[string]any {
		obs.Stopped()
		return t.Close()
	}}, nil
}
