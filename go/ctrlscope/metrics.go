package ctrlscope

// MetricsSampler: a process's Prometheus metric families, sampled once a second for the dashboard,
// the Go twin of ctrlscope's Python MetricsSampler (controllers/telemetry/metrics_sampler.py).
//
// Why sample at all: a Grafana user sees controller-runtime's series through Prometheus, which
// scrapes the cumulative counters and histogram buckets and turns them into charts with rate() and
// histogram_quantile(). The dashboard has no Prometheus, so the process scrapes itself: a goroutine
// gathers the named families from a prometheus.Gatherer (controller-runtime's metrics.Registry)
// once per interval and publishes the sample to the worker's metrics topic:
//
//   - as a record per tick ({"k":"metrics","ts":…,"families":{…},"stages":{…}}): the stream is the
//     history. The topic keeps Retention frames (10 minutes at one a second) instead of the
//     publisher's default, so a page that subscribes with history draws the last minutes at once;
//   - as the topic's state "latest" (refreshed every LatestEvery ticks and when the sampler stops,
//     not every tick: a state change travels in its frame, so refreshing it each tick would carry
//     every sample twice) and "buckets" (each histogram's upper bounds, which never change, so
//     samples need not repeat them).
//
// Shape, as in Python: series are grouped by their "controller" label (a workqueue's "name" label
// is dropped where it equals "controller", as it always does in controller-runtime). A value is a
// number for a series with no other label, {labelValue: number} for one more label (result), and
// for a histogram {"b": [count per bucket], "sum": s}: per-bucket (not cumulative) counts in the
// order of "buckets", the last one +Inf, trailing zeros dropped. Integral values are integers,
// others rounded to 6 decimals.
//
// SumLabels sums series over labels the dashboard does not split by, like PromQL's
// sum without(...): controller-runtime's workqueue_depth has a "priority" label (one series per
// priority in the priority queue, priority "" in the classic one) where the dashboard wants one
// depth per controller.

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"
)

// DefaultMetricsRetention is how many samples the metrics topic keeps (10 minutes at 1/s).
const DefaultMetricsRetention = 600

// ControllerRuntimeFamilies (vocabulary.go, generated from controllers/metrics.py FAMILIES) are
// the controller-runtime families the dashboard shows, by the name /metrics shows.

// MetricsSamplerOptions; zero values take the defaults in brackets.
type MetricsSamplerOptions struct {
	Families    []string              // [ControllerRuntimeFamilies]
	Stages      func() map[string]any // the sample's "stages" (e.g. Telemetry.Stages); nil: none
	Interval    time.Duration         // [1s]
	Retention   int                   // frames the topic keeps [DefaultMetricsRetention]
	LatestEvery int                   // ticks between refreshes of the "latest" state [10]
	Clock       clock.WithTicker      // [real]
	SumLabels   map[string][]string   // family -> labels summed away (see the file comment)
	OnError     func(err error)       // a failed gather (the loop goes on) [ignored]
}

// MetricsSampler samples families of a Gatherer every Interval and publishes them to a topic.
type MetricsSampler struct {
	g        prometheus.Gatherer
	pub      *Publisher
	topic    string
	opts     MetricsSamplerOptions
	families map[string]struct{} // the set of opts.Families

	mu      sync.Mutex
	samples int
	last    []byte               // the last record, until it is the "latest" state
	buckets map[string][]float64 // histogram family -> upper bounds (no +Inf)

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  bool
}

