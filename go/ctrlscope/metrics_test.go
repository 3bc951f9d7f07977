package ctrlscope

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// crRegistry is a registry with controller-runtime's families, labels and buckets (as
// pkg/internal/controller/metrics and pkg/internal/metrics define them), one controller initialised
// as its initMetrics does.
type crRegistry struct {
	reg                          *prometheus.Registry
	total                        *prometheus.CounterVec
	errors, terminal, panics     *prometheus.CounterVec
	reconcileTime                *prometheus.HistogramVec
	maxConcurrent, activeWorkers *prometheus.GaugeVec
	depth                        *prometheus.GaugeVec
	adds, retries                *prometheus.CounterVec
	queueDuration, workDuration  *prometheus.HistogramVec
	unfinished, longest          *prometheus.GaugeVec
}

var reconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
	0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

func newCRRegistry(controllers ...string) *crRegistry {
	c := []string{"controller"}
	q := []string{"name", "controller"}
	r := &crRegistry{reg: prometheus.NewRegistry(),
		total:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_runtime_reconcile_total"}, []string{"controller", "result"}),
		errors:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_runtime_reconcile_errors_total"}, c),
		terminal:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_runtime_terminal_reconcile_errors_total"}, c),
		panics:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_runtime_reconcile_panics_total"}, c),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "controller_runtime_reconcile_time_seconds", Buckets: reconcileBuckets, NativeHistogramBucketFactor: 1.1}, c),
		maxConcurrent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "controller_runtime_max_concurrent_reconciles"}, c),
		activeWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "controller_runtime_active_workers"}, c),
		depth:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth"}, []string{"name", "controller", "priority"}),
		adds:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total"}, q),
		retries:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total"}, q),
		queueDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)}, q),
		workDuration:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)}, q),
		unfinished:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds"}, q),
		longest:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds"}, q),
	}
	r.reg.MustRegister(r.total, r.errors, r.terminal, r.panics, r.reconcileTime, r.maxConcurrent, r.activeWorkers,
		r.depth, r.adds, r.retries, r.queueDuration, r.workDuration, r.unfinished, r.longest,
		prometheus.NewCounter(prometheus.CounterOpts{Name: "rest_client_requests_total"})) // not sampled
	for _, name := range controllers {
		for _, res := range []string{"error", "requeue_after", "requeue", "success"} {
			r.total.WithLabelValues(name, res)
		}
		r.errors.WithLabelValues(name)
		r.terminal.WithLabelValues(name)
		r.panics.WithLabelValues(name)
		r.reconcileTime.WithLabelValues(name)
		r.maxConcurrent.WithLabelValues(name).Set(2)
		r.activeWorkers.WithLabelValues(name).Set(0)
		r.depth.WithLabelValues(name, name, "")
		for _, v := range []*prometheus.CounterVec{r.adds, r.retries} {
			v.WithLabelValues(name, name)
		}
		r.queueDuration.WithLabelValues(name, name)
		r.workDuration.WithLabelValues(name, name)
		r.unfinished.WithLabelValues(name, name)
		r.longest.WithLabelValues(name, name)
	}
	return r
}

func newSamplerHarness(t *testing.T, reg prometheus.Gatherer, clk *clocktesting.FakeClock,
	opts MetricsSamplerOptions) (*Publisher, *MetricsSampler, string, func() ([]map[string]any, map[string]any)) {
	t.Helper()
	rdb := testRedis(t)
	prefix := fmt.Sprintf("ctrlscope-go-metrics-test-%d:", time.Now().UnixNano())
	pub, err := NewPublisher(redisURL(), PublisherOptions{Prefix: prefix, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(time.Second); cleanPrefix(rdb, prefix) })
	topic := "w/w1/metrics"
	opts.Clock = clk
	s, err := NewMetricsSampler(reg, pub, topic, opts)
	if err != nil {
		t.Fatal(err)
	}
	read := func() ([]map[string]any, map[string]any) {
		ctx := context.Background()
		for {
			n, err := pub.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		entries, err := rdb.XRange(ctx, prefix+"stream:"+topic, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		st := NewTopicState()
		var recs []map[string]any
		for _, e := range entries {
			got, err := st.Apply(e.ID, []byte(e.Values["f"].(string)))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, got...)
		}
		hash, _ := rdb.HGetAll(ctx, prefix+"snap:"+topic).Result()
		state := map[string]any{}
		for k, v := range hash {
			if k != "__id__" {
				var x any
				_ = json.Unmarshal([]byte(v), &x)
				state[k] = x
			}
		}
		return recs, state
	}
	return pub, s, topic, read
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, what, 5*time.Second, cond)
}

