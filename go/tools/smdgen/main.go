// Command smdgen writes the field-tracking schema the simulator (controllers/sim/managedfields.py)
// computes managedFields with:
//
//	cd go && go run ./tools/smdgen > ../controllers/sim/smd_schema.json
//
// kube-apiserver tracks field ownership with structured-merge-diff, typed by a schema that says,
// for every type, which lists are sets or maps keyed by which fields (containers by name, a
// Service's ports by port and protocol) and which structs and maps are atomic (a LabelSelector,
// an ObjectReference, a Service's selector). client-go's and apiextensions-apiserver's apply
// configurations carry that schema, generated from the same OpenAPI definitions the API server
// uses, as a YAML string in a package of their own (applyconfigurations/internal). The package is
// internal, so this reads the string from the module's source, parses it with
// structured-merge-diff's own parser and writes the types reachable from the kinds of the group
// versions the simulator serves (the same list as go/tools/protogen) as compact JSON.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

const defaultGroupVersions = "v1,apps/v1,batch/v1,autoscaling/v1,coordination.k8s.io/v1,authorization.k8s.io/v1," +
	"authentication.k8s.io/v1,apiextensions.k8s.io/v1,policy/v1,networking.k8s.io/v1,rbac.authorization.k8s.io/v1"

// sources are the modules whose applyconfigurations/internal package holds a schema, and where.
var sources = []struct{ module, file string }{
	{"k8s.io/client-go", "applyconfigurations/internal/internal.go"},
	{"k8s.io/apiextensions-apiserver", "pkg/client/applyconfiguration/internal/internal.go"},
}

// Ref is a structured-merge-diff TypeRef: a named type, or an inlined scalar, list or map.
type Ref struct {
	Named  string `json:"named,omitempty"`
	Scalar string `json:"scalar,omitempty"`
	List   *List  `json:"list,omitempty"`
	Map    *Map   `json:"map,omitempty"`
	// An element relationship that overrides the named type's own.
	Rel string `json:"rel,omitempty"`
}

// List is a list: its element type, "atomic" or "associative" (a set of scalars, or a map keyed by
// Keys), and the key fields.
type List struct {
	Elem Ref      `json:"elem"`
	Rel  string   `json:"rel,omitempty"`
	Keys []string `json:"keys,omitempty"`
}

// Map is a struct (Fields) or a map (Elem for the values), "atomic", "separable" or granular ("").
type Map struct {
	Fields   map[string]Ref `json:"fields,omitempty"`
	Defaults map[string]any `json:"defaults,omitempty"`
	Elem     *Ref           `json:"elem,omitempty"`
	Rel      string         `json:"rel,omitempty"`
}

// Type is a named type: any of the three atoms (the untyped "deduced" type has all of them).
type Type struct {
	Scalar string `json:"scalar,omitempty"`
	List   *List  `json:"list,omitempty"`
	Map    *Map   `json:"map,omitempty"`
}

func convertList(l *smdschema.List) *List {
	return &List{Elem: convertRef(l.ElementType), Rel: string(l.ElementRelationship), Keys: l.Keys}
}

func convertMap(m *smdschema.Map) *Map {
	out := &Map{Rel: string(m.ElementRelationship)}
	if len(m.Fields) > 0 {
		out.Fields = map[string]Ref{}
		for _, f := range m.Fields {
			out.Fields[f.Name] = convertRef(f.Type)
			// Defaults matter for list keys an item leaves out (a port's protocol): scalars only.
			switch f.Default.(type) {
			case string, bool, int, int64, float64:
			default:
				continue
			}
			{
				if out.Defaults == nil {
					out.Defaults = map[string]any{}
				}
				out.Defaults[f.Name] = f.Default
			}
		}
	}
	if m.ElementType.NamedType != nil || m.ElementType.Inlined != (smdschema.Atom{}) {
		elem := convertRef(m.ElementType)
		out.Elem = &elem
	}
	return out
}

func convertRef(r smdschema.TypeRef) Ref {
	var out Ref
	if r.NamedType != nil {
		out.Named = *r.NamedType
	}
	if r.Inlined.Scalar != nil {
		out.Scalar = string(*r.Inlined.Scalar)
	}
	if r.Inlined.List != nil {
		out.List = convertList(r.Inlined.List)
	}
	if r.Inlined.Map != nil {
		out.Map = convertMap(r.Inlined.Map)
	}
	if r.ElementRelationship != nil {
		out.Rel = string(*r.ElementRelationship)
	}
	return out
}

