// Command protogen writes the protobuf message table the simulator (controllers/sim/protobuf.py)
// decodes Kubernetes protobuf request bodies with.
//
//	cd go && go run ./tools/protogen > ../controllers/sim/protobuf_schema.json
//
// It walks, by reflection, the Go type of every kind registered for the served group versions in
// client-go's scheme (k8s.io/client-go/kubernetes/scheme) and the apiextensions clientset's scheme,
// and reads each struct field's `protobuf:"..."` tag (wire type, field number, repeated, castkey and
// casttype leave the wire alone) and its `json:"..."` tag (name, omitempty, omitzero, inline). What
// it writes is, per message, its fields in Go declaration order (the order encoding/json writes
// them in) with their number, JSON name, type and how encoding/json treats them, so the decoder can
// turn wire bytes into the JSON the API server would have stored.
//
// Types whose JSON is not their fields (metav1.Time, resource.Quantity, intstr.IntOrString, ...) are
// emitted with a "form" naming the conversion and their wire fields under their proto names; any
// other type with a custom MarshalJSON or protobuf Marshal makes the generator fail, so a new
// k8s.io/api release cannot silently produce a wrong table.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// defaultGroupVersions are the group versions the simulator serves (controllers/sim/resources.py
// BUILTINS), plus autoscaling/v1 for the Scale a /scale PUT carries.
const defaultGroupVersions = "v1,apps/v1,batch/v1,autoscaling/v1,coordination.k8s.io/v1,authorization.k8s.io/v1," +
	"authentication.k8s.io/v1,apiextensions.k8s.io/v1,policy/v1,networking.k8s.io/v1,rbac.authorization.k8s.io/v1"

const (
	metaPkg     = "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcePkg = "k8s.io/apimachinery/pkg/api/resource"
	intstrPkg   = "k8s.io/apimachinery/pkg/util/intstr"
	runtimePkg  = "k8s.io/apimachinery/pkg/runtime"
	apiextPkg   = "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Field is one protobuf field of a message, or (Number 0) a JSON-only field never on the wire.
type Field struct {
	Number    int    `json:"n"`
	JSON      string `json:"json"`
	Type      string `json:"type"`
	Shape     string `json:"shape,omitempty"` // "" one value, "list" repeated, "map" a map with string keys
	Pointer   bool   `json:"pointer,omitempty"`
	OmitEmpty bool   `json:"omitempty,omitempty"`
	OmitZero  bool   `json:"omitzero,omitempty"`
	Inline    bool   `json:"inline,omitempty"`
}

// Message is one Go struct (or a wrapper message go-to-protobuf made for a named slice).
type Message struct {
	Form   string  `json:"form,omitempty"`
	Fields []Field `json:"fields"`
}

// special lists the types whose JSON is not their fields, with the wire fields the decoder needs
// (the proto names; Time and Quantity have no struct tags of their own to read).
var special = map[string]struct {
	form   string
	fields []Field
}{
	metaPkg + ".Time":         {"Time", []Field{{Number: 1, JSON: "seconds", Type: "int64"}, {Number: 2, JSON: "nanos", Type: "int32"}}},
	metaPkg + ".MicroTime":    {"MicroTime", []Field{{Number: 1, JSON: "seconds", Type: "int64"}, {Number: 2, JSON: "nanos", Type: "int32"}}},
	metaPkg + ".Duration":     {"Duration", []Field{{Number: 1, JSON: "duration", Type: "int64"}}},
	metaPkg + ".FieldsV1":     {"RawJSON", []Field{{Number: 1, JSON: "raw", Type: "bytes"}}},
	resourcePkg + ".Quantity": {"Quantity", []Field{{Number: 1, JSON: "string", Type: "string"}}},
	intstrPkg + ".IntOrString": {"IntOrString", []Field{{Number: 1, JSON: "type", Type: "int64"},
		{Number: 2, JSON: "intVal", Type: "int32"}, {Number: 3, JSON: "strVal", Type: "string"}}},
	runtimePkg + ".RawExtension": {"RawJSON", []Field{{Number: 1, JSON: "raw", Type: "bytes"}}},
	apiextPkg + ".JSON":          {"RawJSON", []Field{{Number: 1, JSON: "raw", Type: "bytes"}}},
	// These three are read off their struct tags (below); only the form is fixed here.
	apiextPkg + ".JSONSchemaPropsOrArray":       {"SchemaOrArray", nil},
	apiextPkg + ".JSONSchemaPropsOrBool":        {"SchemaOrBool", nil},
	apiextPkg + ".JSONSchemaPropsOrStringArray": {"SchemaOrStringArray", nil},
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	protoMarshal  = reflect.TypeFor[interface{ Marshal() ([]byte, error) }]()
)

type generator struct {
	messages map[string]*Message
}

// protoName is the protobuf full name of a Go type: its package path with dots, then its name
// (k8s.io/api/core/v1.Pod is k8s.io.api.core.v1.Pod, as in the generated.proto files).
func protoName(t reflect.Type) string {
	return strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
}

func typeKey(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

type protoTag struct {
	wire   string
	number int
	rep    bool
	name   string
}

func parseProtoTag(tag string) (protoTag, bool) {
	if tag == "" || tag == "-" {
		return protoTag{}, false
	}
	parts := strings.Split(tag, ",")
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		panic(fmt.Sprintf("protobuf tag %q: bad field number", tag))
	}
	p := protoTag{wire: parts[0], number: n}
	for _, opt := range parts[2:] {
		switch {
		case opt == "rep":
			p.rep = true
		case strings.HasPrefix(opt, "name="):
			p.name = opt[len("name="):]
		}
	}
	return p, true
}

// scalar is the decoder's name for a Go scalar kind and the protobuf wire type it must have.
func scalar(t reflect.Type) (name, wire string, ok bool) {
	switch t.Kind() {
	case reflect.String:
		return "string", "bytes", true
	case reflect.Bool:
		return "bool", "varint", true
	case reflect.Int32:
		return "int32", "varint", true
	case reflect.Int64, reflect.Int:
		return "int64", "varint", true
	case reflect.Uint32:
		return "uint32", "varint", true
	case reflect.Uint64:
		return "uint64", "varint", true
	case reflect.Float64:
		return "float64", "fixed64", true
	case reflect.Float32:
		return "float32", "fixed32", true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes", "bytes", true
		}
	}
	return "", "", false
}

