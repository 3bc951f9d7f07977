// Command differential is one client-go conversation with an API server, for ctrlscope's
// differential test (tests/differential): the same program runs against the simulated cluster and a
// real kube-apiserver, and every step prints one JSON line ({"step": ..., "ok": ...} or
// {"step": ..., "error": {"code", "reason", "causes"}}) that the test compares between the two.
//
// It covers what controllers built on client-go do: typed CRUD with optimistic concurrency, the three
// patch types, server-side apply with apply configurations (conflict and force), paging with the
// pager, preconditions, the scale subresource, discovery, the dynamic client on a custom resource,
// a raw watch and a shared informer's handler calls.
//
//	differential --kubeconfig PATH --namespace NS [--crd-group diff.ctrlscope.dev]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/pager"
)

type out struct{ enc *json.Encoder }

func (o out) ok(step string, v any) { _ = o.enc.Encode(map[string]any{"step": step, "ok": v}) }

func (o out) result(step string, v any, err error) {
	if err == nil {
		o.ok(step, v)
		return
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		_ = o.enc.Encode(map[string]any{"step": step, "error": map[string]any{"client": err.Error()}})
		return
	}
	s := status.Status()
	var causes []string
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			causes = append(causes, string(c.Type)+" "+c.Field)
		}
	}
	_ = o.enc.Encode(map[string]any{"step": step, "error": map[string]any{
		"code": s.Code, "reason": s.Reason, "causes": causes}})
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the server to talk to")
	ns := flag.String("namespace", "", "namespace to work in (exists)")
	group := flag.String("crd-group", "diff.ctrlscope.dev", "group of the Widget custom resource")
	flag.Parse()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(2)
	}
	config.QPS, config.Burst = 100, 200
	cs := kubernetes.NewForConfigOrDie(config)
	dyn := dynamic.NewForConfigOrDie(config)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := out{json.NewEncoder(os.Stdout)}
	cms := cs.CoreV1().ConfigMaps(*ns)

	// Typed CRUD and optimistic concurrency.
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	o.result("create", created, err)
	if err != nil {
		os.Exit(1)
	}
	got, err := cms.Get(ctx, "a", metav1.GetOptions{})
	o.result("get", got, err)
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	o.result("create-again", nil, err)
	updated := got.DeepCopy()
	updated.Data["k"] = "w"
	updated, err = cms.Update(ctx, updated, metav1.UpdateOptions{})
	o.result("update", updated, err)
	got.Data["k"] = "stale"
	_, err = cms.Update(ctx, got, metav1.UpdateOptions{})
	o.result("update-stale", nil, err)

	// Patches.
	p, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"m":"1"}}`), metav1.PatchOptions{})
	o.result("patch-merge", p, err)
	p, err = cms.Patch(ctx, "a", types.JSONPatchType, []byte(`[{"op":"replace","path":"/data/m","value":"2"}]`),
		metav1.PatchOptions{})
	o.result("patch-json", p, err)
	p, err = cms.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"data":{"s":"1"}}`), metav1.PatchOptions{})
	o.result("patch-strategic", p, err)
	_, err = cms.Patch(ctx, "nope", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	o.result("patch-missing", nil, err)

	// Server-side apply with apply configurations.
	ac := corev1ac.ConfigMap("b", *ns).WithData(map[string]string{"x": "1"})
	applied, err := cms.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "diff"})
	o.result("apply", applied, err)
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("b", *ns).WithData(map[string]string{"x": "2"}),
		metav1.ApplyOptions{FieldManager: "other"})
	o.result("apply-conflict", nil, err)
	applied, err = cms.Apply(ctx, corev1ac.ConfigMap("b", *ns).WithData(map[string]string{"x": "2"}),
		metav1.ApplyOptions{FieldManager: "other", Force: true})
	o.result("apply-force", applied, err)
	extracted, err := corev1ac.ExtractConfigMap(applied, "diff")
	o.result("apply-extract", extracted, err)

	// Paging with the pager, one object a page.
	for _, name := range []string{"c", "d"} {
		_, _ = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	}
	var names []string
	lp := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cms.List(ctx, opts)
	})
	lp.PageSize = 1
	err = lp.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		names = append(names, obj.(*corev1.ConfigMap).Name)
		return nil
	})
	o.result("pager", names, err)

	// Preconditions and deletes.
	wrongUID := types.UID("00000000-0000-0000-0000-000000000000")
	err = cms.Delete(ctx, "c", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	o.result("delete-wrong-uid", nil, err)
	err = cms.Delete(ctx, "c", metav1.DeleteOptions{})
	o.result("delete", nil, err)
	err = cms.Delete(ctx, "c", metav1.DeleteOptions{})
	o.result("delete-missing", nil, err)
	o.ok("is-not-found", apierrors.IsNotFound(err))

	// The scale subresource.
	replicas := int32(0)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}
	_, err = cs.AppsV1().Deployments(*ns).Create(ctx, d, metav1.CreateOptions{})
	o.result("deployment-create", nil, err)
	scale, err := cs.AppsV1().Deployments(*ns).GetScale(ctx, "web", metav1.GetOptions{})
	o.result("get-scale", scale, err)
	if err == nil {
		scale.Spec.Replicas = 0
		scale.ResourceVersion = ""
		scale, err = cs.AppsV1().Deployments(*ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
		o.result("update-scale", scale, err)
	}

	// Discovery.
	resources, err := cs.Discovery().ServerResourcesForGroupVersion("apps/v1")
	var resourceNames []string
	if err == nil {
		for _, r := range resources.APIResources {
			resourceNames = append(resourceNames, r.Name)
		}
		sort.Strings(resourceNames)
	}
	o.result("discovery-apps", resourceNames, err)
	_, err = cs.Discovery().ServerResourcesForGroupVersion("nope.example.com/v1")
	o.result("discovery-unknown", nil, err)

	// The dynamic client on the custom resource.
	widgets := dyn.Resource(schema.GroupVersionResource{Group: *group, Version: "v1", Resource: "widgets"}).Namespace(*ns)
	w, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": *group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
		"spec": map[string]any{"size": int64(2)}}}, metav1.CreateOptions{})
	o.result("dynamic-create", w, err)
	_, err = widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": *group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "bad"},
		"spec": map[string]any{"size": int64(0)}}}, metav1.CreateOptions{})
	o.result("dynamic-invalid", nil, err)
	list, err := widgets.List(ctx, metav1.ListOptions{})
	o.result("dynamic-list", list, err)

	// A raw watch from a list's resourceVersion.
	cmList, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		o.result("watch", nil, err)
		os.Exit(1)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	watcher, err := cms.Watch(wctx, metav1.ListOptions{ResourceVersion: cmList.ResourceVersion})
	if err != nil {
		o.result("watch", nil, err)
	} else {
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = cms.Patch(ctx, "d", types.MergePatchType, []byte(`{"data":{"w":"1"}}`), metav1.PatchOptions{})
			_ = cms.Delete(ctx, "d", metav1.DeleteOptions{})
		}()
		var events []string
		for ev := range watcher.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				events = append(events, string(ev.Type)+" "+cm.Name)
			}
			if len(events) == 2 {
				break
			}
		}
		watcher.Stop()
		o.ok("watch", events)
	}
	wcancel()

	// A shared informer: its handler calls for a create, an update and a delete.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(*ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	var mu sync.Mutex
	var calls []string
	record := func(kind string, obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			mu.Lock()
			calls = append(calls, kind+" "+cm.Name)
			mu.Unlock()
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	})
	stop := make(chan struct{})
	factory.Start(stop)
	synced := cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	o.ok("informer-synced", synced)
	_, _ = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "inf"}}, metav1.CreateOptions{})
	_, _ = cms.Patch(ctx, "inf", types.MergePatchType, []byte(`{"data":{"i":"1"}}`), metav1.PatchOptions{})
	_ = cms.Delete(ctx, "inf", metav1.DeleteOptions{})
	// The initial list's adds (a, b, kube-root-ca.crt) come first, in any order; then inf's add,
	// update and delete.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := len(calls) > 0 && calls[len(calls)-1] == "delete inf"
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	mu.Lock()
	if len(calls) >= 3 {
		sort.Strings(calls[:3])
	}
	o.ok("informer-calls", calls)
	mu.Unlock()
}
