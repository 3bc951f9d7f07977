//go:build unix

// Package benchcpu reports the process's CPU time per benchmark iteration, for the module's benchmarks
// that run on a busy machine (see ReportCPU).
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// ReportCPU adds cpu-ns/op to b's results: the process's CPU time (user + system, every goroutine:
// the garbage collector's, a batch span processor's) from now to the call of the function it
// returns, per iteration. Under a machine's load wall time per op grows with the waits; CPU time
// much less, so a comparison in one run holds better on a busy machine.
func ReportCPU(b *testing.B) (stop func()) {
	start := processCPU()
	return func() {
		b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
