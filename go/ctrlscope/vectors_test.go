package ctrlscope

// Runs the protocol's test vectors (protocol/vectors, the same files ctrlscope's Python and
// browser implementations run) through this module: encode (observations in, the exact frames and
// snapshot hashes out, against a real Redis), queue (the fold) and derive (TopicState).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
)

const vectorsDir = "../../protocol/vectors"

func loadVectors(t *testing.T, family string) map[string]map[string]any {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(vectorsDir, family, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no %s vectors in %s (%v)", family, vectorsDir, err)
	}
	out := map[string]map[string]any{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = v
	}
	return out
}

func num(v any) float64 { f, _ := v.(float64); return f }
func str(v any) string  { s, _ := v.(string); return s }

func optNum(v any) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

func optInt(v any) *int {
	if f, ok := v.(float64); ok {
		i := int(f)
		return &i
	}
	return nil
}

func seconds(v any) time.Duration { return time.Duration(num(v) * float64(time.Second)) }

// object is a vector's object as the API decoder gives it: integers are int64 in unstructured.
func object(v any) any {
	if m, ok := intsOf(v).(map[string]any); ok {
		return &unstructured.Unstructured{Object: m}
	}
	return nil
}

func intsOf(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = intsOf(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = intsOf(e)
		}
		return out
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
}

func strList(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, str(x))
	}
	return out
}