// valueType is the decoder type of a Go type used as a field, list element or map value.
func (g *generator) valueType(t reflect.Type, where string) string {
	if name, _, ok := scalar(t); ok {
		return name
	}
	if t.Kind() == reflect.Struct {
		return g.message(t)
	}
	panic(fmt.Sprintf("%s: unsupported Go type %s", where, t))
}

// wrapper is the message go-to-protobuf generates for a named slice used as a map value
// (authentication's ExtraValue): one repeated field "items", and JSON that is the slice itself.
func (g *generator) wrapper(t reflect.Type, where string) string {
	name := protoName(t)
	if _, done := g.messages[name]; !done {
		g.messages[name] = &Message{Form: "Items"}
		g.messages[name].Fields = []Field{{Number: 1, JSON: "items", Type: g.valueType(t.Elem(), where), Shape: "list"}}
	}
	return name
}

// message registers the struct t (and everything it refers to) and returns its name.
func (g *generator) message(t reflect.Type) string {
	name := protoName(t)
	if _, done := g.messages[name]; done {
		return name
	}
	msg := &Message{}
	g.messages[name] = msg // before the fields: types refer to themselves (JSONSchemaProps)
	sp, isSpecial := special[typeKey(t)]
	if isSpecial {
		msg.Form = sp.form
	} else if reflect.PointerTo(t).Implements(jsonMarshaler) {
		panic(fmt.Sprintf("%s has a custom MarshalJSON the decoder does not know; add it to special", typeKey(t)))
	}
	if isSpecial && sp.fields != nil {
		msg.Fields = sp.fields
		g.checkSpecialTags(t, sp.fields)
		return name
	}
	if !isSpecial && t.NumField() > 0 && reflect.PointerTo(t).Implements(protoMarshal) && !hasProtoTags(t) {
		panic(fmt.Sprintf("%s marshals protobuf by hand and has no tags to read; add it to special", typeKey(t)))
	}
	seen := map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		f, ok := g.field(t, sf, isSpecial)
		if !ok {
			continue
		}
		if !f.Inline && f.JSON != "-" {
			if other, dup := seen[f.JSON]; dup {
				panic(fmt.Sprintf("%s: JSON name %q used by %s and %s", typeKey(t), f.JSON, other, sf.Name))
			}
			seen[f.JSON] = sf.Name
		}
		msg.Fields = append(msg.Fields, f)
	}
	return name
}

func hasProtoTags(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if _, ok := parseProtoTag(t.Field(i).Tag.Get("protobuf")); ok {
			return true
		}
	}
	return false
}

// checkSpecialTags fails when a hand-listed special type's struct tags disagree with the list.
func (g *generator) checkSpecialTags(t reflect.Type, fields []Field) {
	for i := 0; i < t.NumField(); i++ {
		p, ok := parseProtoTag(t.Field(i).Tag.Get("protobuf"))
		if !ok {
			continue
		}
		found := false
		for _, f := range fields {
			if f.Number == p.number && strings.EqualFold(f.JSON, p.name) {
				found = true
			}
		}
		if !found {
			panic(fmt.Sprintf("%s: protobuf field %d %q is not in the special table", typeKey(t), p.number, p.name))
		}
	}
}

