package ctrlruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
	"github.com/ctrlscope/ctrlscope/go/internal/testtel"
)

// fakeManager answers what the per-controller helpers ask a manager; the rest is not called.
type fakeManager struct {
	manager.Manager
	cfg    config.Controller
	scheme *runtime.Scheme
	mapper meta.RESTMapper
}

func (m fakeManager) GetControllerOptions() config.Controller { return m.cfg }
func (m fakeManager) GetLogger() logr.Logger                  { return logr.Discard() }
func (m fakeManager) GetScheme() *runtime.Scheme              { return m.scheme }
func (m fakeManager) GetRESTMapper() meta.RESTMapper          { return m.mapper }

func newInstrumentation(h *testtel.Harness, mgr fakeManager) *Instrumentation {
	return &Instrumentation{mgr: mgr, tel: h.Tel, opts: Options{Clock: clock.RealClock{}},
		ctrls: map[string]*controllerInfo{}}
}

func req(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

type rec = map[string]any

func queueOps(t *testing.T, h *testtel.Harness, name string) ([]string, []rec, map[string]any) {
	t.Helper()
	recs, state := h.Read(t, h.Tel.Topic(ctrlscope.TopicKindQueue, name))
	var out []string
	for _, r := range recs {
		out = append(out, r["op"].(string)+" "+r["key"].(string))
	}
	return out, recs, state
}

func sameOps(t *testing.T, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records:\n got  %q\n want %q", got, want)
	}
}

func component(t *testing.T, h *testtel.Harness, key string) rec {
	t.Helper()
	_, state := h.Read(t, "w/test/components")
	c, _ := state[key].(rec)
	return c
}

func TestPriorityQueueKeepsPrioritiesAndPublishesEachKey(t *testing.T) {
	h := newRealHarness(t)
	i := newInstrumentation(h, fakeManager{})
	o := i.ControllerOptions("c", controller.Options{MaxConcurrentReconciles: 3})
	q := o.NewQueue("c", workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, time.Hour))
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		t.Fatalf("the default queue is controller-runtime's priority queue, observed: got %T", q)
	}
	a, b, node := req("default", "a"), req("default", "b"), req("", "node1")
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, a) // an initial list's event
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(10)}, b)
	pq.Add(node)
	for _, want := range []struct {
		r reconcile.Request
		p int
	}{{b, 10}, {node, 0}, {a, handler.LowPriority}} {
		got, p, shutdown := pq.GetWithPriority()
		if shutdown || got != want.r || p != want.p {
			t.Fatalf("GetWithPriority = %v %d, want %v %d: the highest priority first", got, p, want.r, want.p)
		}
		if got != a {
			pq.Done(got)
		}
	}
	pq.Add(a)                                                                        // being processed: dirty
	pq.AddWithOpts(priorityqueue.AddOpts{RateLimited: true, Priority: ptr.To(5)}, a) // ready already: absorbed
	pq.Done(a)                                                                       // back in the queue
	if got, _, _ := pq.GetWithPriority(); got != a {
		t.Fatalf("got %v", got)
	}
	pq.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, a) // the second retry: 10 ms
	pq.Done(a)
	waitFor(t, func() bool { return pq.Len() == 1 })
	if got, _, _ := pq.GetWithPriority(); got != a {
		t.Fatalf("got %v", got)
	}
	pq.Forget(a)
	pq.Done(a)
	waitFor(t, func() bool { h.Flush(t); return component(t, h, "controller/c")["started"] == true })
	pq.ShutDown()
	h.Flush(t)

	got, recs, state := queueOps(t, h, "c")
	sameOps(t, got, []string{"add default/a", "add default/b", "add node1", "get default/b", "done default/b",
		"get node1", "done node1", "get default/a", "defer default/a", "add_rate_limited default/a", "dedup default/a",
		"done default/a", "requeue default/a", "get default/a", "add_rate_limited default/a", "done default/a",
		"add default/a", "get default/a", "forget default/a", "done default/a", "shutdown "})
	if d, n := recs[9]["delay"], recs[9]["requeues"]; d != 0.0 || n != 1.0 {
		t.Errorf("a rate-limited add of a ready key: delay %v (absorbed: 0), requeues %v", d, n)
	}
	if d, n := recs[14]["delay"], recs[14]["requeues"]; d != 0.01 || n != 2.0 {
		t.Errorf("second retry: delay %v requeues %v, want the limiter's 0.01 and 2", d, n)
	}
	if recs[2]["depth"] != 3.0 {
		t.Errorf("depth after three adds: %v", recs[2]["depth"])
	}
	if len(state) != 0 {
		t.Errorf("every key done and forgotten leaves no state: %v", state)
	}
	c := component(t, h, "controller/c")
	if c["workers"] != 3.0 || c["started"] != false {
		t.Errorf("controller component after shutdown: %v", c)
	}
	sameLimiter(t, c, `{"base":0.005,"max":3600,"type":"exponential"}`)
}

