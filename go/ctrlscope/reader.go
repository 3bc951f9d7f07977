package ctrlscope

// TopicState is what a reader derives from one topic's snapshot and frames (protocol/README.md §7),
// the same rules as the dashboard's browser client and ctrlscope's Python TopicState; all three
// pass protocol/vectors/derive. Go programs use it to read telemetry back (the tests do).

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

var versionRE = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]+))?$`)

// VersionMajor is the major number of a "MAJOR.MINOR" version: 1 for a frame without "v" (nil),
// -1 for anything unreadable.
func VersionMajor(v any) int {
	if v == nil {
		return ProtocolMajor
	}
	s, ok := v.(string)
	if !ok {
		return -1
	}
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}

var knownKinds = func() map[string]bool {
	out := map[string]bool{}
	for _, k := range AllRecordKind {
		out[string(k)] = true
	}
	return out
}()

// TopicState: one topic's derived state, cursor and counters.
type TopicState struct {
	State           map[string]any
	Cursor          string
	Duplicates      int
	Dropped         int
	UnknownRecords  int
	Unsupported     string // the version this reader cannot read, while it lasts
	UnsupportedSeen []string
	NeedsSnapshot   bool // readable again after an unsupported stretch: take a fresh snapshot
}

// NewTopicState is an empty reader state.
func NewTopicState() *TopicState { return &TopicState{State: map[string]any{}} }

// Snapshot replaces the state and sets the cursor to the snapshot's stream id.
func (s *TopicState) Snapshot(id string, state map[string]any) {
	s.State = map[string]any{}
	if s.Unsupported == "" {
		for k, v := range state {
			s.State[k] = v
		}
	}
	s.Cursor = id
	s.NeedsSnapshot = false
}

// CompareIDs orders two stream ids ("ms-seq").
func CompareIDs(a, b string) int {
	am, as := splitID(a)
	bm, bs := splitID(b)
	switch {
	case am != bm:
		if am < bm {
			return -1
		}
		return 1
	case as != bs:
		if as < bs {
			return -1
		}
		return 1
	}
	return 0
}

func splitID(id string) (uint64, uint64) {
	ms, seq, _ := strings.Cut(id, "-")
	a, _ := strconv.ParseUint(ms, 10, 64)
	b, _ := strconv.ParseUint(seq, 10, 64)
	return a, b
}

// Apply applies one stream entry and returns the records a reader acts on.
func (s *TopicState) Apply(id string, raw []byte) ([]map[string]any, error) {
	if s.Cursor != "" && CompareIDs(id, s.Cursor) <= 0 {
		s.Duplicates++
		return nil, nil
	}
	s.Cursor = id
	var frame map[string]any
	if err := json.Unmarshal(raw, &frame); err != nil {
		return nil, err
	}
	v := frame["v"]
	if VersionMajor(v) != ProtocolMajor {
		version := jsonString(v)
		if s.Unsupported != version {
			s.Unsupported = version
			s.State = map[string]any{}
			seen := false
			for _, x := range s.UnsupportedSeen {
				seen = seen || x == version
			}
			if !seen {
				s.UnsupportedSeen = append(s.UnsupportedSeen, version)
			}
		}
		return nil, nil
	}
	if s.Unsupported != "" {
		s.Unsupported = ""
		s.NeedsSnapshot = true
	}
	if changes, ok := frame["s"].(map[string]any); ok {
		for k, val := range changes {
			if val == nil {
				delete(s.State, k)
			} else {
				s.State[k] = val
			}
		}
	}
	if d, ok := frame["dropped"].(float64); ok {
		s.Dropped += int(d)
	}
	recs, _ := frame["r"].([]any)
	var known []map[string]any
	for _, r := range recs {
		if m, ok := r.(map[string]any); ok {
			if k, _ := m["k"].(string); knownKinds[k] {
				known = append(known, m)
				continue
			}
		}
		s.UnknownRecords++
	}
	return known, nil
}

// jsonString is how Python's str() shows a version value (a string as is, None as "None").
func jsonString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// jsonMs is a JSON number of ms (as encoding/json decodes it into an any), else 0.
func jsonMs(v any) float64 {
	if f, ok := v.(float64); ok {
		return f
	}
	return 0
}

// stopped: a presence entry's "stopped" is set (not null, false, 0 or "").
func stopped(v any) bool {
	switch s := v.(type) {
	case nil:
		return false
	case bool:
		return s
	case float64:
		return s != 0
	case string:
		return s != ""
	}
	return true
}

// RunAlive says whether a presence entry's run is alive at nowMs: "stopped" null and "seen" at most
// AliveMs old (a missing or non-numeric "seen" is never fresh). protocol/redis-layout.md, "Liveness".
func RunAlive(entry map[string]any, nowMs float64) bool {
	return !stopped(entry["stopped"]) && nowMs-jsonMs(entry["seen"]) <= AliveMs
}

// WorkerRun is a worker's newest run among presence entries (the {prefix}publishers hash's values,
// decoded): role "worker", "name" the worker's topic segment, the greatest "started" (ties: the
// greatest "seen"); nil when the worker keeps none.
func WorkerRun(publishers []map[string]any, worker string) map[string]any {
	var best map[string]any
	for _, p := range publishers {
		if p["role"] != WorkerRole || p["name"] != worker {
			continue
		}
		if best == nil || jsonMs(p["started"]) > jsonMs(best["started"]) ||
			(jsonMs(p["started"]) == jsonMs(best["started"]) && jsonMs(p["seen"]) > jsonMs(best["seen"])) {
			best = p
		}
	}
	return best
}

// WorkerLiveness is whether worker publishes at nowMs, by the one rule every reader follows
// (protocol/redis-layout.md, "Liveness"; protocol/vectors/liveness): its newest run's presence entry
// decides when it keeps one (an idle worker sends no frame for minutes and is live); without one,
// its last frame on components or metrics (lastFrameMs, nil: none) must be at most FrameStaleMs old.
func WorkerLiveness(publishers []map[string]any, worker string, nowMs float64, lastFrameMs *float64) Liveness {
	if run := WorkerRun(publishers, worker); run != nil {
		if RunAlive(run, nowMs) {
			return LivenessLive
		}
		return LivenessStopped
	}
	if lastFrameMs != nil && nowMs-*lastFrameMs <= FrameStaleMs {
		return LivenessLive
	}
	return LivenessStale
}
