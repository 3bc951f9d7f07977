package ctrlscope

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"testing"
	"time"
)

// The reconcile summary is written by hand on the hot path; it must stay byte for byte what
// encoding/json wrote (the Python publisher and the dashboard compare these values).
func TestReconcileSummaryMatchesEncodingJSON(t *testing.T) {
	type summary struct {
		Attempts int     `json:"attempts"`
		Result   string  `json:"result"`
		At       float64 `json:"at"`
		Duration float64 `json:"duration"`
		Error    *string `json:"error"`
	}
	floats := []float64{0, 1, 1.5, 1e-7, 1.234e-9, 5e-6, 123456789.123, 1764612211123.4568, 1e21, 3e22, 0.000001,
		math.SmallestNonzeroFloat64, 2.5e-300}
	texts := []string{"", "boom", `a "quoted" \\ thing`, "<html> & co", "ünïcödé", "tab\there\nnl", "\u2028", "\xff bad"}
	for i, f := range floats {
		for _, e := range texts {
			s := summary{Attempts: i, Result: "requeue_after", At: floats[(i+3)%len(floats)], Duration: f}
			if e != "" {
				s.Error = &e
			}
			want, _ := json.Marshal(s)
			got := appendReconcileSummary(nil, s.Attempts, s.Result, s.At, s.Duration, e)
			if string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		}
	}
}

// BenchmarkReconcileTelemetry is what one controller-runtime Reconcile costs ctrlscope's encoder
// and publisher, as the queue and Reconciler wrappers call it (add, get, forget, done; reconcile
// start and end), distinct keys, with the frames built (not sent) every MaxFrameRecords records.
func BenchmarkReconcileTelemetry(b *testing.B) {
	pub, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{Name: "bench", BufferLimit: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	tel := NewTelemetry(pub, "bench", TelemetryOptions{})
	qt := tel.QueueTopic("c")
	ct := tel.ControllerTopic("c")
	zero := 0
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("team-%d/web-%07d", i%20, i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := keys[i%len(keys)]
		qt.RecordAdd(key, 1)
		qt.RecordTimed(QueueOpGet, key, 0)
		rctx := ct.ReconcileStart(ctx, key, 0)
		_ = rctx
		ct.ReconcileEnd(key, 0, time.Microsecond, ReconcileResultSuccess, 0, "")
		qt.Record(QueueRecord{Op: QueueOpForget, Key: key, Depth: 0, Requeues: &zero})
		qt.RecordTimed(QueueOpDone, key, 0)
		if pub.n >= pub.opts.MaxFrameRecords {
			pub.build(1)
		}
	}
}

// pollConn waits in steps but keeps the caller's deadline: a reply that never comes still times
// out when go-redis said, and bytes that arrive between steps are read.
func TestPollConnKeepsTheDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := &pollConn{Conn: raw}
	defer c.Close()
	server := <-accepted
	defer server.Close()
	go func() {
		time.Sleep(15 * time.Millisecond) // several poll steps
		_, _ = server.Write([]byte("+OK\r\n"))
	}()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "+OK\r\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(50 * time.Millisecond))
	_, err = c.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("want a timeout, got %v", err)
	}
	if waited := time.Since(start); waited < 45*time.Millisecond || waited > time.Second {
		t.Fatalf("timed out after %v, want ~50ms", waited)
	}
}
