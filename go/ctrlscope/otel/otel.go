// Package otel turns a worker's reconciles, controller events and API writes into OpenTelemetry
// spans: a ctrlscope.Hook beside the publisher (TelemetryOptions.Hook), the Go twin of the Python
// runtime's OtelObserver (controllers/telemetry/otel.py), with the same span names and attributes.
// Spans are exported over OTLP/HTTP by the maintained exporter (go.opentelemetry.io/otel/sdk, a
// batch span processor, otlptracehttp) when FromEnvironment finds an endpoint configured.
//
// Per controller:
//
//   - "event {type} {key}": a short span for each watched object's event that the controller's
//     handler mapped to requests (a predicate's drop makes none). A trace of its own. Attributes
//     ctrlscope.event.type, .key, .source (the handler), .rv, .diff (an update's changed field
//     paths, protocol 1.7's rule; .diff_more), .self (the controller's own write) and
//     ctrlscope.requests.
//   - "reconcile {controller}": one span per attempt, from ReconcileStart to ReconcileEnd, a trace
//     of its own (an attempt is caused by many events, so no event is its parent). Attributes
//     ctrlscope.controller, ctrlscope.key, ctrlscope.worker, ctrlscope.result,
//     ctrlscope.requeue_after, ctrlscope.rate_limiter.delay (the delay of the key's
//     add_rate_limited that answered this attempt, when its queue reported one),
//     ctrlscope.trigger_count and ctrlscope.self_triggered; status Error on error, panic and
//     terminal, with the error's text. The attempt's context carries the span, so spans a
//     Reconcile starts from its context are its children.
//   - "{METHOD} {path}": a client span per API write the attempt made (any request but a GET), a
//     child of the reconcile span, with http.response.status_code (Error when it is 0 or ≥ 400);
//     a write the worker refused itself (read-only) is an Error span with ctrlscope.write.refused.
//
// Links are the provenance: the reconcile span links to one span per trigger the attempt's
// reconcile_start record lists (ctrlscope's provenance hands them to the hook with the values the
// hook returned when each was left): an event trigger to its event span, a retry or requeue_after
// trigger to the span of the attempt that left it. The link's attributes say which
// (ctrlscope.trigger.kind, and the event's type, key, resourceVersion and self, or the retry's
// result and delay). So 40 merged update events make one reconcile span with 20 links and a
// ctrlscope.trigger_count of 40.
//
// The rate limiter's delay: client-go's and controller-runtime's loops add a failed key rate limited
// after Reconcile returned. An attempt that ended with a retried result and no delay yet keeps its
// span open (its end time already fixed) until the delay comes, the key's next attempt starts, or
// the sink shuts down, so the attribute is there whatever the order.
//
// Every method only creates or ends spans in memory, under one lock; Shutdown ends what is still
// open and flushes the provider.
package otel

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// Scope is the instrumentation scope of every span the sink makes.
const Scope = "ctrlscope"

// The variables that configure the export (as the Python runtime reads them): OpenTelemetry's own,
// which the exporter reads itself with the rest of OTEL_EXPORTER_OTLP_* (headers, timeout,
// compression), or CtrlscopeVariable, a base URL such as http://127.0.0.1:4318 for a ctrlscope
// worker only (/v1/traces is appended).
const (
	TracesEndpointVariable = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EndpointVariable       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	CtrlscopeVariable      = "CTRLSCOPE_OTLP_ENDPOINT"
)

// Sink makes the spans (see the package comment); it is a ctrlscope.Hook.
type Sink struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	now      func() time.Time

	mu       sync.Mutex
	attempts map[attemptKey]*attempt // open, by controller and key
}

var _ ctrlscope.Hook = (*Sink)(nil)

type attemptKey struct{ controller, key string }