// call maps one vector step (a Python Observer hook's name and keyword arguments) to Telemetry.
func call(t *testing.T, tel *Telemetry, ctx *context.Context, s map[string]any) {
	switch s["call"] {
	case "informer":
		scope, _ := s["scope"].(map[string]any)
		b, _ := scope["metadata_only"].(bool)
		tel.InformerWithScope(str(s["informer"]), str(s["fifo"]), seconds(s["resync_period"]), InformerScope{
			Namespace: str(scope["namespace"]), LabelSelector: str(scope["label_selector"]),
			FieldSelector: str(scope["field_selector"]), MetadataOnly: b, Transform: str(scope["transform"])})
	case "list":
		tel.List(str(s["informer"]), str(s["resource_version"]), int(num(s["items"])), seconds(s["duration"]), str(s["error"]))
	case "watch_start":
		tel.WatchStart(str(s["informer"]), str(s["resource_version"]))
	case "watch_event":
		tel.WatchEvent(str(s["informer"]), WatchEventType(str(s["event_type"])), str(s["key"]), str(s["resource_version"]))
	case "bookmark":
		tel.Bookmark(str(s["informer"]), str(s["resource_version"]))
	case "watch_end":
		tel.WatchEnd(str(s["informer"]), WatchEndReason(str(s["reason"])), str(s["error"]))
	case "backoff":
		tel.Backoff(str(s["informer"]), seconds(s["delay"]), str(s["reason"]))
	case "reflector_state":
		tel.ReflectorState(str(s["informer"]), ReflectorState(str(s["state"])))
	case "store":
		switch s["op"] {
		case "upsert":
			tel.StoreUpsert(str(s["informer"]), str(s["key"]), object(s["obj"]))
		case "delete":
			tel.StoreDelete(str(s["informer"]), str(s["key"]))
		case "replace":
			items := map[string]any{}
			for _, pair := range s["obj"].([]any) {
				kv := pair.([]any)
				items[str(kv[0])] = object(kv[1])
			}
			tel.StoreReplace(str(s["informer"]), items)
		}
	case "fifo":
		tel.Fifo(str(s["informer"]), FifoOp(str(s["op"])), str(s["key"]), DeltaType(str(s["delta"])), int(num(s["depth"])))
	case "handler":
		tomb, _ := s["tombstone"].(bool)
		tel.Handler(str(s["informer"]), HandlerCall{Handler: str(s["handler"]), Event: HandlerEvent(str(s["event"])),
			Key: str(s["key"]), Outcome: HandlerOutcome(str(s["outcome"])), Duration: seconds(s["duration"]),
			Error: str(s["error"]), Old: object(s["old"]), New: object(s["new"]), Tombstone: tomb})
	case "queue":
		tel.Queue(str(s["queue"]), QueueRecord{Op: QueueOp(str(s["op"])), Key: str(s["key"]), Depth: int(num(s["depth"])),
			Delay: optNum(s["delay"]), Requeues: optInt(s["requeues"]), Duration: optNum(s["duration"])})
	case "controller":
		started, _ := s["started"].(bool)
		tel.Controller(str(s["controller"]), strList(s["watches"]), int(num(s["workers"])), started)
		if spec, ok := s["rate_limiter"].(map[string]any); ok { // v1.5
			tel.ControllerRateLimiter(str(s["controller"]), RateLimiterSpec(spec))
		}
	case "event":
		tel.ControllerTopic(str(s["controller"])).Event(EventCall{Event: ControllerEvent(str(s["event"])), Key: str(s["key"]),
			Requests: strList(s["requests"]), FilteredBy: str(s["filtered_by"]), Source: str(s["source"]),
			Old: object(s["old"]), New: object(s["new"])}) // v1.7: source, old, new
	case "reconcile_start":
		*ctx = tel.ReconcileStart(context.Background(), str(s["controller"]), str(s["key"]), int(num(s["worker"])))
	case "reconcile_end":
		tel.ReconcileEnd(str(s["controller"]), str(s["key"]), int(num(s["worker"])), seconds(s["duration"]),
			ReconcileResult(str(s["result"])), seconds(s["requeue_after"]), str(s["error"]))
		*ctx = context.Background()
	case "request":
		tel.RequestRV(*ctx, str(s["method"]), str(s["path"]), int(num(s["code"])), seconds(s["duration"]), str(s["rv"]))
	case "write_refused":
		tel.WriteRefused(*ctx, str(s["method"]), str(s["path"]), WriteRefusal(str(s["reason"])))
	case "leader":
		tel.Leader(str(s["name"]), str(s["identity"]), s["leader"].(bool), str(s["holder"]))
	case "watcher":
		tel.Watcher(str(s["watcher"]), str(s["resource"]), str(s["namespace"]), WatcherVariant(str(s["variant"])))
	case "watcher_state":
		tel.WatcherState(str(s["watcher"]), ReflectorState(str(s["state"])))
	case "watcher_watch_start":
		tel.WatcherWatchStart(str(s["watcher"]), str(s["resource_version"]))
	case "watcher_event":
		tel.WatcherEvent(str(s["watcher"]), WatchEventType(str(s["event_type"])), str(s["key"]), str(s["resource_version"]))
	case "watcher_watch_end":
		tel.WatcherWatchEnd(str(s["watcher"]), WatchEndReason(str(s["reason"])), str(s["error"]))
	case "watcher_read":
		tel.WatcherRead(str(s["watcher"]), str(s["key"]), str(s["path"]), int(num(s["code"])), seconds(s["duration"]))
	case "status":
		v, _ := s["value"].(map[string]any)
		tel.Status(str(s["table"]), str(s["key"]), v)
	default:
		t.Fatalf("vector step calls an unknown hook %v", s["call"])
	}
}

// checkFrameBytes: the rules readers test without decoding (protocol/README.md §3).
func checkFrameBytes(t *testing.T, raw string) {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		t.Fatalf("frame is not JSON: %v", err)
	}
	if f["reset"] == true {
		if !strings.HasPrefix(raw, `{"reset":true`) {
			t.Errorf("reset frame does not start {\"reset\":true: %.60s", raw)
		}
		return
	}
	if !strings.HasPrefix(raw, `{"r":`) {
		t.Errorf("frame's first key is not r: %.60s", raw)
	}
	recs, _ := f["r"].([]any)
	if strings.HasPrefix(raw, `{"r":[],`) != (len(recs) == 0) {
		t.Errorf("frame's {\"r\":[], prefix disagrees with its records: %.60s", raw)
	}
}

