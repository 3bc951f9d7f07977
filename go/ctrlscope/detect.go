package ctrlscope

// Detection thresholds (protocol v1.7, "Provenance, self-triggering and findings"): the protocol's
// defaults (DetectDefaults), overridden by CTRLSCOPE_DETECT_{NAME} environment variables, as
// ctrlscope's Python observer reads them (controllers/telemetry/detectors.py). CTRLSCOPE_DETECT=off
// turns provenance and detection off: the records are then a 1.6 publisher's, apart from the
// version (a benchmark's baseline).

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Environment variables of detection.
const (
	EnvDetectPrefix = "CTRLSCOPE_DETECT_"
	EnvDetect       = "CTRLSCOPE_DETECT"
)

// DetectConfig is the detection thresholds: counts, and seconds.
type DetectConfig struct {
	HotLoopAttempts int
	HotLoopQuiet    float64
	FailingAfter    int
	SlowAfter       float64
	WaitingAfter    float64
	SyncTimeout     float64
	SilentAfter     float64
	RelistCount     int
	RelistWindow    float64
}

// DefaultDetectConfig is the protocol's defaults.
func DefaultDetectConfig() DetectConfig {
	c, _ := DetectConfigFrom(nil, "")
	return c
}

// detectField is one threshold: its name, whether it is a count (else seconds), its field.
type detectField struct {
	name  string
	count bool
	set   func(c *DetectConfig, v float64)
}

var detectFields = []detectField{
	{"hot_loop_attempts", true, func(c *DetectConfig, v float64) { c.HotLoopAttempts = int(v) }},
	{"hot_loop_quiet", false, func(c *DetectConfig, v float64) { c.HotLoopQuiet = v }},
	{"failing_after", true, func(c *DetectConfig, v float64) { c.FailingAfter = int(v) }},
	{"slow_after", false, func(c *DetectConfig, v float64) { c.SlowAfter = v }},
	{"waiting_after", false, func(c *DetectConfig, v float64) { c.WaitingAfter = v }},
	{"sync_timeout", false, func(c *DetectConfig, v float64) { c.SyncTimeout = v }},
	{"silent_after", false, func(c *DetectConfig, v float64) { c.SilentAfter = v }},
	{"relist_count", true, func(c *DetectConfig, v float64) { c.RelistCount = int(v) }},
	{"relist_window", false, func(c *DetectConfig, v float64) { c.RelistWindow = v }},
}

// DetectConfigFrom is the thresholds values names (hot_loop_attempts...), the others defaults.
// source prefixes a name in an error (EnvDetectPrefix: the environment's variable).
func DetectConfigFrom(values map[string]string, source string) (DetectConfig, error) {
	var c DetectConfig
	names := make([]string, 0, len(detectFields))
	for _, f := range detectFields {
		f.set(&c, DetectDefaults[f.name])
		names = append(names, f.name)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, name := range keys {
		raw := values[name]
		where := fmt.Sprintf("%s=%q", name, raw)
		if source != "" {
			where = fmt.Sprintf("%s%s=%q", source, strings.ToUpper(name), raw)
		}
		i := slices.IndexFunc(detectFields, func(f detectField) bool { return f.name == name })
		if i < 0 {
			return c, fmt.Errorf("%s: no such detection threshold (known: %s)", where, strings.Join(names, ", "))
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			v = math.NaN()
		}
		f := detectFields[i]
		if f.count {
			if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) || v < 1 {
				return c, fmt.Errorf("%s: must be a whole number, at least 1", where)
			}
		} else if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return c, fmt.Errorf("%s: must be a number of seconds greater than 0", where)
		}
		f.set(&c, v)
	}
	return c, nil
}

// DetectConfigFromEnv is the thresholds getenv's CTRLSCOPE_DETECT_{NAME} variables set (environ:
// the environment, "KEY=value" entries; nil: os.Environ()); nil when CTRLSCOPE_DETECT is off. An
// error names the variable that is not a valid threshold.
func DetectConfigFromEnv(environ []string) (*DetectConfig, error) {
	if environ == nil {
		environ = os.Environ()
	}
	values := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == EnvDetect:
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "0", "off", "false", "no":
				return nil, nil
			}
		case strings.HasPrefix(k, EnvDetectPrefix):
			values[strings.ToLower(k[len(EnvDetectPrefix):])] = v
		}
	}
	c, err := DetectConfigFrom(values, EnvDetectPrefix)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// messageNumber writes x as messages do: the shortest decimal that reads back the same, no
// fraction when whole (60, 0.5), an exponent where Python's repr has one.
func messageNumber(x float64) string {
	if x == math.Trunc(x) && !math.IsInf(x, 0) && math.Abs(x) < 1e300 {
		if math.Abs(x) < 1<<63 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	if a := math.Abs(x); a < 1e-4 || a >= 1e16 {
		return strconv.FormatFloat(x, 'e', -1, 64)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}