// attempt is one open reconcile span. end is set once the attempt returned; the span ends then, or
// later when it still waits for its rate limiter's delay (awaitingDelay).
type attempt struct {
	controller, key string
	span            trace.Span
	delay           float64
	hasDelay        bool
	end             time.Time
	awaitingDelay   bool
}

type attemptCtxKey struct{}

// New is a sink making spans with provider's tracer; Shutdown shuts provider down.
func New(provider *sdktrace.TracerProvider) *Sink {
	return &Sink{provider: provider, tracer: provider.Tracer(Scope), now: time.Now,
		attempts: map[attemptKey]*attempt{}}
}

// The protocol variables: the sink exports over OTLP/HTTP with protobuf only.
var protocolVariables = []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"}

const example = "http://127.0.0.1:4318"

// TracesEndpoint is the URL spans go to ("" when no export is configured) and whether the exporter
// reads it from OpenTelemetry's variables itself. A configured value the exporter could not use (not
// an http(s) URL with a host, a bad port, an OTLP protocol other than http/protobuf) is an error
// naming the variable: the exporter itself would only log, on its own goroutine, that each batch
// failed.
func TracesEndpoint() (endpoint string, fromOtel bool, err error) {
	for _, name := range protocolVariables {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" && v != "http/protobuf" {
			return "", false, fmt.Errorf("%s=%q: ctrlscope exports spans over OTLP/HTTP only (http/protobuf); "+
				"unset it or point the endpoint at the collector's OTLP/HTTP port (4318)", name, v)
		}
	}
	for _, name := range []string{TracesEndpointVariable, EndpointVariable, CtrlscopeVariable} {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err == nil && u.Port() != "" {
			if n, perr := strconv.Atoi(u.Port()); perr != nil || n < 1 || n > 65535 {
				err = fmt.Errorf("port %q out of range", u.Port())
			}
		}
		if err != nil {
			return "", false, fmt.Errorf("%s=%q: %v (expected a URL such as %s)", name, v, err, example)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return "", false, fmt.Errorf("%s=%q is not an http:// or https:// URL with a host (expected a URL "+
				"such as %s, the collector's OTLP/HTTP port)", name, v, example)
		}
		if name == TracesEndpointVariable {
			return v, true, nil
		}
		return strings.TrimRight(v, "/") + "/v1/traces", name != CtrlscopeVariable, nil
	}
	return "", false, nil
}

// FromEnvironment is a sink exporting over OTLP/HTTP to the configured endpoint through a batch span
// processor (OTEL_BSP_* tune it), or nil when no endpoint is configured. Its resource has
// ctrlscope.worker and service.name worker unless OTEL_SERVICE_NAME names the service
// (OTEL_RESOURCE_ATTRIBUTES adds to it). A wrong setting is an error (TracesEndpoint). Pass it as
// TelemetryOptions.Hook, and call Shutdown when the worker stops (that flushes, within its
// context's deadline).
//
// The batch processor queues each ended span in a bounded queue (OTEL_BSP_MAX_QUEUE_SIZE, 2048;
// full: the span is dropped, never waited for) that its own goroutine exports: a collector that is
// down costs that goroutine retries and the spans it drops, never the controller a wait.
func FromEnvironment(ctx context.Context, worker string) (*Sink, error) {
	endpoint, fromOtel, err := TracesEndpoint()
	if err != nil || endpoint == "" {
		return nil, err
	}
	var opts []otlptracehttp.Option
	if !fromOtel {
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", endpoint, err)
	}
	attrs := []attribute.KeyValue{attribute.String("ctrlscope.worker", worker)}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		attrs = append(attrs, attribute.String("service.name", worker))
	}
	// the variables' attributes win over ours (detectors merge in order, later ones override)
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	return New(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))), nil
}

// Shutdown ends the spans still open (an attempt that never returned ends now, without a result)
// and shuts the provider down, which exports what its batch processor holds.
func (s *Sink) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	for k, a := range s.attempts {
		s.endLocked(a)
		delete(s.attempts, k)
	}
	s.mu.Unlock()
	return s.provider.Shutdown(ctx)
}

