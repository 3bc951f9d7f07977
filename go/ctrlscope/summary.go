package ctrlscope

// What the dashboard is told about one cached object (protocol/README.md §5.1): a compact summary,
// never the object. Secrets therefore cannot leak through the cache panel: their data, like every
// other field but these five, stays in the process.

import (
	"reflect"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// Summary is an informer topic's state value for one key.
type Summary struct {
	RV       string // metadata.resourceVersion ("": null)
	Gen      int64  // metadata.generation (0: null)
	UID      string // metadata.uid ("": null)
	Deleting bool   // metadata.deletionTimestamp is set
	Phase    string // status.phase, when the object has one
	HasPhase bool
}

func (s Summary) appendJSON(b []byte) []byte {
	b = append(b, `{"rv":`...)
	b = appendOptString(b, s.RV)
	b = append(b, `,"gen":`...)
	if s.Gen == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, s.Gen, 10)
	}
	b = append(b, `,"uid":`...)
	b = appendOptString(b, s.UID)
	if s.Deleting {
		b = append(b, `,"deleting":true`...)
	}
	if s.HasPhase {
		b = append(b, `,"phase":`...)
		b = appendString(b, s.Phase)
	}
	return append(b, '}')
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// Summarize returns the summary of a Kubernetes object (typed, unstructured, or a deletion
// tombstone, whose last known object is summarised). Anything without metadata gives an empty one.
func Summarize(obj any) Summary {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok && pod != nil {
		// The commonest kind, without the accessor's interface calls or reflection: the same
		// fields as below (a typed object's empty phase is an absent one).
		return Summary{RV: pod.ResourceVersion, Gen: pod.Generation, UID: string(pod.UID),
			Deleting: pod.DeletionTimestamp != nil, Phase: string(pod.Status.Phase), HasPhase: pod.Status.Phase != ""}
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return Summary{}
	}
	s := Summary{RV: m.GetResourceVersion(), Gen: m.GetGeneration(), UID: string(m.GetUID()),
		Deleting: m.GetDeletionTimestamp() != nil}
	s.Phase, s.HasPhase = phaseOf(obj)
	return s
}

// ResourceVersion of an object ("" when it has none, e.g. nil).
func ResourceVersion(obj any) string {
	if obj == nil {
		return ""
	}
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

// phaseOf finds status.phase: in an unstructured object's map, or in a typed object's Status
// struct by reflection (the field path is looked up once per type, so this costs a few ns).
func phaseOf(obj any) (string, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		status, ok := u.Object["status"].(map[string]any)
		if !ok {
			return "", false
		}
		p, ok := status["phase"]
		if !ok {
			return "", false
		}
		ps, _ := p.(string)
		return ps, true
	}
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	path, ok := phasePaths.Load(v.Type())
	if !ok {
		path = findPhase(v.Type())
		phasePaths.Store(v.Type(), path)
	}
	idx := path.([]int)
	if idx == nil {
		return "", false
	}
	phase := v.FieldByIndex(idx).String()
	return phase, phase != "" // a typed object's empty phase is the JSON's absent one (omitempty)
}

var phasePaths sync.Map // reflect.Type -> []int (nil: no status.phase)

func findPhase(t reflect.Type) []int {
	status, ok := t.FieldByName("Status")
	if !ok || status.Type.Kind() != reflect.Struct {
		return nil
	}
	phase, ok := status.Type.FieldByName("Phase")
	if !ok || phase.Type.Kind() != reflect.String {
		return nil
	}
	return append(append([]int{}, status.Index...), phase.Index...)
}
