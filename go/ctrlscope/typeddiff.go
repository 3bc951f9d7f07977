package ctrlscope

// Diff of two typed objects without converting them: converting a Pod to its JSON map
// (runtime.DefaultUnstructuredConverter) costs ~35 µs and ~120 allocations, twice per update event,
// where walking the two structs side by side costs a few µs. The walk follows the converter's
// rules, so the paths are those of the two JSON maps: a field's name is its json tag's, ",inline"
// and untagged embedded structs lend their fields to the enclosing object, omitempty and omitzero
// fields that are empty are absent, a nil pointer, map or slice is null, a []byte a string. A type
// the converter hands to its own marshaler (metav1.Time, resource.Quantity, IntOrString, a
// RawExtension) is converted by the converter, and its JSON value compared.

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// sameTypedStructs: old and new are non-nil pointers to structs of one type (not unstructured).
func sameTypedStructs(old, new any) (reflect.Value, reflect.Value, bool) {
	if old == nil || new == nil {
		return reflect.Value{}, reflect.Value{}, false
	}
	if _, ok := old.(runtime.Unstructured); ok {
		return reflect.Value{}, reflect.Value{}, false
	}
	a, b := reflect.ValueOf(old), reflect.ValueOf(new)
	if a.Type() != b.Type() || a.Kind() != reflect.Pointer || a.IsNil() || b.IsNil() ||
		a.Type().Elem().Kind() != reflect.Struct || !structInfoOf(a.Type().Elem()).plain {
		return reflect.Value{}, reflect.Value{}, false
	}
	return a.Elem(), b.Elem(), true
}

// structInfo is a struct type's JSON fields, sorted by name (embedded structs' fields included).
// plain is false for a struct the walk does not follow (an embedded pointer): it is compared as
// the converter's JSON.
type structInfo struct {
	fields []jsonField
	plain  bool
}

type jsonField struct {
	name      string
	index     []int
	omitEmpty bool
	omitZero  func(reflect.Value) bool
}

var (
	structInfos sync.Map // reflect.Type -> *structInfo
	customTypes sync.Map // reflect.Type -> bool
)

func structInfoOf(t reflect.Type) *structInfo {
	if si, ok := structInfos.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{plain: true}
	si.collect(t, nil)
	slices.SortStableFunc(si.fields, func(a, b jsonField) int { return strings.Compare(a.name, b.name) })
	structInfos.Store(t, si)
	return si
}

// collect adds t's fields under index (the converter's fieldInfoFromField, applied recursively to
// inlined structs).
func (si *structInfo) collect(t reflect.Type, index []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, omitEmpty, omitZero, inline := "", false, false, false
		tag, tagged := f.Tag.Lookup("json")
		if !tagged || tag == "" {
			inline = f.Anonymous
			if !inline {
				name = f.Name
			}
		} else {
			items := strings.Split(tag, ",")
			name = items[0]
			if slices.Contains(items[1:], "inline") || (name == "" && f.Anonymous) {
				inline = true
			} else if name == "" {
				name = f.Name
			}
			omitEmpty = slices.Contains(items[1:], "omitempty")
			omitZero = slices.Contains(items[1:], "omitzero")
		}
		if name == "-" && !inline {
			continue
		}
		idx := append(slices.Clone(index), i)
		if inline {
			if f.Type.Kind() != reflect.Struct || customJSON(f.Type) {
				si.plain = false
				continue
			}
			si.collect(f.Type, idx)
			continue
		}
		jf := jsonField{name: name, index: idx, omitEmpty: omitEmpty}
		if omitZero {
			jf.omitZero = value.OmitZeroFunc(f.Type)
		}
		si.fields = append(si.fields, jf)
	}
}

// customJSON: the converter hands values of t to their own conversion (json.Marshaler,
// UnstructuredConverter).
func customJSON(t reflect.Type) bool {
	if c, ok := customTypes.Load(t); ok {
		return c.(bool)
	}
	c := value.TypeReflectEntryOf(t).CanConvertToUnstructured()
	customTypes.Store(t, c)
	return c
}