// Event implements ctrlscope.Hook: an "event {type} {key}" span of its own trace, whose context the
// triggers it leaves carry.
func (s *Sink) Event(controller string, e ctrlscope.EventCall, d ctrlscope.EventDerived) any {
	now := s.now()
	attrs := []attribute.KeyValue{
		attribute.String("ctrlscope.controller", controller),
		attribute.String("ctrlscope.event.type", string(e.Event)),
		attribute.String("ctrlscope.event.key", e.Key),
		attribute.StringSlice("ctrlscope.requests", e.Requests),
	}
	if e.Source != "" {
		attrs = append(attrs, attribute.String("ctrlscope.event.source", e.Source))
	}
	if d.RV != "" {
		attrs = append(attrs, attribute.String("ctrlscope.event.rv", d.RV))
	}
	if d.Diff != nil { // which fields changed: what a looping controller keeps writing
		attrs = append(attrs, attribute.StringSlice("ctrlscope.event.diff", d.Diff))
		if d.DiffMore > 0 {
			attrs = append(attrs, attribute.Int("ctrlscope.event.diff_more", d.DiffMore))
		}
	}
	if d.Self {
		attrs = append(attrs, attribute.Bool("ctrlscope.event.self", true))
	}
	_, span := s.tracer.Start(context.Background(), "event "+string(e.Event)+" "+e.Key, trace.WithNewRoot(),
		trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(now))
	return span.SpanContext()
}

// ReconcileStart implements ctrlscope.Hook: the attempt's span, linked to its triggers' spans, in the
// returned context.
func (s *Sink) ReconcileStart(ctx context.Context, controller, key string, worker int, at ctrlscope.Attempt) context.Context {
	now := s.now()
	links := make([]trace.Link, 0, len(at.Triggers))
	for _, tr := range at.Triggers {
		if sc, ok := tr.Link.(trace.SpanContext); ok && sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: linkAttributes(tr)})
		}
	}
	attrs := []attribute.KeyValue{
		attribute.String("ctrlscope.controller", controller),
		attribute.String("ctrlscope.key", key),
		attribute.Int("ctrlscope.worker", worker),
		attribute.Int("ctrlscope.trigger_count", at.Count),
		attribute.Bool("ctrlscope.self_triggered", at.SelfTriggered),
	}
	s.mu.Lock()
	k := attemptKey{controller, key}
	if previous := s.attempts[k]; previous != nil { // still waiting for its delay, or never ended
		s.endLocked(previous)
	}
	// a root: the attempt is no child of whatever span the worker's context carries
	_, span := s.tracer.Start(context.Background(), "reconcile "+controller, trace.WithNewRoot(),
		trace.WithTimestamp(now), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	a := &attempt{controller: controller, key: key, span: span}
	s.attempts[k] = a
	s.mu.Unlock()
	return context.WithValue(trace.ContextWithSpan(ctx, span), attemptCtxKey{}, a)
}

func linkAttributes(tr ctrlscope.Trigger) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("ctrlscope.trigger.kind", string(tr.Kind))}
	switch tr.Kind {
	case ctrlscope.TriggerKindEvent, ctrlscope.TriggerKindResync:
		attrs = append(attrs, attribute.String("ctrlscope.event.type", string(tr.Type)),
			attribute.String("ctrlscope.event.key", tr.Key))
		if tr.Source != "" {
			attrs = append(attrs, attribute.String("ctrlscope.event.source", tr.Source))
		}
		if tr.RV != "" {
			attrs = append(attrs, attribute.String("ctrlscope.event.rv", tr.RV))
		}
		if tr.Self {
			attrs = append(attrs, attribute.Bool("ctrlscope.event.self", true))
		}
	default:
		if tr.Result != "" {
			attrs = append(attrs, attribute.String("ctrlscope.result", string(tr.Result)))
		}
		if tr.HasDelay {
			attrs = append(attrs, attribute.Float64("ctrlscope.delay", tr.Delay))
		}
	}
	return attrs
}