func (g *generator) field(parent reflect.Type, sf reflect.StructField, protoNames bool) (Field, bool) {
	where := typeKey(parent) + "." + sf.Name
	jsonTag, hasJSON := sf.Tag.Lookup("json")
	jsonName, opts, _ := strings.Cut(jsonTag, ",")
	opts = "," + opts + ","
	f := Field{
		JSON:      jsonName,
		OmitEmpty: strings.Contains(opts, ",omitempty,"),
		OmitZero:  strings.Contains(opts, ",omitzero,"),
	}
	p, onWire := parseProtoTag(sf.Tag.Get("protobuf"))
	if onWire {
		f.Number = p.number
	}
	if protoNames {
		if !onWire {
			return f, false
		}
		f.JSON, f.OmitEmpty, f.OmitZero = p.name, false, false
	} else if jsonName == "-" && !strings.HasPrefix(jsonTag, "-,") {
		if !onWire {
			return f, false
		}
	} else if jsonName == "" {
		// encoding/json inlines an embedded struct without a JSON name; any other field without
		// one is keyed by its Go name (json:",inline" on a named field does not inline).
		if sf.Anonymous {
			f.Inline = true
		} else {
			f.JSON = sf.Name
		}
	}
	if !hasJSON && !sf.Anonymous && !protoNames {
		f.JSON = sf.Name
	}
	if f.Inline && !onWire {
		// An embedded struct with no protobuf field (metav1.TypeMeta): the envelope carries it, and its
		// fields are omitempty; anything else would be a JSON field the wire cannot fill.
		if typeKey(sf.Type) != metaPkg+".TypeMeta" {
			panic(fmt.Sprintf("%s: embedded %s has no protobuf tag", where, sf.Type))
		}
		return f, false
	}
	t := sf.Type
	if t.Kind() == reflect.Pointer {
		f.Pointer, t = true, t.Elem()
	}
	if f.Inline && (f.Pointer || t.Kind() != reflect.Struct) {
		panic(fmt.Sprintf("%s: embedded %s is not a struct held by value", where, sf.Type))
	}
	// The wire type follows from the Go type, as in the generated Marshal code; a tag that says
	// otherwise is a known upstream wart (SecretVolumeSource.defaultMode is tagged "bytes" but
	// marshals as a varint), reported on stderr and otherwise ignored.
	wireOK := func(want string) {
		if onWire && p.wire != want {
			note("%s: tag says wire type %s, the Go type %s marshals as %s\n",
				where, p.wire, sf.Type, want)
		}
	}
	switch name, wire, ok := scalar(t); {
	case ok:
		f.Type = name
		wireOK(wire)
		if onWire && p.rep {
			note("%s: a single value tagged rep, marshalled as one all the same\n", where)
		}
	case t.Kind() == reflect.Struct:
		f.Type = g.message(t)
		wireOK("bytes")
	case t.Kind() == reflect.Slice:
		if f.Pointer {
			panic(fmt.Sprintf("%s: pointer to a slice", where))
		}
		elem := t.Elem()
		if elem.Kind() == reflect.Pointer {
			panic(fmt.Sprintf("%s: slice of pointers", where))
		}
		f.Shape = "list"
		f.Type = g.valueType(elem, where)
		if elemName, wire, ok := scalar(elem); ok {
			wireOK(wire)
			_ = elemName
		} else {
			wireOK("bytes")
		}
		if onWire && !p.rep {
			note("%s: a slice tagged opt, marshalled as repeated all the same\n", where)
		}
	case t.Kind() == reflect.Map:
		if f.Pointer {
			panic(fmt.Sprintf("%s: pointer to a map", where))
		}
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("%s: map key %s is not a string", where, t.Key()))
		}
		wireOK("bytes")
		// A map is a repeated entry message {key = 1, value = 2}. Older k8s.io/api releases spell the
		// entry out in protobuf_key/protobuf_val tags; where they are present they must agree.
		if key := sf.Tag.Get("protobuf_key"); key != "" && !strings.HasPrefix(key, "bytes,1,") {
			panic(fmt.Sprintf("%s: protobuf_key %q is not a string key 1", where, key))
		}
		f.Shape = "map"
		val := t.Elem()
		if _, _, isScalar := scalar(val); !isScalar && val.Kind() == reflect.Slice && val.Name() != "" {
			f.Type = g.wrapper(val, where)
		} else {
			if val.Kind() == reflect.Pointer {
				panic(fmt.Sprintf("%s: map of pointers", where))
			}
			f.Type = g.valueType(val, where)
			_, wire, ok := scalar(val)
			if !ok {
				wire = "bytes"
			}
			if pv := sf.Tag.Get("protobuf_val"); pv != "" && !strings.HasPrefix(pv, wire+",2,") {
				panic(fmt.Sprintf("%s: protobuf_val %q does not match %s", where, sf.Tag.Get("protobuf_val"), val))
			}
		}
	default:
		panic(fmt.Sprintf("%s: unsupported Go type %s", where, sf.Type))
	}
	if f.OmitZero && !(f.Type == metaPkgName("Time") || f.Type == metaPkgName("MicroTime") || f.Pointer) {
		panic(fmt.Sprintf("%s: omitzero on %s is not handled by the decoder", where, sf.Type))
	}
	return f, true
}