// sameLimiter: the controller component describes the rate limiter its queue was given (v1.5).
func sameLimiter(t *testing.T, c rec, want string) {
	t.Helper()
	if got, _ := json.Marshal(c["rate_limiter"]); string(got) != want {
		t.Errorf("rate_limiter %s, want %s", got, want)
	}
}

func TestClassicQueueWhenThePriorityQueueIsOff(t *testing.T) {
	h := newRealHarness(t)
	i := newInstrumentation(h, fakeManager{cfg: config.Controller{UsePriorityQueue: ptr.To(false)}})
	o := i.ControllerOptions("c", controller.Options{})
	q := o.NewQueue("c", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	if _, isPQ := q.(priorityqueue.PriorityQueue[reconcile.Request]); isPQ {
		t.Fatal("UsePriorityQueue false (from the manager's controller options): client-go's queue")
	}
	a := req("default", "a")
	q.Add(a)
	q.Add(a)
	got, _ := q.Get()
	q.Add(got)
	q.Done(got)
	got, _ = q.Get()
	q.AddRateLimited(got)
	q.Done(got)
	waitFor(t, func() bool { return q.Len() == 1 })
	got, _ = q.Get()
	q.Forget(got)
	q.Done(got)
	q.ShutDown()
	h.Flush(t)
	ops, recs, state := queueOps(t, h, "c")
	sameOps(t, ops, []string{"add default/a", "dedup default/a", "get default/a", "defer default/a", "done default/a",
		"requeue default/a", "get default/a", "add_rate_limited default/a", "done default/a", "add default/a",
		"get default/a", "forget default/a", "done default/a", "shutdown "})
	if recs[7]["delay"] != 0.005 || recs[7]["requeues"] != 1.0 {
		t.Errorf("retry %v", recs[7])
	}
	if len(state) != 0 {
		t.Errorf("state %v", state)
	}
	sameLimiter(t, component(t, h, "controller/c"),
		`{"of":[{"base":0.005,"max":1000,"type":"exponential"},{"burst":100,"qps":10,"type":"bucket"}],"type":"max_of"}`)
}

type reconcileFunc func(context.Context, reconcile.Request) (reconcile.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
	return f(ctx, r)
}

func TestReconcilerPublishesEachAttemptAndItsResult(t *testing.T) {
	h := newHarness(t)
	i := newInstrumentation(h, fakeManager{})
	var contexts []string
	r := i.Reconciler("c", reconcileFunc(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		contexts = append(contexts, ctrlscope.ReconcilingController(ctx))
		h.Clock.Step(20 * time.Millisecond)
		switch r.Name {
		case "again":
			return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // still acted on upstream
		case "later":
			return reconcile.Result{RequeueAfter: 3 * time.Second}, nil
		case "fail":
			return reconcile.Result{RequeueAfter: time.Second}, errors.New("write failed")
		case "final":
			return reconcile.Result{}, reconcile.TerminalError(errors.New("bad spec"))
		case "boom":
			panic("nil map")
		}
		return reconcile.Result{}, nil
	}))
	for _, name := range []string{"ok", "again", "later", "fail", "final"} {
		_, _ = r.Reconcile(context.Background(), req("default", name))
	}
	func() {
		defer func() {
			if p := recover(); p != "nil map" {
				t.Errorf("the panic goes on to controller-runtime with its value: %v", p)
			}
		}()
		_, _ = r.Reconcile(context.Background(), req("", "boom"))
	}()
	h.Flush(t)
	all, state := h.Read(t, h.Tel.Topic(ctrlscope.TopicKindController, "c"))
	var recs, findings []rec
	for _, x := range all {
		if x["k"] == "finding" {
			findings = append(findings, x)
		} else {
			recs = append(recs, x)
		}
	}
	// v1.7: the terminal error is a finding of its key (open until the key's next success)
	if len(findings) != 1 || findings[0]["finding"] != "terminal" || findings[0]["subject"] != "default/final" ||
		findings[0]["open"] != true || findings[0]["message"] != "terminal error: terminal error: bad spec" {
		t.Errorf("findings %v", findings)
	}
	var results []string
	for n, x := range recs {
		if n%2 == 0 {
			if x["k"] != "reconcile_start" || x["worker"] != 0.0 {
				t.Fatalf("record %d: %v", n, x)
			}
			continue
		}
		results = append(results, x["key"].(string)+" "+x["result"].(string))
		if x["duration"] != 0.02 {
			t.Errorf("duration %v", x["duration"])
		}
		switch x["result"] {
		case "requeue_after":
			if x["requeue_after"] != 3.0 {
				t.Errorf("requeue_after %v", x)
			}
		case "error":
			if x["error"] != "write failed" || x["requeue_after"] != 0.0 {
				t.Errorf("an error wins over RequeueAfter, as in controller-runtime: %v", x)
			}
		case "terminal":
			if x["error"] != "terminal error: bad spec" {
				t.Errorf("terminal %v", x)
			}
		case "panic":
			if x["error"] != "panic: nil map" {
				t.Errorf("panic %v", x)
			}
		}
	}
	sameOps(t, results, []string{"default/ok success", "default/again requeue", "default/later requeue_after",
		"default/fail error", "default/final terminal", "boom panic"})
	if !reflect.DeepEqual(contexts, []string{"c", "c", "c", "c", "c", "c"}) {
		t.Errorf("the context names the controller, for the transport's write records: %v", contexts)
	}
	if s := state["boom"].(rec); s["attempts"] != 1.0 || s["result"] != "panic" {
		t.Errorf("state %v", s)
	}
}