// retried: the results after which the loop adds the key rate limited.
func retried(r ctrlscope.ReconcileResult) bool {
	return r == ctrlscope.ReconcileResultError || r == ctrlscope.ReconcileResultPanic ||
		r == ctrlscope.ReconcileResultRequeue
}

// ReconcileEnd implements ctrlscope.Hook: the attempt's result on its span, which ends now or, after
// a retried result, once its rate limiter's delay is known.
func (s *Sink) ReconcileEnd(controller, key string, result ctrlscope.ReconcileResult, requeueAfter time.Duration,
	errText string) any {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := attemptKey{controller, key}
	a := s.attempts[k]
	if a == nil {
		return nil // started before this sink was attached
	}
	a.span.SetAttributes(attribute.String("ctrlscope.result", string(result)),
		attribute.Float64("ctrlscope.requeue_after", requeueAfter.Seconds()))
	switch result {
	case ctrlscope.ReconcileResultError, ctrlscope.ReconcileResultPanic, ctrlscope.ReconcileResultTerminal:
		a.span.SetStatus(codes.Error, errText)
	}
	a.end = now
	if retried(result) && !a.hasDelay {
		a.awaitingDelay = true
	} else {
		delete(s.attempts, k)
		s.endLocked(a)
	}
	return a.span.SpanContext()
}

func (s *Sink) endLocked(a *attempt) { // s.mu held
	if a.hasDelay {
		a.span.SetAttributes(attribute.Float64("ctrlscope.rate_limiter.delay", a.delay))
	}
	end := a.end
	if end.IsZero() {
		end = s.now()
	}
	a.span.End(trace.WithTimestamp(end))
}

// RateLimited implements ctrlscope.Hook: the delay goes on the key's attempt that waits for it.
func (s *Sink) RateLimited(controller, key string, delay *float64) {
	if delay == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := attemptKey{controller, key}
	a := s.attempts[k]
	if a == nil {
		return
	}
	a.delay, a.hasDelay = *delay, true
	if a.awaitingDelay {
		delete(s.attempts, k)
		s.endLocked(a)
	}
}

// Request implements ctrlscope.Hook: a client span under the attempt's span.
func (s *Sink) Request(ctx context.Context, controller, method, path string, code int, duration time.Duration, rv string) {
	a, _ := ctx.Value(attemptCtxKey{}).(*attempt)
	if method == "GET" || a == nil {
		return
	}
	end := s.now()
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", method),
		attribute.String("url.path", path),
		attribute.String("ctrlscope.controller", a.controller),
		attribute.String("ctrlscope.key", a.key),
	}
	if code != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", code))
	}
	if rv != "" {
		attrs = append(attrs, attribute.String("ctrlscope.rv", rv))
	}
	_, span := s.tracer.Start(ctx, method+" "+path, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(end.Add(-duration)), trace.WithAttributes(attrs...))
	switch {
	case code == 0:
		span.SetStatus(codes.Error, "no response")
	case code >= 400:
		span.SetStatus(codes.Error, fmt.Sprintf("HTTP %d", code))
	}
	span.End(trace.WithTimestamp(end))
}

// WriteRefused implements ctrlscope.Hook: an Error span under the attempt's span.
func (s *Sink) WriteRefused(ctx context.Context, controller, method, path string, reason ctrlscope.WriteRefusal) {
	if _, ok := ctx.Value(attemptCtxKey{}).(*attempt); !ok {
		return
	}
	now := s.now()
	_, span := s.tracer.Start(ctx, method+" "+path, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(now),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("url.path", path),
			attribute.String("ctrlscope.write.refused", string(reason))))
	span.SetStatus(codes.Error, "refused by the worker: "+string(reason))
	span.End(trace.WithTimestamp(now))
}