var verbose = flag.Bool("v", false, "report struct tags that disagree with how the generated code marshals")

func note(format string, args ...any) {
	if *verbose {
		fmt.Fprintf(os.Stderr, "protogen: "+format, args...)
	}
}

func metaPkgName(name string) string { return strings.ReplaceAll(metaPkg, "/", ".") + "." + name }

func apiVersion(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return gv.Version
	}
	return gv.Group + "/" + gv.Version
}

func moduleVersions() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var out []string
	for _, dep := range info.Deps {
		switch dep.Path {
		case "k8s.io/api", "k8s.io/apimachinery", "k8s.io/apiextensions-apiserver", "k8s.io/client-go":
			out = append(out, dep.Path+" "+dep.Version)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func generate(groupVersions []string) (map[string]string, map[string]*Message) {
	want := map[string]bool{}
	for _, gv := range groupVersions {
		want[strings.TrimSpace(gv)] = true
	}
	g := &generator{messages: map[string]*Message{}}
	kinds := map[string]string{}
	for _, scheme := range []*runtime.Scheme{clientgoscheme.Scheme, apiextensionsscheme.Scheme} {
		for gvk, t := range scheme.AllKnownTypes() {
			if !want[apiVersion(gvk.GroupVersion())] || strings.HasSuffix(gvk.Kind, "List") {
				continue
			}
			// The meta/v1 option and status kinds every group version registers: only DeleteOptions
			// is ever a request body (it is keyed without an apiVersion, see below).
			if t.PkgPath() == metaPkg {
				if gvk.Kind == "DeleteOptions" {
					kinds["DeleteOptions"] = g.message(t)
				}
				continue
			}
			kinds[apiVersion(gvk.GroupVersion())+"/"+gvk.Kind] = g.message(t)
		}
	}
	for _, gv := range groupVersions {
		found := false
		for k := range kinds {
			if strings.HasPrefix(k, strings.TrimSpace(gv)+"/") {
				found = true
			}
		}
		if !found {
			panic(fmt.Sprintf("group version %q has no kinds in the schemes", gv))
		}
	}
	return kinds, g.messages
}

// write prints the table with one field per line, so a regeneration's diff reads field by field.
func write(w io.Writer, gvs []string, kinds map[string]string, messages map[string]*Message) error {
	var b strings.Builder
	enc := func(v any) string {
		var out strings.Builder
		e := json.NewEncoder(&out)
		e.SetEscapeHTML(false)
		if err := e.Encode(v); err != nil {
			panic(err)
		}
		return strings.TrimSuffix(out.String(), "\n")
	}
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"generated\": %s,\n", enc("by go/tools/protogen from "+moduleVersions()+
		"; do not edit: cd go && go run ./tools/protogen > ../controllers/sim/protobuf_schema.json"))
	fmt.Fprintf(&b, "  \"groupVersions\": %s,\n", enc(gvs))
	b.WriteString("  \"kinds\": {\n")
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		fmt.Fprintf(&b, "    %s: %s%s\n", enc(k), enc(kinds[k]), comma(i, len(names)))
	}
	b.WriteString("  },\n  \"messages\": {\n")
	names = names[:0]
	for k := range messages {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, name := range names {
		msg := messages[name]
		fmt.Fprintf(&b, "    %s: {", enc(name))
		if msg.Form != "" {
			fmt.Fprintf(&b, "\"form\": %s, ", enc(msg.Form))
		}
		b.WriteString("\"fields\": [")
		for j, f := range msg.Fields {
			fmt.Fprintf(&b, "\n      %s%s", enc(f), comma(j, len(msg.Fields)))
		}
		if len(msg.Fields) > 0 {
			b.WriteString("\n    ")
		}
		fmt.Fprintf(&b, "]}%s\n", comma(i, len(names)))
	}
	b.WriteString("  }\n}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func comma(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}

func main() {
	gvFlag := flag.String("group-versions", defaultGroupVersions, "comma-separated group versions to emit every kind of")
	flag.Parse()
	gvs := strings.Split(*gvFlag, ",")
	kinds, messages := generate(gvs)
	if err := write(os.Stdout, gvs, kinds, messages); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