// runEncodeSteps runs an encode vector's steps through a Publisher and Telemetry under prefix,
// on the vector's clock, and stops the publisher: the frames are in Redis afterwards. It returns
// the Telemetry's stage counters after the steps, as JSON values: per controller, and (v1.6) per
// watcher when there is any.
func runEncodeSteps(t *testing.T, v map[string]any, prefix string) any {
	t.Helper()
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.UnixMilli(int64(num(v["wall_ms"]))))
	pub, err := NewPublisher(redisURL(), PublisherOptions{Prefix: prefix, Name: str(v["publisher"]), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(time.Second)
	detect := map[string]string{} // v1.7: the vector's thresholds, the others the defaults
	if d, ok := v["detect"].(map[string]any); ok {
		for name, x := range d {
			detect[name] = fmt.Sprint(x)
		}
	}
	cfg, err := DetectConfigFrom(detect, "")
	if err != nil {
		t.Fatal(err)
	}
	tel := NewTelemetry(pub, str(v["worker"]), TelemetryOptions{Runtime: Runtime(str(v["runtime"])), Clock: clk,
		Detect: &cfg})
	rctx := context.Background()
	for _, raw := range v["steps"].([]any) {
		s := raw.(map[string]any)
		switch {
		case s["advance"] != nil:
			clk.SetTime(clk.Now().Add(seconds(s["advance"])))
		case s["flush"] == true:
			if _, err := pub.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		default:
			call(t, tel, &rctx, s)
		}
	}
	sample := tel.Stages()
	stages := map[string]any{"controllers": sample["controllers"]}
	if w := sample["watchers"].(map[string]watcherCounts); len(w) > 0 {
		stages["watchers"] = w
	}
	var out any
	_ = json.Unmarshal(mustJSON(stages), &out)
	return out
}

// supportedCapabilities are the vector "requires" entries this publisher implements. The Go module
// publishes no framework handlers (v1.1 "handlers" is for kopf-style publishers).
var supportedCapabilities = map[string]bool{}

// supported says whether this publisher offers every capability vector v requires.
func supported(v map[string]any) bool {
	req, _ := v["requires"].([]any)
	for _, c := range req {
		if !supportedCapabilities[str(c)] {
			return false
		}
	}
	return true
}

func TestEncodeVectors(t *testing.T) {
	rdb := testRedis(t)
	for name, v := range loadVectors(t, "encode") {
		t.Run(name, func(t *testing.T) {
			if !supported(v) {
				t.Skipf("needs a capability of %v, which the Go publisher does not offer", v["requires"])
			}
			ctx := context.Background()
			prefix := fmt.Sprintf("ctrlscope-go-vectors-%s:", randomHex(4))
			defer cleanPrefix(rdb, prefix)
			gotStages := runEncodeSteps(t, v, prefix)
			topics, err := rdb.SMembers(ctx, prefix+"topics").Result()
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(topics)
			gotFrames := map[string]any{}
			gotSnaps := map[string]any{}
			for _, topic := range topics {
				entries, err := rdb.XRange(ctx, prefix+"stream:"+topic, "-", "+").Result()
				if err != nil {
					t.Fatal(err)
				}
				var frames []any
				for _, e := range entries {
					raw := e.Values["f"].(string)
					checkFrameBytes(t, raw)
					var f any
					_ = json.Unmarshal([]byte(raw), &f)
					frames = append(frames, f)
				}
				gotFrames[topic] = frames
				hash, err := rdb.HGetAll(ctx, prefix+"snap:"+topic).Result()
				if err != nil {
					t.Fatal(err)
				}
				snap := map[string]any{}
				for k, val := range hash {
					if k == "__id__" {
						continue
					}
					var x any
					if err := json.Unmarshal([]byte(val), &x); err != nil {
						t.Fatalf("snapshot %s[%s] is not JSON: %v", topic, k, err)
					}
					snap[k] = x
				}
				gotSnaps[topic] = snap
			}
			if dir := os.Getenv("CTRLSCOPE_VECTOR_DUMP"); dir != "" { // for diffing a failure by hand
				_ = os.WriteFile(filepath.Join(dir, name+".got"), []byte(pretty(map[string]any{"frames": gotFrames, "snapshots": gotSnaps})), 0o644)
				_ = os.WriteFile(filepath.Join(dir, name+".want"), []byte(pretty(map[string]any{"frames": v["frames"], "snapshots": v["snapshots"]})), 0o644)
			}
			if !reflect.DeepEqual(gotFrames, v["frames"]) {
				t.Errorf("frames differ:\n got  %s\n want %s", pretty(gotFrames), pretty(v["frames"]))
			}
			if !reflect.DeepEqual(gotSnaps, v["snapshots"]) {
				t.Errorf("snapshots differ:\n got  %s\n want %s", pretty(gotSnaps), pretty(v["snapshots"]))
			}
			if want, ok := v["stages"].(map[string]any); ok && !reflect.DeepEqual(gotStages, want) {
				t.Errorf("stage counters differ:\n got  %s\n want %s", pretty(gotStages), pretty(want))
			}
		})
	}
}

func pretty(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	_ = enc.Encode(v)
	return b.String()
}

func TestQueueVectors(t *testing.T) {
	for name, v := range loadVectors(t, "queue") {
		t.Run(name, func(t *testing.T) {
			state := map[string]*QueueItem{}
			for i, raw := range v["records"].([]any) {
				r := raw.(map[string]any)
				if key := str(r["key"]); key != "" {
					item, ok := FoldQueueOp(state[key], QueueOp(str(r["op"])), num(r["ts"]), optNum(r["delay"]), optInt(r["requeues"]))
					if ok {
						state[key] = &item
					} else {
						delete(state, key)
					}
				}
				got := map[string]any{}
				for k, it := range state {
					var x any
					_ = json.Unmarshal(it.appendJSON(nil), &x)
					got[k] = x
				}
				want := v["after"].([]any)[i]
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("after record %d (%v):\n got  %s\n want %s", i, r, pretty(got), pretty(want))
				}
			}
		})
	}
}