// NewMetricsSampler samples g into topic (Telemetry.MetricsTopic) through pub.
func NewMetricsSampler(g prometheus.Gatherer, pub *Publisher, topic string, opts MetricsSamplerOptions) (*MetricsSampler, error) {
	if g == nil {
		return nil, errors.New("metrics sampler: no gatherer")
	}
	if opts.Families == nil {
		opts.Families = ControllerRuntimeFamilies
	}
	if len(opts.Families) == 0 {
		return nil, errors.New("metrics sampler: no metric families to sample")
	}
	if opts.Interval < 0 || opts.LatestEvery < 0 {
		return nil, errors.New("metrics sampler: interval and latest_every must be positive")
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.LatestEvery == 0 {
		opts.LatestEvery = 10
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultMetricsRetention
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	families := map[string]struct{}{}
	for _, f := range opts.Families {
		families[f] = struct{}{}
	}
	pub.Retain(topic, opts.Retention)
	return &MetricsSampler{g: g, pub: pub, topic: topic, opts: opts, families: families, buckets: map[string][]float64{},
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Samples is how many ticks have published a record.
func (s *MetricsSampler) Samples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// number is a sample value as the Python sampler sends it: integral values as integers (JSON
// numbers without a fraction), others rounded to 6 decimals; NaN and infinities (not JSON) as null.
func number(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return int64(v)
	}
	return math.Round(v*1e6) / 1e6
}

// group is (controller, inner key) for one series; inner is "" when no other label is left.
func group(labels map[string]string) (string, string) {
	controller := labels["controller"]
	var rest []string
	for k, v := range labels {
		if k == "controller" || k == "le" || (k == "name" && v == controller) {
			continue
		}
		rest = append(rest, k)
	}
	switch len(rest) {
	case 0:
		return controller, ""
	case 1:
		return controller, labels[rest[0]]
	}
	sort.Strings(rest)
	parts := make([]string, len(rest))
	for i, k := range rest {
		parts[i] = k + "=" + labels[k]
	}
	return controller, strings.Join(parts, ",")
}

func put(out map[string]map[string]any, controller, family, inner string, value any) {
	families := out[controller]
	if families == nil {
		families = map[string]any{}
		out[controller] = families
	}
	if inner == "" {
		families[family] = value
		return
	}
	m, _ := families[family].(map[string]any)
	if m == nil {
		m = map[string]any{}
		families[family] = m
	}
	m[inner] = value
}

type histogramValue struct {
	B   []any `json:"b"`
	Sum any   `json:"sum"`
}

type metricsRecord struct {
	K        RecordKind                `json:"k"`
	Ts       float64                   `json:"ts"`
	Families map[string]map[string]any `json:"families"`
	Stages   map[string]any            `json:"stages,omitempty"`
}

func labelsOf(m *dto.Metric, drop []string) map[string]string {
	labels := make(map[string]string, len(m.GetLabel()))
outer:
	for _, lp := range m.GetLabel() {
		for _, d := range drop {
			if lp.GetName() == d {
				continue outer
			}
		}
		labels[lp.GetName()] = lp.GetValue()
	}
	return labels
}

// Sample gathers one sample set of the current values (see the file comment for its shape), as
// the JSON record it publishes.
func (s *MetricsSampler) Sample() ([]byte, error) {
	mfs, err := s.g.Gather()
	if err != nil && len(mfs) == 0 {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, mf := range mfs {
		family := mf.GetName()
		if _, ok := s.families[family]; !ok {
			continue
		}
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			s.histogram(family, mf, out)
			continue
		}
		// Series with the same labels after SumLabels are added up (order: first seen).
		drop := s.opts.SumLabels[family]
		type series struct {
			controller, inner string
			v                 float64
		}
		var order []string
		sums := map[string]*series{}
		for _, m := range mf.GetMetric() {
			controller, inner := group(labelsOf(m, drop))
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			default:
				continue
			}
			id := controller + "\x00" + inner
			if e := sums[id]; e != nil {
				e.v += v
				continue
			}
			sums[id] = &series{controller, inner, v}
			order = append(order, id)
		}
		for _, id := range order {
			e := sums[id]
			put(out, e.controller, family, e.inner, number(e.v))
		}
	}
	rec := metricsRecord{K: RecordKindMetrics, Ts: math.Round(wallMs(s.opts.Clock.Now())*1000) / 1000, Families: out}
	if s.opts.Stages != nil {
		rec.Stages = s.opts.Stages()
		if rec.Stages == nil {
			rec.Stages = map[string]any{}
		}
	}
	return json.Marshal(rec)
}

func (s *MetricsSampler) histogram(family string, mf *dto.MetricFamily, out map[string]map[string]any) {
	first := true
	for _, m := range mf.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		controller, inner := group(labelsOf(m, s.opts.SumLabels[family]))
		bs := h.GetBucket()
		if first {
			first = false
			s.mu.Lock()
			if _, ok := s.buckets[family]; !ok {
				bounds := make([]float64, 0, len(bs))
				for _, b := range bs {
					if !math.IsInf(b.GetUpperBound(), 1) {
						bounds = append(bounds, b.GetUpperBound())
					}
				}
				s.buckets[family] = bounds
				s.pub.SetState(s.topic, "buckets", mustJSON(s.buckets))
			}
			s.mu.Unlock()
		}
		// Prometheus' buckets are cumulative and (in Go's client) leave +Inf implicit: the total
		// count. Per-bucket counts are the differences, +Inf last.
		counts := make([]any, 0, len(bs)+1)
		var prev uint64
		for _, b := range bs {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue
			}
			c := b.GetCumulativeCount()
			counts = append(counts, int64(c-prev))
			prev = c
		}
		counts = append(counts, int64(h.GetSampleCount()-prev))
		for len(counts) > 0 && counts[len(counts)-1] == int64(0) {
			counts = counts[:len(counts)-1]
		}
		put(out, controller, family, inner, histogramValue{B: counts, Sum: number(h.GetSampleSum())})
	}
}

// Tick samples now and publishes one record; every LatestEvery ticks also the "latest" state.
func (s *MetricsSampler) Tick() error {
	rec, err := s.Sample()
	if err != nil {
		return err
	}
	s.pub.Publish(s.topic, rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples%s.opts.LatestEvery == 0 {
		s.pub.SetState(s.topic, "latest", rec)
		s.last = nil
	} else {
		s.last = rec
	}
	s.samples++
	return nil
}

// Start ticks now and then every Interval on its own goroutine until Stop or ctx ends. Ticks stay
// on their schedule (no drift); a tick late by more than an interval is skipped, not made up.
func (s *MetricsSampler) Start(ctx context.Context) *MetricsSampler {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return s
	}
	s.started = true
	s.mu.Unlock()
	go s.run(ctx)
	return s
}

func (s *MetricsSampler) run(ctx context.Context) {
	defer close(s.done)
	clk := s.opts.Clock
	next := clk.Now()
	for {
		if err := s.Tick(); err != nil && s.opts.OnError != nil {
			s.opts.OnError(err)
		}
		next = next.Add(s.opts.Interval)
		now := clk.Now()
		if !next.After(now) {
			next = now.Add(s.opts.Interval)
		}
		t := clk.NewTimer(next.Sub(now))
		select {
		case <-t.C():
		case <-s.stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// Stop ends the loop (waiting up to timeout for it) and leaves the last sample as "latest", so a
// stopped worker's snapshot keeps its final values.
func (s *MetricsSampler) Stop(timeout time.Duration) {
	s.stopOnce.Do(func() { close(s.stop) })
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		select {
		case <-s.done:
		case <-time.After(timeout):
		}
	}
	s.mu.Lock()
	if s.last != nil {
		s.pub.SetState(s.topic, "latest", s.last)
		s.last = nil
	}
	s.mu.Unlock()
}

// Run is Start, then Stop when ctx ends (a manager.Runnable's shape).
func (s *MetricsSampler) Run(ctx context.Context) error {
	s.Start(ctx)
	<-ctx.Done()
	s.Stop(5 * time.Second)
	return nil
}
