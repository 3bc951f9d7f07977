package clientgo

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The scanner agrees with a full decode on what API servers send (typed objects in struct order,
// custom resources in sorted key order) and on JSON built to mislead it: a resourceVersion key
// outside metadata, inside strings, after values of every shape.
func TestMetadataResourceVersionAgreesWithADecode(t *testing.T) {
	typed, _ := json.Marshal(&appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "4711",
			Annotations:   map[string]string{"note": `{"resourceVersion":"1"}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: "Update"}}}})
	custom, _ := json.Marshal((&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget", "aaa": map[string]any{"resourceVersion": "9"},
		"metadata": map[string]any{"name": "w", "managedFields": []any{map[string]any{"x": "}"}}, "resourceVersion": "88"},
		"spec":     map[string]any{"ref": map[string]any{"resourceVersion": "7"}}}}).Object)
	cases := []struct {
		body string
		rv   string
		ok   bool
	}{
		{string(typed), "4711", true},
		{string(custom), "88", true},
		{` { "metadata" : { "resourceVersion" : "12" } } `, "12", true},
		{`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}`, "", false},
		{`{"a":[1,{"b":"]"},null,true,-1.5e3],"s":"\"metadata\":{\"resourceVersion\":\"3\"}","metadata":{"x":{"resourceVersion":"5"},"resourceVersion":"6"}}`, "6", true},
		{`{"metadata":{"resourceVersion":"\u0031\u0032"}}`, "12", true},
		{`{"metadata":{"resourceVersion":12}}`, "", false},
		{`[{"metadata":{"resourceVersion":"1"}}]`, "", false},
		{`{"metadata":{"resourceVersion":"1`, "", false},
		{`not json`, "", false},
		{``, "", false},
	}
	for _, c := range cases {
		rv, ok := MetadataResourceVersion([]byte(c.body))
		if rv != c.rv || ok != c.ok {
			t.Errorf("%.60s: got %q %v, want %q %v", c.body, rv, ok, c.rv, c.ok)
		}
		var full struct {
			Metadata struct {
				ResourceVersion *string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if c.ok && (json.Unmarshal([]byte(c.body), &full) != nil || *full.Metadata.ResourceVersion != c.rv) {
			t.Errorf("%.60s: the case disagrees with encoding/json", c.body)
		}
	}
}

// A scan of a large object stops at metadata.resourceVersion: its cost does not grow with the rest.
func BenchmarkMetadataResourceVersion(b *testing.B) {
	d := appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "4711", UID: "5f1c7c2e-8a4b-4d59-9d1e-3b0d6f7a2c11",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"big": strings.Repeat("x", 8000)}}}
	body, _ := json.Marshal(&d)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if rv, ok := MetadataResourceVersion(body); !ok || rv != "4711" {
			b.Fatal(rv)
		}
	}
}
