package clientgo

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

const deployTopic = "w/w/informer/apps_v1_Deployment"

// storeState is what the cache topic must hold for inf's store: key -> rv.
func storeState(inf cache.SharedIndexInformer) map[string]string {
	out := map[string]string{}
	for _, obj := range inf.GetStore().List() {
		d := obj.(*appsv1.Deployment)
		out[d.Namespace+"/"+d.Name] = d.ResourceVersion
	}
	return out
}

func topicRVs(state map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range state {
		out[k], _ = v.(map[string]any)["rv"].(string)
	}
	return out
}

// only keeps the records of the given kinds, each reduced to the given fields.
func only(recs []map[string]any, fields map[string][]string) []string {
	var out []string
	for _, r := range recs {
		k, _ := r["k"].(string)
		fs, ok := fields[k]
		if !ok {
			continue
		}
		parts := []string{k}
		for _, f := range fs {
			parts = append(parts, fmt.Sprintf("%s=%v", f, r[f]))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func contains(list []string, want ...string) bool {
	i := 0
	for _, x := range list {
		if i < len(want) && x == want[i] {
			i++
		}
	}
	return i == len(want)
}

type userCalls struct {
	mu    sync.Mutex
	calls []string
}

func (u *userCalls) add(s string) { u.mu.Lock(); u.calls = append(u.calls, s); u.mu.Unlock() }

// TestObservedInformer runs a factory-made Deployment informer against the test API server, in
// both of client-go's list modes (WatchList, the 0.37 default, and LIST with pagination as a
// fallback for servers without it), through a change of every kind and a 410 that forces a relist
// which finds changes the watch never delivered.
func TestObservedInformer(t *testing.T) {
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprintf("watchList=%v", watchList), func(t *testing.T) { testObservedInformer(t, watchList) })
	}
}

func testObservedInformer(t *testing.T, watchList bool) {
	f := newTelFixture(t, clock.RealClock{})
	srv := newAPIServer(t, watchList)
	if !watchList {
		srv.pageSize = 1
	}
	srv.apply("default/a", deployment("default", "a", 1), false)
	listRV := srv.apply("default/b", deployment("default", "b", 1), false)

	cs, err := kubernetes.NewForConfig(WrapConfig(f.Tel, srv.config()))
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Apps().V1().Deployments().Informer()
	name := InformerName(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	obs, err := ObserveInformer(f.Tel, name, inf)
	if err != nil {
		t.Fatal(err)
	}
	var user userCalls
	if _, err := inf.AddEventHandler(Handlers(f.Tel, name, "user", cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { user.add("add " + obj.(*appsv1.Deployment).Name) },
		UpdateFunc: func(_, obj any) { user.add("update " + obj.(*appsv1.Deployment).Name) },
		DeleteFunc: func(obj any) { user.add("delete " + ObjectKey(obj)) },
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	converged := func() bool {
		_, state := f.topic(t, deployTopic)
		return reflect.DeepEqual(topicRVs(state), storeState(inf))
	}
	eventually(t, "the cache topic to hold the initial list", converged)

	// Changes through the watch.
	cRV := srv.apply("default/c", deployment("default", "c", 1), false)
	aRV := srv.apply("default/a", deployment("default", "a", 2), false)
	bRV := srv.apply("default/b", nil, false)
	eventually(t, "the store to see the changes", func() bool { return len(storeState(inf)) == 2 && storeState(inf)["default/a"] == aRV })
	eventually(t, "the cache topic to follow the store", converged)

	recs, _ := f.topic(t, deployTopic)
	got := only(recs, map[string][]string{"informer": {"fifo"}, "state": {"state"}, "list": {"rv", "items"},
		"watch_start": {}, "watch": {"type", "key", "rv"}})
	want := []string{"informer fifo=RealFIFO", "state state=listing", "list rv=" + listRV + " items=2",
		"watch type=ADDED key=default/c rv=" + cRV, "watch type=MODIFIED key=default/a rv=" + aRV,
		"watch type=DELETED key=default/b rv=" + bRV}
	if !contains(got, want...) {
		t.Fatalf("records:\n%s\nwant in order:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !contains(got, "state state=synced") || !contains(got, "watch_start", "state state=watching") {
		t.Fatalf("no synced / watch_start + watching in:\n%s", strings.Join(got, "\n"))
	}
	for _, r := range recs {
		if r["k"] == "watch" && (r["key"] == "default/a" || r["key"] == "default/b") && r["type"] == "ADDED" {
			t.Fatalf("an initial-list item published as a watch event: %v", r)
		}
	}
	handlers := only(recs, map[string][]string{"handler": {"handler", "event", "key", "outcome"}})
	wantHandlers := []string{"handler handler=user event=add key=default/c outcome=ok",
		"handler handler=user event=update key=default/a outcome=ok",
		"handler handler=user event=delete key=default/b outcome=ok"}
	if !contains(handlers, wantHandlers...) || len(handlers) != 5 {
		t.Fatalf("handler records:\n%s", strings.Join(handlers, "\n"))
	}
	// Each handler call after the watch event it answers, though client-go ran the two handlers on
	// goroutines of their own (order.go).
	watchAt := map[string]int{}
	for n, r := range recs {
		if r["k"] == "watch" {
			watchAt[fmt.Sprint(r["key"], "@", r["rv"])] = n
		}
	}
	for n, r := range recs {
		if at, ok := watchAt[fmt.Sprint(r["key"], "@", r["rv"])]; ok && r["k"] == "handler" && at > n {
			t.Fatalf("handler record %v before the watch event it answers", r)
		}
	}

	// While the watch is down: c is deleted and a changed, unseen; the 410 makes the informer
	// relist, which finds both. Neither is a watch event: a tombstone and a replacement.
	srv.apply("default/c", nil, true)
	a2RV := srv.apply("default/a", deployment("default", "a", 5), true)
	srv.expireWatches()
	eventually(t, "the relist", func() bool { return storeState(inf)["default/a"] == a2RV && len(storeState(inf)) == 1 })
	eventually(t, "the cache topic to follow the relist", converged)
	later := srv.apply("default/d", deployment("default", "d", 1), false)
	eventually(t, "a watch event after the relist", func() bool { return storeState(inf)["default/d"] == later })
	eventually(t, "the cache topic to follow", converged)

	recs, _ = f.topic(t, deployTopic)
	got = only(recs, map[string][]string{"state": {"state"}, "list": {"rv", "items"}, "watch_end": {"reason"},
		"watch": {"type", "key"}, "fifo": {"op", "key", "delta"}, "backoff": {"delay"}})
	want = []string{"watch type=DELETED key=default/b", "watch_end reason=expired", "state state=backing-off",
		"backoff delay=0.8", "state state=relisting", "list rv=" + a2RV + " items=1",
		"fifo op=popped key=default/c delta=Deleted", "fifo op=popped key=default/a delta=Replaced",
		"watch type=ADDED key=default/d"}
	if !contains(got, want...) {
		t.Fatalf("records:\n%s\nwant in order:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, r := range recs {
		if r["k"] == "watch" && (r["key"] == "default/c" && r["type"] == "DELETED" || r["rv"] == a2RV) {
			t.Fatalf("a relisted change published as a watch event: %v", r)
		}
	}
	var tombstone map[string]any
	for _, r := range recs {
		if r["k"] == "handler" && r["key"] == "default/c" && r["event"] == "delete" {
			tombstone = r
		}
	}
	if tombstone == nil || tombstone["tombstone"] != true || tombstone["handler"] != "user" {
		t.Fatalf("the relist's delete of c is not a tombstone handler call: %v", tombstone)
	}

	if !watchList {
		// The reflector's first LIST (rv=0, paginated by 500) came in two pages of one here.
		pages := 0
		for _, r := range srv.requestLog() {
			if strings.Contains(r, "/deployments?") && !strings.Contains(r, "watch=") && strings.Contains(r, "limit=") {
				pages++
			}
		}
		if pages < 2 {
			t.Fatalf("expected a paginated LIST, got %v", srv.requestLog())
		}
	}

	cancel()
	factory.Shutdown()
	obs.Stopped()
	recs, _ = f.topic(t, deployTopic)
	got = only(recs, map[string][]string{"state": {"state"}, "watch_end": {"reason"}})
	if !contains(got, "watch_end reason=stopped", "state state=stopped") {
		t.Fatalf("no stop in:\n%s", strings.Join(got, "\n"))
	}
	_, comps := f.topic(t, "w/w/components")
	inform := comps["informer/"+name].(map[string]any)
	if inform["synced"] != true || inform["fifo"] != "RealFIFO" || inform["state"] != "stopped" {
		t.Fatalf("informer component: %v", inform)
	}
}

// TestObserveStartedInformer: observing needs an informer that has not started.
func TestObserveStartedInformer(t *testing.T) {
	f := newTelFixture(t, clock.RealClock{})
	srv := newAPIServer(t, true)
	cs, _ := kubernetes.NewForConfig(srv.config())
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Apps().V1().Deployments().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	if _, err := ObserveInformer(f.Tel, "apps/v1/Deployment", inf); err == nil {
		t.Fatal("observing a running informer succeeded")
	}
	cancel()
	factory.Shutdown()
}

// TestBackoffNominal: the published delays follow client-go's reflector backoff without jitter.
func TestBackoffNominal(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.UnixMilli(1_700_000_000_000))
	f := newTelFixture(t, clk)
	o := &Informer{tel: f.Tel, name: "v1/Pod"}
	for i := 0; i < 7; i++ {
		o.backingOff("test")
		clk.Step(time.Second)
	}
	clk.Step(2 * time.Minute)
	o.backingOff("test")
	recs, _ := f.topic(t, "w/w/informer/v1_Pod")
	var delays []any
	for _, r := range recs {
		if r["k"] == "backoff" {
			delays = append(delays, r["delay"])
		}
	}
	want := []any{0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 0.8}
	if !reflect.DeepEqual(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
}

func TestInformerNames(t *testing.T) {
	if n := InformerName(appsv1.SchemeGroupVersion.WithKind("Deployment")); n != "apps/v1/Deployment" {
		t.Fatal(n)
	}
	if n, err := InformerNameFor(&appsv1.Deployment{}); err != nil || n != "apps/v1/Deployment" {
		t.Fatal(n, err)
	}
	gvk, ok := ParseInformerName("v1/Pod")
	if !ok || gvk.Group != "" || gvk.Version != "v1" || gvk.Kind != "Pod" {
		t.Fatal(gvk)
	}
	if _, ok := ParseInformerName("pods"); ok {
		t.Fatal("parsed a bare name")
	}
	if FifoModel() != "RealFIFO" {
		t.Fatalf("client-go 0.37's informers use RealFIFO, not %s", FifoModel())
	}
	_ = ctrlscope.ProtocolVersion
}
