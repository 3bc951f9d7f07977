package clientgo

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
)

// TestTransportWrites: requests made with a Reconcile's context are that controller's writes;
// reads and requests made elsewhere are not published. A write's record says the resourceVersion
// the server answered with (v1.7), and client-go still decodes the whole answer. The cluster is
// described without its credentials.
func TestTransportWrites(t *testing.T) {
	f := newTelFixture(t, clock.RealClock{})
	srv := newAPIServer(t, true)
	cs, err := kubernetes.NewForConfig(WrapConfig(f.Tel, srv.config()))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if _, err := cs.AppsV1().Deployments("default").Create(bg, deployment("", "outside", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := f.Tel.ReconcileStart(bg, "web", "default/x", 0)
	created, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("", "x", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Name != "x" || created.ResourceVersion == "" || created.Spec.Replicas == nil || *created.Spec.Replicas != 1 {
		t.Fatalf("client-go decoded %+v", created)
	}
	if _, err := cs.AppsV1().Deployments("default").Get(ctx, "x", metav1.GetOptions{}); err == nil {
		t.Fatal("the test server answers GETs of one object?")
	}
	recs, _ := f.topic(t, "w/w/controller/web")
	var writes []map[string]any
	for _, r := range recs {
		if r["k"] == "write" {
			writes = append(writes, r)
		}
	}
	if len(writes) != 1 || writes[0]["method"] != "POST" || writes[0]["path"] != "/apis/apps/v1/namespaces/default/deployments" ||
		writes[0]["code"] != 201.0 || writes[0]["rv"] != created.ResourceVersion {
		t.Fatalf("writes %v (created at rv %s)", writes, created.ResourceVersion)
	}
	if d, ok := writes[0]["duration"].(float64); !ok || d <= 0 {
		t.Fatalf("write duration %v", writes[0]["duration"])
	}
	_, comps := f.topic(t, "w/w/components")
	host := strings.TrimPrefix(srv.URL, "http://")
	cluster, ok := comps["cluster/"+host].(map[string]any)
	if !ok || cluster["server"] != srv.URL {
		t.Fatalf("cluster component %v", comps)
	}
	for k, v := range comps {
		if s, _ := v.(map[string]any)["server"].(string); strings.Contains(s, "secret") || strings.Contains(k, "secret") {
			t.Fatalf("credentials published: %v", v)
		}
	}
}

// TestTransportUnobservedRequests: LISTs and WATCHes of resources no informer observes pass
// through untouched (no list records anywhere).
func TestTransportUnobservedRequests(t *testing.T) {
	f := newTelFixture(t, clock.RealClock{})
	srv := newAPIServer(t, true)
	srv.apply("default/a", deployment("default", "a", 1), false)
	cs, _ := kubernetes.NewForConfig(WrapConfig(f.Tel, srv.config()))
	list, err := cs.AppsV1().Deployments("").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatal(list, err)
	}
	recs, _ := f.topic(t, deployTopic)
	if len(recs) != 0 {
		t.Fatalf("records for an unobserved resource: %v", recs)
	}
}

func TestCollectionPaths(t *testing.T) {
	deploy := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for path, want := range map[string]struct {
		gvr schema.GroupVersionResource
		ns  string
		ok  bool
	}{
		"/apis/apps/v1/deployments":                     {deploy, "", true},
		"/apis/apps/v1/namespaces/prod/deployments":     {deploy, "prod", true},
		"/api/v1/pods":                                  {pods, "", true},
		"/api/v1/namespaces/kube-system/pods":           {pods, "kube-system", true},
		"/k8s/clusters/c-1/api/v1/pods":                 {pods, "", true},
		"/api/v1/namespaces":                            {schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", true},
		"/api/v1/namespaces/default":                    {ok: false},
		"/apis/apps/v1/namespaces/prod/deployments/web": {ok: false},
		"/version": {ok: false},
	} {
		gvr, ns, ok := collection(path)
		if ok != want.ok || ok && (gvr != want.gvr || ns != want.ns) {
			t.Errorf("%s: %v %q %v, want %v %q %v", path, gvr, ns, ok, want.gvr, want.ns, want.ok)
		}
	}
}

// TestDecodeListHead: JSON by its metadata and a count of items; protobuf through the scheme.
func TestDecodeListHead(t *testing.T) {
	list := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{Kind: "DeploymentList", APIVersion: "apps/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"},
		Items:    []appsv1.Deployment{*deployment("a", "a", 1), *deployment("a", "b", 1), *deployment("a", "c", 1)}}
	js, err := runtime.Encode(scheme.Codecs.LegacyCodec(appsv1.SchemeGroupVersion), list)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := runtime.Encode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), list)
	if err != nil {
		t.Fatal(err)
	}
	for ct, body := range map[string][]byte{"application/json": js, "application/vnd.kubernetes.protobuf": pb} {
		rv, items, more, err := decodeListHead(ct, body)
		if got := []any{rv, items, more, err}; !reflect.DeepEqual(got, []any{"42", 3, true, nil}) {
			t.Errorf("%s: %v", ct, got)
		}
	}
}
