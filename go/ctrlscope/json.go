package ctrlscope

// A small append-only JSON writer for records and frames. Records are built on the controller's
// goroutines for every watch event and queue operation, so they are written straight into bytes
// with their keys in a fixed order (readers test a frame's first bytes; vectors compare values):
// no reflection, no map, one allocation per record.

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// plain says which bytes a JSON string holds as they are: printable ASCII but the quote and backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plain[s[i]] {
			enc, _ := json.Marshal(s) // rare: escapes and non-ASCII; Marshal cannot fail on a string
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat appends f as a JSON number, the way encoding/json chooses between plain and
// exponent notation. NaN and infinities are not JSON: they are written as null.
func appendFloat(b []byte, f float64) []byte {
	if out, ok := appendDecimal(b, f); ok {
		return out
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, f, format, -1, 64)
}

// appendDecimal is the fast path of appendFloat for the two shapes nearly every published float
// has: a wall time in ms with µs resolution (wallMs) and a duration in seconds under 1 s with ns
// resolution (time.Duration.Seconds). strconv's shortest formatting cost ~0.1 µs per number, a few
// numbers per record, ~10 % of a trivial reconcile's instrumentation; these shapes are an integer
// and a few digits instead.
//
// It writes f only when f is exactly the double nearest to m/10^k (k = 3 or 9, checked by dividing
// back), and ok says so. The digits are then the ones strconv.AppendFloat(f, 'f', -1) chooses: the
// decimal m/10^k round-trips to f, and no other decimal of as few digits does, because any decimal
// with no more digits than it is a multiple of 10^-k too, and two multiples of 10^-k cannot both be
// nearest to f while doubles there are closer together than 10^-k (below 2^43 ms, year 2248, they
// are 2^-10 < 10^-3 apart; below 1 s, at most 2^-53). Negative numbers, -0, numbers exponent
// notation writes (< 1e-6) and all others take strconv's path. TestAppendDecimalMatchesStrconv and
// FuzzAppendDecimal hold it to strconv's bytes.
func appendDecimal(b []byte, f float64) ([]byte, bool) {
	switch {
	case f == 0 && !math.Signbit(f):
		return append(b, '0'), true
	case f >= 1 && f < 1<<43:
		if m := math.Round(f * 1e3); m/1e3 == f {
			return appendScaled(b, uint64(m), 3), true
		}
	case f >= 1e-6 && f < 1:
		if m := math.Round(f * 1e9); m/1e9 == f {
			return appendScaled(b, uint64(m), 9), true
		}
	}
	return b, false
}

// appendScaled appends m/10^k in plain notation without trailing zeros (and without the point when
// the fraction is 0), as strconv's 'f' format writes the shortest digits.
func appendScaled(b []byte, m uint64, k int) []byte {
	pow := uint64(1000)
	if k == 9 {
		pow = 1_000_000_000
	}
	b = strconv.AppendUint(b, m/pow, 10)
	frac := m % pow
	if frac == 0 {
		return b
	}
	for frac%10 == 0 {
		frac /= 10
		k--
	}
	b = append(b, '.')
	n := len(b)
	for i := 0; i < k; i++ {
		b = append(b, '0')
	}
	for i := len(b) - 1; i >= n; i-- {
		b[i] = byte('0' + frac%10)
		frac /= 10
	}
	return b
}

// appendJSONString appends s exactly as encoding/json writes it (which also escapes <, > and &).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	return appendString(b, s)
}

// appendJSONFloat appends f exactly as encoding/json writes a float64 (finite f).
func appendJSONFloat(b []byte, f float64) []byte {
	if out, ok := appendDecimal(b, f); ok {
		return out
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // as encoding/json: e-09 becomes e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// record builds one record: {"k":kind,...fields...,"ts":ms}. Records come from a pool: the
// publisher copies what it is handed, so a record is released once published.
type record struct{ b []byte }

var recordPool = sync.Pool{New: func() any { return &record{b: make([]byte, 0, 256)} }}

func newRecord(kind RecordKind) *record {
	r := recordPool.Get().(*record)
	r.b = append(r.b[:0], `{"k":`...)
	r.b = appendString(r.b, string(kind))
	return r
}

// newFields is a record without its kind: fields only (each written with its leading comma), for
// JSON that is spliced into other JSON.
func newFields() *record {
	r := recordPool.Get().(*record)
	r.b = r.b[:0]
	return r
}

// release returns r to the pool; its bytes must not be used afterwards.
func (r *record) release() {
	if cap(r.b) <= 4096 {
		recordPool.Put(r)
	}
}

// key starts field k. Keys are this package's literals, plain ASCII identifiers (what appendString
// would write as they are), so they are copied without the escape check.
func (r *record) key(k string) {
	r.b = append(r.b, ',', '"')
	r.b = append(r.b, k...)
	r.b = append(r.b, '"', ':')
}

func (r *record) str(k, v string) *record { r.key(k); r.b = appendString(r.b, v); return r }

// optStr writes null for "" (the Python publisher's None: no error, no resourceVersion).
func (r *record) optStr(k, v string) *record {
	if v == "" {
		r.key(k)
		r.b = append(r.b, "null"...)
		return r
	}
	return r.str(k, v)
}

func (r *record) int(k string, v int) *record {
	r.key(k)
	r.b = strconv.AppendInt(r.b, int64(v), 10)
	return r
}

func (r *record) float(k string, v float64) *record { r.key(k); r.b = appendFloat(r.b, v); return r }

func (r *record) boolean(k string, v bool) *record {
	r.key(k)
	r.b = strconv.AppendBool(r.b, v)
	return r
}

// optFloat and optInt write null for nil.
func (r *record) optFloat(k string, v *float64) *record {
	if v == nil {
		r.key(k)
		r.b = append(r.b, "null"...)
		return r
	}
	return r.float(k, *v)
}

func (r *record) optInt(k string, v *int) *record {
	if v == nil {
		r.key(k)
		r.b = append(r.b, "null"...)
		return r
	}
	return r.int(k, *v)
}

func (r *record) strs(k string, vs []string) *record {
	r.key(k)
	r.b = append(r.b, '[')
	for i, v := range vs {
		if i > 0 {
			r.b = append(r.b, ',')
		}
		r.b = appendString(r.b, v)
	}
	r.b = append(r.b, ']')
	return r
}

// object is the fields of a newFields record as a JSON object, a copy.
func (r *record) object() []byte {
	if len(r.b) == 0 {
		return []byte("{}")
	}
	out := make([]byte, 0, len(r.b)+1)
	out = append(out, '{')
	out = append(out, r.b[1:]...)
	return append(out, '}')
}

// raw writes v, JSON already.
func (r *record) raw(k string, v []byte) *record {
	r.key(k)
	r.b = append(r.b, v...)
	return r
}

func (r *record) done(tsMs float64) []byte {
	r.key("ts")
	r.b = appendFloat(r.b, tsMs)
	r.b = append(r.b, '}')
	return r.b
}
