package ctrlscope

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// strconvFloat is appendFloat without its fast path: what every number was written as before it.
func strconvFloat(f float64) string {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.FormatFloat(f, format, -1, 64)
}

func checkDecimal(t testing.TB, f float64) {
	t.Helper()
	want := strconvFloat(f)
	if got := string(appendFloat(nil, f)); got != want {
		t.Fatalf("appendFloat(%v) = %s, strconv writes %s", f, got, want)
	}
	if out, ok := appendDecimal(nil, f); ok && string(out) != want {
		t.Fatalf("appendDecimal(%v) = %s, strconv writes %s", f, out, want)
	}
}

// The fast path writes exactly strconv's bytes for the values it takes (wall ms at µs, durations
// in seconds at ns) and declines the others; a published byte must not change with it.
func TestAppendDecimalMatchesStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	taken := 0
	for range 300_000 {
		us := rng.Int64N(1 << 52) // any wall time in µs up to ~2112 (and beyond 2^43 ms: declined)
		ms := float64(us) / 1000
		ns := rng.Int64N(int64(time.Second))
		sec := time.Duration(ns).Seconds()
		odd := rng.Float64() * math.Pow(10, float64(rng.IntN(30)-15))
		for _, f := range []float64{ms, sec, odd, wallMs(time.Unix(0, rng.Int64N(1<<62)))} {
			checkDecimal(t, f)
			if _, ok := appendDecimal(nil, f); ok {
				taken++
			}
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, 0.5, 1e-6, 0.000001, 0.999999999, 1 << 43, 1<<43 - 0.001,
		1765000000123, 1765000000123.4, 1765000000123.456, 0.1, 0.2, 0.3, 1e-7, 123.0001, 2.5e-5, -1.5} {
		checkDecimal(t, f)
	}
	if taken < 600_000 {
		t.Fatalf("the fast path took only %d of the wall times and durations", taken)
	}
	for _, f := range []float64{1765000000123.456, 0.000012345} {
		if _, ok := appendDecimal(nil, f); !ok {
			t.Fatalf("appendDecimal declined %v", f)
		}
	}
}

func FuzzAppendDecimal(f *testing.F) {
	for _, seed := range []float64{1765000000123.456, 0.000012345, 1, 0.1, 1e-6} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		checkDecimal(t, v)
	})
}

// BenchmarkAppendFloat is one record's numbers as a reconcile writes them (a wall time in ms, a
// duration in seconds, a zero requeue_after): the fast path against strconv's, in one run.
func BenchmarkAppendFloat(b *testing.B) {
	nums := []float64{wallMs(time.Now()), (3 * time.Microsecond).Seconds(), 0}
	b.Run("appendFloat", func(b *testing.B) {
		buf := make([]byte, 0, 64)
		for i := 0; i < b.N; i++ {
			for _, f := range nums {
				buf = appendFloat(buf[:0], f)
			}
		}
	})
	b.Run("strconv", func(b *testing.B) {
		buf := make([]byte, 0, 64)
		for i := 0; i < b.N; i++ {
			for _, f := range nums {
				buf = strconv.AppendFloat(buf[:0], f, 'f', -1, 64)
			}
		}
	})
}