func TestMetricsSamplerTicksOnItsClockWithPythonsShape(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.UnixMilli(1_700_001_000_000))
	cr := newCRRegistry("podset")
	_, s, _, read := newSamplerHarness(t, cr.reg, clk, MetricsSamplerOptions{
		Stages: func() map[string]any {
			return map[string]any{"informers": map[string]any{"pods": map[string]any{"watch": 7}}}
		},
		SumLabels: map[string][]string{"workqueue_depth": {"priority"}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx)
	waitUntil(t, "the first tick, at once", func() bool { return s.Samples() == 1 })
	// one reconcile, as controller-runtime's controller and priority queue count it
	cr.adds.WithLabelValues("podset", "podset").Inc()
	cr.queueDuration.WithLabelValues("podset", "podset").Observe(0.002)
	cr.reconcileTime.WithLabelValues("podset").Observe(0.02)
	cr.total.WithLabelValues("podset", "success").Inc()
	cr.workDuration.WithLabelValues("podset", "podset").Observe(0.02)
	cr.depth.WithLabelValues("podset", "podset", "0").Set(2)
	cr.depth.WithLabelValues("podset", "podset", "-100").Set(3)
	waitUntil(t, "the timer", clk.HasWaiters)
	clk.Step(time.Second)
	waitUntil(t, "the tick one second later", func() bool { return s.Samples() == 2 })
	waitUntil(t, "the timer", clk.HasWaiters)
	clk.Step(500 * time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if s.Samples() != 2 {
		t.Fatal("no tick before the interval is up")
	}
	s.Stop(time.Second)
	recs, state := read()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	if recs[0]["ts"] != 1_700_001_000_000.0 || recs[1]["ts"] != 1_700_001_001_000.0 {
		t.Errorf("ts %v %v", recs[0]["ts"], recs[1]["ts"])
	}
	first := recs[0]["families"].(map[string]any)["podset"].(map[string]any)
	second := recs[1]["families"].(map[string]any)["podset"].(map[string]any)
	if len(first) != len(ControllerRuntimeFamilies) || len(recs[0]["families"].(map[string]any)) != 1 {
		t.Errorf("every family, from the start, and only the sampled ones: %v", first)
	}
	want := map[string]any{"error": 0.0, "requeue_after": 0.0, "requeue": 0.0, "success": 0.0}
	if !reflect.DeepEqual(first["controller_runtime_reconcile_total"], want) {
		t.Errorf("reconcile_total %v", first["controller_runtime_reconcile_total"])
	}
	if !reflect.DeepEqual(first["controller_runtime_reconcile_time_seconds"], map[string]any{"b": []any{}, "sum": 0.0}) {
		t.Errorf("empty histogram %v", first["controller_runtime_reconcile_time_seconds"])
	}
	if first["controller_runtime_max_concurrent_reconciles"] != 2.0 {
		t.Errorf("max concurrent %v", first["controller_runtime_max_concurrent_reconciles"])
	}
	if second["workqueue_adds_total"] != 1.0 || second["workqueue_depth"] != 5.0 {
		t.Errorf("adds %v, depth summed over priorities %v", second["workqueue_adds_total"], second["workqueue_depth"])
	}
	// 0.02 s is in the third reconcile bucket (0.025); 0.002 s in the 0.01 queue bucket (1e-8·10^6)
	if got := second["controller_runtime_reconcile_time_seconds"]; !reflect.DeepEqual(got,
		map[string]any{"b": []any{0.0, 0.0, 1.0}, "sum": 0.02}) {
		t.Errorf("reconcile time %v", got)
	}
	if got := second["workqueue_queue_duration_seconds"].(map[string]any)["b"].([]any); len(got) != 7 || got[6] != 1.0 {
		t.Errorf("queue duration buckets %v", got)
	}
	if !reflect.DeepEqual(recs[1]["stages"], map[string]any{"informers": map[string]any{"pods": map[string]any{"watch": 7.0}}}) {
		t.Errorf("stages %v", recs[1]["stages"])
	}
	if !reflect.DeepEqual(state["latest"], recs[1]) {
		t.Errorf("latest is the last sample after Stop:\n%v\n%v", state["latest"], recs[1])
	}
	buckets := state["buckets"].(map[string]any)
	if len(buckets) != 3 || len(buckets["controller_runtime_reconcile_time_seconds"].([]any)) != len(reconcileBuckets) ||
		len(buckets["workqueue_work_duration_seconds"].([]any)) != 12 {
		t.Errorf("buckets %v", buckets)
	}
}

func TestMetricsSamplerGroupsSeriesAndRefreshesLatestEveryTenTicks(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.UnixMilli(1_700_001_000_000))
	cr := newCRRegistry("podset", "deployment-summary")
	_, s, _, read := newSamplerHarness(t, cr.reg, clk, MetricsSamplerOptions{})
	cr.total.WithLabelValues("podset", "error").Add(2)
	cr.reconcileTime.WithLabelValues("podset").Observe(2.2)
	cr.reconcileTime.WithLabelValues("podset").Observe(100) // +Inf
	cr.unfinished.WithLabelValues("podset", "podset").Set(0.1234567)
	for n := 0; n < 12; n++ {
		if err := s.Tick(); err != nil {
			t.Fatal(err)
		}
	}
	recs, state := read()
	if len(recs) != 12 {
		t.Fatalf("%d records", len(recs))
	}
	fams := recs[0]["families"].(map[string]any)
	if _, ok := fams["deployment-summary"]; !ok {
		t.Fatalf("series grouped by controller: %v", fams)
	}
	p := fams["podset"].(map[string]any)
	if p["controller_runtime_reconcile_total"].(map[string]any)["error"] != 2.0 {
		t.Errorf("result label %v", p["controller_runtime_reconcile_total"])
	}
	b := p["controller_runtime_reconcile_time_seconds"].(map[string]any)["b"].([]any)
	if len(b) != len(reconcileBuckets)+1 || b[len(b)-1] != 1.0 || b[22] != 1.0 {
		t.Errorf("per-bucket counts with +Inf last: %v", b)
	}
	if p["workqueue_unfinished_work_seconds"] != 0.123457 {
		t.Errorf("rounded to 6 decimals: %v", p["workqueue_unfinished_work_seconds"])
	}
	if !reflect.DeepEqual(state["latest"], recs[10]) {
		t.Error("latest is refreshed at ticks 0, 10, 20, …; the sampler was not stopped")
	}
}
