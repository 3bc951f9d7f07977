// Command reconcile: a real controller-runtime controller in a real manager (controller.NewTyped:
// its default priority queue, worker loop, metrics and rate limiter; manager.Start) fed by a
// source.Channel of GenericEvents through handler.EnqueueRequestForObject, with a Reconciler of one
// of two shapes (-work): trivial (it only counts: the instrumentation's worst case) or get (it reads
// its Pod from an API server, an in-process httptest server answering a canned Pod of ~1.5 kB, and
// decodes it: a reconcile doing typical work, one read per Reconcile). Every event names a distinct
// Pod, so each one is exactly one Reconcile. Prints one JSON line with reconciles/s, from the first
// timed event sent to the last Reconcile returning (after a warm-up).
//
//	reconcile -n 100000 [-workers 1] [-work trivial|get] [-mode plain|ctrlscope|ctrlscope+events] [-cpuprofile FILE]
//
// The manager never reaches an API server: it has no informers, and its rest config points at a
// closed port (ctrlscope's one GET /version fails at once). Modes other than plain live in
// instrumented.go (absent when built with -tags noctrlscope).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ctrlscope/ctrlscope/go/bench/internal/benchkit"
)

const controllerName = "bench"

// setup is one mode's wiring of the controller: it may change the options, the reconciler and
// the event handler. finish releases what the mode holds and returns extra fields for the result.
type setup struct {
	opts    controller.Options
	handler handler.EventHandler
	finish  func() map[string]any
}

type instrument func(mgr manager.Manager, s *setup, f benchkit.Flags) error

var modes = map[string]instrument{"plain": func(manager.Manager, *setup, benchkit.Flags) error { return nil }}

func pods(from, n int) []event.GenericEvent {
	out := make([]event.GenericEvent, n)
	for i := range out {
		k := from + i
		out[i] = event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("team-%d", k%20), Name: fmt.Sprintf("web-%07d", k), ResourceVersion: "2"}}}
	}
	return out
}

// apiServer answers GET /api/v1/namespaces/{ns}/pods/{name} with a canned Pod of that name.
func apiServer() *httptest.Server {
	pod := corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{
		Name: "NAME", Namespace: "NS", ResourceVersion: "2", UID: "5f1c7c2e-8a4b-4d59-9d1e-3b0d6f7a2c11",
		Labels:      map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "7d9f8c6b5"},
		Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: "TCP"}},
			Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "LOG_LEVEL", Value: "info"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.12", HostIP: "192.168.1.10",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	body, _ := json.Marshal(pod)
	tmpl := string(body)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/") // ns, "pods", name
		if len(parts) != 3 || parts[1] != "pods" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.Replace(strings.Replace(tmpl, `"NAME"`, `"`+parts[2]+`"`, 1), `"NS"`,
			`"`+parts[0]+`"`, 1))
	}))
}

// getReconciler reads the request's Pod from the API server and decodes it.
func getReconciler(url string, workers int, hit func()) reconcile.Func {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers + 1}}
	return func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		defer hit()
		hreq, err := http.NewRequestWithContext(ctx, http.MethodGet,
			url+"/api/v1/namespaces/"+req.Namespace+"/pods/"+req.Name, nil)
		if err != nil {
			return reconcile.Result{}, err
		}
		res, err := client.Do(hreq)
		if err != nil {
			return reconcile.Result{}, err
		}
		defer func() { _ = res.Body.Close() }()
		var pod corev1.Pod
		if err := json.NewDecoder(res.Body).Decode(&pod); err != nil {
			return reconcile.Result{}, err
		}
		if pod.Name != req.Name {
			return reconcile.Result{}, fmt.Errorf("got Pod %q for %q", pod.Name, req.Name)
		}
		return reconcile.Result{}, nil
	}
}

func main() {
	benchkit.Setup()
	n := flag.Int("n", 100_000, "timed reconciles (distinct Pods)")
	warm := flag.Int("warmup", 5_000, "reconciles before the timed ones")
	workers := flag.Int("workers", 1, "MaxConcurrentReconciles")
	work := flag.String("work", "trivial", "what each Reconcile does: trivial (count) or get (GET its Pod and decode it)")
	f := benchkit.CommonFlags("plain, ctrlscope, ctrlscope+events")
	flag.Parse()
	inst, ok := modes[*f.Mode]
	if !ok {
		benchkit.Fail(fmt.Errorf("mode %q not built in", *f.Mode))
	}
	warmup, timed := pods(0, *warm), pods(*warm, *n)
	counter := benchkit.NewCounter(*warm + *n)
	warmed := benchkit.NewCounter(max(*warm, 1))
	if *warm == 0 {
		warmed.Hit()
	}
	hit := func() {
		warmed.Hit()
		counter.Hit()
	}
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		hit()
		return reconcile.Result{}, nil
	})
	switch *work {
	case "trivial":
	case "get":
		srv := apiServer()
		defer srv.Close()
		r = getReconciler(srv.URL, *workers, hit)
	default:
		benchkit.Fail(fmt.Errorf("unknown -work %q", *work))
	}
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		benchkit.Fail(err)
	}
	skip := true
	s := &setup{opts: controller.Options{Reconciler: r, MaxConcurrentReconciles: *workers, SkipNameValidation: &skip},
		handler: &handler.EnqueueRequestForObject{}, finish: func() map[string]any { return map[string]any{} }}
	if err := inst(mgr, s, f); err != nil {
		benchkit.Fail(err)
	}
	c, err := controller.New(controllerName, mgr, s.opts)
	if err != nil {
		benchkit.Fail(err)
	}
	events := make(chan event.GenericEvent, 1024)
	if err := c.Watch(source.Channel(events, s.handler)); err != nil {
		benchkit.Fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	for _, e := range warmup {
		events <- e
	}
	<-warmed.Done
	stopProfile := benchkit.Profile(*f.CPUProfile)
	cpu0 := benchkit.CPUSeconds()
	start := time.Now()
	go func() {
		for _, e := range timed {
			events <- e
		}
	}()
	select {
	case <-counter.Done:
	case <-time.After(5 * time.Minute):
		benchkit.Fail(fmt.Errorf("timeout: %d of %d reconciles", counter.N(), *warm+*n))
	}
	cpu := benchkit.CPUSeconds() - cpu0
	elapsed := time.Duration(counter.At.Load() - start.UnixNano()).Seconds()
	stopProfile()
	cancel()
	if err := <-stopped; err != nil {
		benchkit.Fail(err)
	}
	if extra := counter.N() - *warm - *n; extra != 0 {
		benchkit.Fail(fmt.Errorf("%d reconciles more than events", extra))
	}
	out := s.finish()
	out["reconciles"], out["elapsed_s"], out["reconciles_per_s"], out["workers"] = *n, elapsed, float64(*n)/elapsed,
		*workers
	out["work"] = *work
	out["cpu_s"], out["cpu_us_per_reconcile"] = cpu, cpu/float64(*n)*1e6
	benchkit.Emit(*f.Mode, out)
}