func TestAReadOnlyErrorIsTerminal(t *testing.T) {
	h := newHarness(t)
	i := newInstrumentation(h, fakeManager{})
	refused := &clientgo.ReadOnlyError{Method: "POST", Path: "/api/v1/namespaces/default/configmaps",
		Server: "https://k8s:6443", Why: "https://k8s:6443 is not the simulated cluster"}
	r := i.Reconciler("c", reconcileFunc(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		if r.Name == "wrapped" {
			return reconcile.Result{}, fmt.Errorf("creating the summary: %w", refused)
		}
		return reconcile.Result{RequeueAfter: time.Second}, refused
	}))
	for _, name := range []string{"bare", "wrapped"} {
		_, err := r.Reconcile(context.Background(), req("default", name))
		// What controller-runtime checks before it requeues: a terminal error is not retried.
		if !errors.Is(err, reconcile.TerminalError(nil)) {
			t.Fatalf("%s: controller-runtime would retry %v", name, err)
		}
		var ro *clientgo.ReadOnlyError
		if !errors.As(err, &ro) {
			t.Fatalf("%s: the ReadOnlyError is still there to find: %v", name, err)
		}
	}
	h.Flush(t)
	recs, _ := h.Read(t, h.Tel.Topic(ctrlscope.TopicKindController, "c"))
	var results []string
	for _, x := range recs {
		if x["k"] == "reconcile" {
			results = append(results, x["key"].(string)+" "+x["result"].(string))
			if !strings.HasPrefix(x["error"].(string), "terminal error: ") || !strings.Contains(x["error"].(string), "read-only: POST") {
				t.Errorf("the error says why: %v", x["error"])
			}
		}
	}
	sameOps(t, results, []string{"default/bare terminal", "default/wrapped terminal"})
}

func TestReconcilerWorkerSlots(t *testing.T) {
	h := newHarness(t)
	i := newInstrumentation(h, fakeManager{})
	if a, b := i.takeSlot("c"), i.takeSlot("c"); a != 0 || b != 1 {
		t.Fatalf("slots %d %d", a, b)
	}
	i.releaseSlot("c", 0)
	if n := i.takeSlot("c"); n != 0 {
		t.Fatalf("the lowest free slot: %d", n)
	}
}

// ownerWorld is a scheme and REST mapper that know Deployments, for EnqueueRequestForOwner.
func ownerWorld() fakeManager {
	s := runtime.NewScheme()
	_ = appsv1.AddToScheme(s)
	_ = corev1.AddToScheme(s)
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	return fakeManager{scheme: s, mapper: m}
}

func owned(name, owner string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: owner,
			UID: types.UID("uid-" + owner), Controller: ptr.To(true)}}}}
}

// priorityProbe records whether the queue a handler gets is a priority queue.
type priorityProbe struct {
	handler.EventHandler
	sawPQ *bool
}

func (p priorityProbe) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	_, *p.sawPQ = q.(priorityqueue.PriorityQueue[reconcile.Request])
	p.EventHandler.Create(ctx, e, q)
}