func convertType(a smdschema.Atom) Type {
	var out Type
	if a.Scalar != nil {
		out.Scalar = string(*a.Scalar)
	}
	if a.List != nil {
		out.List = convertList(a.List)
	}
	if a.Map != nil {
		out.Map = convertMap(a.Map)
	}
	return out
}

// moduleDir is where the Go module cache holds the version of module this program was built with.
func moduleDir(module string) (string, string) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		panic("no build info")
	}
	version := ""
	for _, dep := range info.Deps {
		if dep.Path == module {
			version = dep.Version
			if dep.Replace != nil {
				version = dep.Replace.Version
			}
		}
	}
	if version == "" {
		panic(module + " is not a dependency")
	}
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		panic(fmt.Sprintf("go env GOMODCACHE: %v", err))
	}
	return filepath.Join(strings.TrimSpace(string(cache)), module+"@"+version), version
}

// schemaYAML is the string literal the generated Parser() parses: var schemaYAML = typed.YAMLObject(`...`).
func schemaYAML(path string) string {
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		panic(err)
	}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gen.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "schemaYAML" {
				continue
			}
			call, ok := vs.Values[0].(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				panic(path + ": schemaYAML is not typed.YAMLObject(`...`)")
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				panic(path + ": schemaYAML's argument is not a literal")
			}
			text, err := strconv.Unquote(lit.Value)
			if err != nil {
				panic(err)
			}
			return text
		}
	}
	panic(path + ": no schemaYAML")
}

func apiVersion(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return gv.Version
	}
	return gv.Group + "/" + gv.Version
}

func main() {
	gvFlag := flag.String("group-versions", defaultGroupVersions, "comma-separated group versions to emit every kind of")
	flag.Parse()
	want := map[string]bool{}
	for _, gv := range strings.Split(*gvFlag, ",") {
		want[strings.TrimSpace(gv)] = true
	}
	all := map[string]smdschema.TypeDef{}
	var versions []string
	for _, src := range sources {
		dir, version := moduleDir(src.module)
		versions = append(versions, src.module+" "+version)
		p, err := typed.NewParser(typed.YAMLObject(schemaYAML(filepath.Join(dir, src.file))))
		if err != nil {
			panic(err)
		}
		for _, t := range p.Schema.Types {
			all[t.Name] = t
		}
	}
	kinds := map[string]string{}
	for _, scheme := range []*runtime.Scheme{clientgoscheme.Scheme, apiextensionsscheme.Scheme} {
		for gvk, t := range scheme.AllKnownTypes() {
			if !want[apiVersion(gvk.GroupVersion())] || strings.HasSuffix(gvk.Kind, "List") ||
				t.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1" {
				continue
			}
			// The OpenAPI name: k8s.io/api/core/v1.Pod is io.k8s.api.core.v1.Pod.
			name := "io." + strings.ReplaceAll(strings.TrimPrefix(t.PkgPath(), "k8s.io/"), "/", ".") + "." + t.Name()
			name = strings.Replace(name, "io.", "io.k8s.", 1)
			if _, ok := all[name]; ok {
				kinds[apiVersion(gvk.GroupVersion())+"/"+gvk.Kind] = name
			}
		}
	}
	types := map[string]Type{}
	var visit func(Ref)
	var visitType func(string)
	visitList := func(l *List) {
		if l != nil {
			visit(l.Elem)
		}
	}
	visitMap := func(m *Map) {
		if m == nil {
			return
		}
		for _, f := range m.Fields {
			visit(f)
		}
		if m.Elem != nil {
			visit(*m.Elem)
		}
	}
	visit = func(r Ref) {
		if r.Named != "" {
			visitType(r.Named)
		}
		visitList(r.List)
		visitMap(r.Map)
	}
	visitType = func(name string) {
		if _, done := types[name]; done {
			return
		}
		def, ok := all[name]
		if !ok {
			panic("no type " + name)
		}
		t := convertType(def.Atom)
		types[name] = t
		visitList(t.List)
		visitMap(t.Map)
	}
	names := make([]string, 0, len(kinds))
	for _, name := range kinds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		visitType(name)
	}
	sort.Strings(versions)
	doc := map[string]any{
		"generated": "by go/tools/smdgen from the applyconfigurations schemas of " + strings.Join(versions, ", ") +
			"; do not edit: cd go && go run ./tools/smdgen > ../controllers/sim/smd_schema.json",
		"kinds": kinds,
		"types": types,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(doc); err != nil {
		panic(err)
	}
}
