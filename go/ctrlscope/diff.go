package ctrlscope

// The field paths an update changed (protocol v1.7, "diff paths"): what an event record and the
// trigger it leaves say changed between the old and the new object, so that a self-triggered
// attempt can name the field its own write keeps changing.
//
// The paths are dotted, depth first, map keys in sorted order (byte order, which for UTF-8 is the
// code point order Python sorts by), a list index a segment of its own ("spec.containers.0.image").
// metadata.resourceVersion is not compared (every write changes it); metadata.managedFields is
// compared as one value, and so is everything at DiffMaxDepth segments: a path is never longer. A
// key (or list element) on one side only is a path. At most DiffMaxPaths are listed; the count of
// the others is returned beside them.
//
// Objects are compared as JSON values: an unstructured object's map as it is, a typed one converted
// to that map first (runtime.DefaultUnstructuredConverter, the JSON field names and omitempty
// rules): numbers compare by value whatever their Go type.

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Diff is the field paths that differ between old and new (Kubernetes objects, typed or
// unstructured), the first DiffMaxPaths of them, and how many more differ.
func Diff(old, new any) (paths []string, more int) {
	old, new = untombstone(old), untombstone(new)
	d := differ{}
	if a, b, ok := sameTypedStructs(old, new); ok {
		d.structFields(a, b)
		return d.paths, d.more
	}
	a, b := objectFields(old), objectFields(new)
	if a == nil || b == nil {
		return nil, 0
	}
	d.walk(a, b)
	return d.paths, d.more
}

func untombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// objectFields is obj as a JSON object (nil when it is none).
func objectFields(obj any) map[string]any {
	switch o := obj.(type) {
	case nil:
		return nil
	case *unstructured.Unstructured:
		if o == nil {
			return nil
		}
		return o.Object
	case map[string]any:
		return o
	case runtime.Unstructured:
		return o.UnstructuredContent()
	}
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	return m
}

// differ collects the paths of one diff at d.segs. A probe differ only answers whether two values
// differ at all (found), as JSON values, without the path rules: it compares a value whole.
type differ struct {
	segs  []string
	paths []string
	more  int

	probe bool
	found bool
}

func (d *differ) emit(last string) {
	if d.probe {
		d.found = true
		return
	}
	if len(d.paths) >= DiffMaxPaths {
		d.more++
		return
	}
	n := len(last)
	for _, s := range d.segs {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range d.segs {
		b.WriteString(s)
		b.WriteByte('.')
	}
	b.WriteString(last)
	d.paths = append(d.paths, b.String())
}

// ignored: metadata.resourceVersion.
func (d *differ) ignored(key string) bool {
	return !d.probe && len(d.segs) == 1 && d.segs[0] == "metadata" && key == "resourceVersion"
}

// managedFieldsPath is the one path managedFields changes are reported as.
const managedFieldsPath = "metadata.managedFields"

// whole: the value at segs plus key is compared as one (managedFields, or the depth limit).
func (d *differ) whole(key string) bool {
	return !d.probe && len(d.segs)+1 >= DiffMaxDepth || (len(d.segs) == 1 && d.segs[0] == "metadata" && key == "managedFields")
}

// walk compares two JSON objects at d.segs.
func (d *differ) walk(a, b map[string]any) {
	keys := make([]string, 0, len(a)+2)
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if d.found {
			return
		}
		if d.ignored(k) {
			continue
		}
		av, inA := a[k]
		bv, inB := b[k]
		if !inA || !inB {
			d.emit(k)
			continue
		}
		d.value(k, av, bv)
	}
}

// value compares the values at d.segs plus seg.
func (d *differ) value(seg string, a, b any) {
	if !d.whole(seg) {
		switch x := a.(type) {
		case map[string]any:
			if y, ok := b.(map[string]any); ok {
				d.segs = append(d.segs, seg)
				d.walk(x, y)
				d.segs = d.segs[:len(d.segs)-1]
				return
			}
		case []any:
			if y, ok := b.([]any); ok {
				d.segs = append(d.segs, seg)
				d.list(x, y)
				d.segs = d.segs[:len(d.segs)-1]
				return
			}
		}
	}
	if !jsonEqual(a, b) {
		d.emit(seg)
	}
}

// list compares two JSON arrays at d.segs, index by index; the longer one's extra indexes are paths.
func (d *differ) list(a, b []any) {
	for i := range max(len(a), len(b)) {
		if d.found {
			return
		}
		seg := strconv.Itoa(i) // no allocation below 100
		if i >= len(a) || i >= len(b) {
			d.emit(seg)
			continue
		}
		d.value(seg, a[i], b[i])
	}
}

// jsonEqual compares two JSON values as values: numbers by value whatever their Go type.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	if f, ok := jsonNumber(a); ok {
		g, ok := jsonNumber(b)
		return ok && f == g
	}
	return reflect.DeepEqual(a, b)
}

// jsonNumber is a JSON number's value (the converter and decoders give int64 or float64).
func jsonNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	}
	return 0, false
}
