package otel

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/internal/benchcpu"
)

// discard is an exporter that drops what the batch processor hands it: the benchmark measures the
// sink and the SDK in the worker's goroutines, not a network.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkReconcileSpans: what the OpenTelemetry sink adds to one reconcile as a worker reports it
// -- the event that enqueued the key (an event span), the attempt (a reconcile span linked to it)
// and one status write (a client span under it) -- against the same calls without the sink, both
// with provenance and detection on. The spans go through the SDK's batch processor to an exporter
// that drops them; the publisher is not started
// (its buffer holds the records: 4 per iteration, hence a fixed -benchtime).
//
//	go test ./ctrlscope/otel -run '^$' -bench ReconcileSpans -benchmem -benchtime 100000x
func BenchmarkReconcileSpans(b *testing.B) {
	for _, withSink := range []bool{false, true} {
		name := "otel=off"
		if withSink {
			name = "otel=on"
		}
		b.Run(name, func(b *testing.B) {
			// never started: the records stay in its buffer (bounded by the -benchtime above)
			pub, err := ctrlscope.NewPublisher("redis://127.0.0.1:1/0", ctrlscope.PublisherOptions{Name: "bench",
				BufferLimit: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			opts := ctrlscope.TelemetryOptions{}
			var sink *Sink
			if withSink {
				sink = New(sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{})))
				opts.Hook = sink
				defer func() { _ = sink.Shutdown(context.Background()) }()
			}
			tel := ctrlscope.NewTelemetry(pub, "bench", opts)
			ct := tel.ControllerTopic("c")
			keys := make([]string, 10_000)
			paths := make([]string, len(keys))
			for i := range keys {
				keys[i] = fmt.Sprintf("team-1/web-%05d", i)
				paths[i] = fmt.Sprintf("/apis/apps/v1/namespaces/team-1/deployments/web-%05d/status", i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			defer benchcpu.ReportCPU(b)() // the batch processor's goroutine included
			for i := 0; i < b.N; i++ {
				k := i % len(keys)
				ct.Event(ctrlscope.EventCall{Event: ctrlscope.ControllerEventCreate, Key: keys[k], Requests: keys[k : k+1],
					Source: "controller/c (For)"})
				rctx := ct.ReconcileStart(ctx, keys[k], 0)
				tel.RequestRV(rctx, "PUT", paths[k], 200, time.Millisecond, "1")
				ct.ReconcileEnd(keys[k], 0, time.Millisecond, ctrlscope.ReconcileResultSuccess, 0, "")
			}
		})
	}
}