func TestHandlerPublishesTheRequestsItsHandlerEnqueued(t *testing.T) {
	h := newRealHarness(t)
	mgr := ownerWorld()
	i := newInstrumentation(h, mgr)
	q := i.ControllerOptions("c", controller.Options{}).NewQueue("c",
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, time.Hour))
	defer q.ShutDown()
	ctx := context.Background()

	sawPQ := false
	forObj := i.handler("c", RoleFor, priorityProbe{EventHandler: &handler.EnqueueRequestForObject{}, sawPQ: &sawPQ})
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: 1}}
	db := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", Generation: 1}}
	forObj.Create(ctx, event.CreateEvent{Object: db, IsInInitialList: true}, q) // low priority
	if !sawPQ {
		t.Error("the recording queue is a priority queue when the controller's is")
	}
	owns := i.handler("c", RoleOwns, handler.EnqueueRequestForOwner(mgr.scheme, mgr.mapper, &appsv1.Deployment{},
		handler.OnlyControllerOwner()))
	owns.Create(ctx, event.CreateEvent{Object: owned("web-summary", "web")}, q)
	moved := owned("moved", "api")
	moved.ResourceVersion = "2" // a change (an unchanged object, a resync, would be enqueued at low priority)
	owns.Update(ctx, event.UpdateEvent{ObjectOld: owned("moved", "web"), ObjectNew: moved}, q)
	owns.Delete(ctx, event.DeleteEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default",
		Name: "stray"}}}, q)

	preds := i.predicates("c", RoleFor, predicate.GenerationChangedPredicate{})
	newer := web.DeepCopy()
	newer.ResourceVersion = "2" // a status change: the generation stays
	if preds[0].Update(event.UpdateEvent{ObjectOld: web, ObjectNew: newer}) {
		t.Fatal("the wrapped predicate answers as the predicate does")
	}
	newer.Generation = 2
	if !preds[0].Update(event.UpdateEvent{ObjectOld: web, ObjectNew: newer}) {
		t.Fatal("a spec change passes")
	}
	h.Flush(t)
	recs, _ := h.Read(t, h.Tel.Topic(ctrlscope.TopicKindController, "c"))
	type ev struct {
		Event, Key string
		Requests   []any
		Filtered   any
	}
	var got []ev
	for _, r := range recs {
		got = append(got, ev{r["event"].(string), r["key"].(string), r["requests"].([]any), r["filtered_by"]})
	}
	want := []ev{
		{"create", "default/db", []any{"default/db"}, nil},
		{"create", "default/web-summary", []any{"default/web"}, nil},
		{"update", "default/moved", []any{"default/api", "default/web"}, nil},
		{"delete", "default/stray", []any{}, nil},
		{"update", "default/web", []any{}, "GenerationChangedPredicate"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got  %v\n want %v", got, want)
	}
	// Each event is also the informer handler call that delivered it, on the informer's topic, for
	// the pipeline's handler stage (the filtered one too), named for the builder method that
	// installed its handler: For and Owns calls of one controller can be told apart.
	calls := map[string][]string{}
	for _, informer := range []string{"apps/v1/Deployment", "v1/ConfigMap"} {
		hrecs, _ := h.Read(t, h.Tel.Topic(ctrlscope.TopicKindInformer, informer))
		for _, r := range hrecs {
			if r["k"] == "handler" && r["outcome"] == "ok" {
				calls[r["handler"].(string)] = append(calls[r["handler"].(string)], r["event"].(string)+" "+r["key"].(string))
			}
		}
	}
	wantCalls := map[string][]string{
		"controller/c (For)":  {"add default/db", "update default/web"},
		"controller/c (Owns)": {"add default/web-summary", "update default/moved", "delete default/stray"},
	}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Fatalf("informer handler calls:\n got  %v\n want %v", calls, wantCalls)
	}
	if HandlerName("c", RoleWatches) != "controller/c (Watches)" || i.Handler("c", forObj).(*observedHandler).name != "controller/c (Watches)" {
		t.Error("a handler wrapped for the builder's Watches is named (Watches)")
	}
	waitFor(t, func() bool { return q.Len() == 3 })
	var order []reconcile.Request
	for n := 0; n < 3; n++ {
		r, _ := q.Get()
		order = append(order, r)
	}
	if order[2] != req("default", "db") {
		// default/db came from the initial list at low priority, the others at the default one
		t.Errorf("priorities kept through the recording queue: order %v", order)
	}
}

func TestPredicateName(t *testing.T) {
	for _, c := range []struct {
		p    any
		want string
	}{
		{predicate.GenerationChangedPredicate{}, "GenerationChangedPredicate"},
		{predicate.ResourceVersionChangedPredicate{}, "ResourceVersionChangedPredicate"},
		{predicate.Funcs{}, "Funcs"},
		{&predicate.Funcs{}, "Funcs"},
	} {
		if got := PredicateName(c.p); got != c.want {
			t.Errorf("PredicateName(%T) = %q, want %q", c.p, got, c.want)
		}
	}
	if Key(req("", "n")) != "n" || Key(req("ns", "n")) != "ns/n" {
		t.Error("Key")
	}
	var _ client.Object = owned("x", "y")
}