// present: the field is in the JSON object (the converter's isEmpty for omitempty).
func (f *jsonField) present(v reflect.Value) bool {
	if f.omitEmpty {
		switch v.Kind() {
		case reflect.Array, reflect.String:
			if v.Len() == 0 {
				return false
			}
		case reflect.Bool:
			if !v.Bool() {
				return false
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if v.Int() == 0 {
				return false
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if v.Uint() == 0 {
				return false
			}
		case reflect.Float32, reflect.Float64:
			if v.Float() == 0 {
				return false
			}
		case reflect.Map, reflect.Slice:
			if v.IsNil() || v.Len() == 0 {
				return false
			}
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() {
				return false
			}
		}
	}
	return f.omitZero == nil || !f.omitZero(v)
}

// structFields compares two structs of one plain type at d.segs, field by field in name order.
func (d *differ) structFields(a, b reflect.Value) {
	fields := structInfoOf(a.Type()).fields
	for i := range fields {
		if d.found {
			return
		}
		f := &fields[i]
		if d.ignored(f.name) {
			continue
		}
		fa, fb := a.FieldByIndex(f.index), b.FieldByIndex(f.index)
		inA, inB := f.present(fa), f.present(fb)
		switch {
		case !inA && !inB:
		case inA != inB:
			d.emit(f.name)
		default:
			d.typed(f.name, fa, fb)
		}
	}
}

// typed compares two values of one Go type at d.segs plus seg.
func (d *differ) typed(seg string, a, b reflect.Value) {
	t := a.Type()
	if customJSON(t) {
		// Equal Go values are equal JSON: only values that differ are converted (a Time's
		// conversion formats it, a managedFields entry's parses its fieldsV1). Pointers (a
		// managedFields entry's *Time and *FieldsV1) are compared by what they point to: the old
		// and the new object are decoded apart, so their pointers always differ.
		if t.Kind() != reflect.Pointer && t.Comparable() && a.Equal(b) ||
			(t.Kind() == reflect.Pointer || !t.Comparable()) && reflect.DeepEqual(a.Interface(), b.Interface()) {
			return
		}
		d.value(seg, customValue(a), customValue(b))
		return
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() || b.IsNil():
			d.emit(seg)
		case t.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type():
			d.value(seg, convertedValue(a), convertedValue(b))
		default:
			d.typed(seg, a.Elem(), b.Elem())
		}
		return
	case reflect.Struct:
		if !structInfoOf(t).plain {
			d.value(seg, convertedValue(a), convertedValue(b))
			return
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			d.value(seg, convertedValue(a), convertedValue(b))
			return
		}
		if a.IsNil() != b.IsNil() {
			d.emit(seg)
			return
		}
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			d.emit(seg)
			return
		}
		if t.Elem().Kind() == reflect.Uint8 { // base64 in JSON: one string
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				d.emit(seg)
			}
			return
		}
	case reflect.Array:
	default:
		if !scalarEqual(a, b) {
			d.emit(seg)
		}
		return
	}
	// a struct, map, slice or array: walked, or compared whole at the limits
	if d.whole(seg) {
		probe := differ{probe: true}
		probe.composite(a, b)
		if probe.found {
			d.emit(seg)
		}
		return
	}
	d.segs = append(d.segs, seg)
	d.composite(a, b)
	d.segs = d.segs[:len(d.segs)-1]
}

// composite compares two structs, maps, slices or arrays of one type at d.segs.
func (d *differ) composite(a, b reflect.Value) {
	switch a.Kind() {
	case reflect.Struct:
		d.structFields(a, b)
	case reflect.Map:
		keys := make([]string, 0, a.Len()+2)
		for it := a.MapRange(); it.Next(); {
			keys = append(keys, it.Key().String())
		}
		for it := b.MapRange(); it.Next(); {
			if !a.MapIndex(it.Key()).IsValid() {
				keys = append(keys, it.Key().String())
			}
		}
		slices.Sort(keys)
		kt := a.Type().Key()
		for _, k := range keys {
			if d.found {
				return
			}
			if d.ignored(k) {
				continue
			}
			kv := reflect.ValueOf(k).Convert(kt)
			va, vb := a.MapIndex(kv), b.MapIndex(kv)
			if !va.IsValid() || !vb.IsValid() {
				d.emit(k)
				continue
			}
			d.typed(k, va, vb)
		}
	default: // slice, array
		for i := range max(a.Len(), b.Len()) {
			if d.found {
				return
			}
			seg := strconv.Itoa(i)
			if i >= a.Len() || i >= b.Len() {
				d.emit(seg)
				continue
			}
			d.typed(seg, a.Index(i), b.Index(i))
		}
	}
}

func scalarEqual(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	}
	return jsonEqual(convertedValue(a), convertedValue(b))
}

// customValue is the JSON value the converter makes of v, a type with its own conversion.
func customValue(v reflect.Value) any {
	out, err := value.TypeReflectEntryOf(v.Type()).ToUnstructured(v)
	if err != nil {
		return nil
	}
	return out
}

// convertedValue is v's JSON value as the converter makes it (for what the walk does not follow).
func convertedValue(v reflect.Value) any {
	box := reflect.New(reflect.TypeFor[struct {
		V any `json:"v"`
	}]())
	box.Elem().Field(0).Set(v)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(box.Interface())
	if err != nil {
		return nil
	}
	return m["v"]
}
