package ctrlscope

import (
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func u(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

// The rules of protocol v1.7's diff paths, one case each.
func TestDiffPaths(t *testing.T) {
	deep := func(leaf any) map[string]any {
		return map[string]any{"spec": map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{
			"d": map[string]any{"e": map[string]any{"f": leaf}}}}}}}
	}
	many := func(n int, v string) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("k%02d", i)] = v
		}
		return map[string]any{"data": m}
	}
	cases := []struct {
		name     string
		old, new map[string]any
		paths    []string
		more     int
	}{
		{"only the resourceVersion", map[string]any{"metadata": map[string]any{"resourceVersion": "1", "name": "x"}},
			map[string]any{"metadata": map[string]any{"resourceVersion": "2", "name": "x"}}, nil, 0},
		{"sorted keys, depth first",
			map[string]any{"status": map[string]any{"b": int64(1), "a": map[string]any{"y": "1", "x": "1"}}, "spec": map[string]any{"r": int64(1)}},
			map[string]any{"status": map[string]any{"b": int64(2), "a": map[string]any{"y": "2", "x": "2"}}, "spec": map[string]any{"r": int64(3)}},
			[]string{"spec.r", "status.a.x", "status.a.y", "status.b"}, 0},
		{"added and removed keys", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "1"}}},
			map[string]any{"metadata": map[string]any{"labels": map[string]any{"b": "1"}, "annotations": map[string]any{"n": "1"}}},
			[]string{"metadata.annotations", "metadata.labels.a", "metadata.labels.b"}, 0},
		{"list indexes", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "a"}}}},
			map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "b"}, map[string]any{"image": "c"}}}},
			[]string{"spec.containers.0.image", "spec.containers.1"}, 0},
		{"managedFields is one value", map[string]any{"metadata": map[string]any{"managedFields": []any{map[string]any{"manager": "a", "time": "1"}}}},
			map[string]any{"metadata": map[string]any{"managedFields": []any{map[string]any{"manager": "a", "time": "2"}}}},
			[]string{"metadata.managedFields"}, 0},
		{"the path stops at six segments", deep("1"), deep("2"), []string{"spec.a.b.c.d.e"}, 0},
		{"a type change is the path", map[string]any{"spec": map[string]any{"x": map[string]any{"a": "1"}}},
			map[string]any{"spec": map[string]any{"x": []any{"1"}}}, []string{"spec.x"}, 0},
		{"numbers by value", map[string]any{"spec": map[string]any{"n": int64(2), "m": []any{int64(1)}}},
			map[string]any{"spec": map[string]any{"n": float64(2), "m": []any{float64(1)}}}, nil, 0},
		{"null is a value", map[string]any{"spec": map[string]any{"n": nil}}, map[string]any{"spec": map[string]any{}},
			[]string{"spec.n"}, 0},
		{"at most sixteen", many(20, "a"), many(20, "b"),
			[]string{"data.k00", "data.k01", "data.k02", "data.k03", "data.k04", "data.k05", "data.k06", "data.k07",
				"data.k08", "data.k09", "data.k10", "data.k11", "data.k12", "data.k13", "data.k14", "data.k15"}, 4},
	}
	for _, c := range cases {
		paths, more := Diff(u(c.old), u(c.new))
		if !reflect.DeepEqual(paths, c.paths) || more != c.more {
			t.Errorf("%s: got %q +%d, want %q +%d", c.name, paths, more, c.paths, c.more)
		}
	}
}

// A typed object is compared as its JSON: field names from the json tags, empty fields omitted.
func TestDiffTypedObjects(t *testing.T) {
	old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "1", Generation: 1},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1}}
	new := old.DeepCopy()
	new.ResourceVersion = "2"
	new.Status.ReadyReplicas = 2
	new.Status.Conditions = []appsv1.DeploymentCondition{{Type: "Available", Status: corev1.ConditionTrue}}
	paths, more := Diff(old, new)
	if want := []string{"status.conditions", "status.readyReplicas"}; !reflect.DeepEqual(paths, want) || more != 0 {
		t.Errorf("got %q +%d, want %q", paths, more, want)
	}
	if paths, _ := Diff(nil, new); paths != nil {
		t.Errorf("no old object: got %q", paths)
	}
}