func TestDeriveVectors(t *testing.T) {
	for name, v := range loadVectors(t, "derive") {
		t.Run(name, func(t *testing.T) {
			s := NewTopicState()
			snap := v["snapshot"].(map[string]any)
			s.Snapshot(str(snap["id"]), snap["state"].(map[string]any))
			records := []any{}
			for _, raw := range v["entries"].([]any) {
				e := raw.([]any)
				frame, _ := json.Marshal(e[1])
				recs, err := s.Apply(str(e[0]), frame)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) > 0 {
					rs := []any{}
					for _, r := range recs {
						rs = append(rs, r)
					}
					records = append(records, []any{e[0], rs})
				}
			}
			if later, ok := v["later_snapshot"].(map[string]any); ok {
				s.Snapshot(str(later["id"]), later["state"].(map[string]any))
			}
			want := v["expect"].(map[string]any)
			var unsupported any
			if s.Unsupported != "" {
				unsupported = s.Unsupported
			}
			seen := []any{}
			for _, x := range s.UnsupportedSeen {
				seen = append(seen, x)
			}
			got := map[string]any{"state": s.State, "cursor": s.Cursor, "records": records,
				"duplicates": float64(s.Duplicates), "dropped": float64(s.Dropped),
				"unknown_records": float64(s.UnknownRecords), "unsupported": unsupported}
			if _, ok := want["unsupported_seen"]; ok {
				got["unsupported_seen"] = seen
			}
			if _, ok := want["needs_snapshot"]; ok {
				got["needs_snapshot"] = s.NeedsSnapshot
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("derived:\n got  %s\n want %s", pretty(got), pretty(want))
			}
		})
	}
}

func TestLivenessVectors(t *testing.T) {
	for name, v := range loadVectors(t, "liveness") {
		t.Run(name, func(t *testing.T) {
			var publishers []map[string]any
			for _, p := range v["publishers"].([]any) {
				publishers = append(publishers, p.(map[string]any))
			}
			for worker, raw := range v["workers"].(map[string]any) {
				c := raw.(map[string]any)
				var last *float64
				if f, ok := c["last_frame"].(float64); ok {
					last = &f
				}
				if got := WorkerLiveness(publishers, worker, v["now"].(float64), last); string(got) != c["expect"] {
					t.Errorf("worker %s: %s, want %s", worker, got, c["expect"])
				}
			}
		})
	}
}

func TestNamesVectors(t *testing.T) {
	for name, v := range loadVectors(t, "names") {
		t.Run(name, func(t *testing.T) {
			for _, raw := range v["cases"].([]any) {
				c := raw.([]any)
				if got := TopicPart(c[0].(string)); got != c[1] {
					t.Errorf("TopicPart(%q) = %q, want %q", c[0], got, c[1])
				}
			}
		})
	}
}
