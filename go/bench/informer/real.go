package main

// Against a real API server (-kubeconfig): bench/informer.py's "real API server" section. The same
// plain pipeline (SharedIndexInformer -> one handler -> a client-go workqueue), on the Pods of one
// namespace, in JSON or protobuf (-content-type), in one of two shapes:
//
//   - replay (-replay-from RV): the LIST is answered here with the namespace as it was at RV (empty:
//     the driver took RV before creating any Pod there), so the reflector WATCHes from RV and the
//     server replays every event since from its watch cache as fast as we read it. Timed from Run
//     to the -n-th handler call.
//   - live (-phase TAG): a normal LIST + WATCH; once the cache has synced it prints "synced" and
//     the driver starts writing. Handler calls for objects annotated bench/phase=TAG are counted,
//     each with the Pod's name and the time of the call (Unix seconds): the driver, which knows when
//     it sent each write and when the server answered, makes the latencies. Timed from the sync to
//     the -n-th counted call.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlscope/ctrlscope/go/bench/internal/benchkit"
)

type realFlags struct {
	kubeconfig, namespace, contentType, replayFrom, phase string
	n                                                     int
}

// contentTypes are -content-type's values: what the rest.Config sends and asks for.
var contentTypes = map[string][2]string{
	"json":     {"application/json", "application/json"},
	"protobuf": {"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"},
}

func runReal(f realFlags) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		benchkit.Fail(err)
	}
	ct, ok := contentTypes[f.contentType]
	if !ok {
		benchkit.Fail(fmt.Errorf("-content-type %q: json or protobuf", f.contentType))
	}
	cfg.ContentType, cfg.AcceptContentTypes, cfg.QPS = ct[0], ct[1], -1
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		benchkit.Fail(err)
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", f.namespace, fields.Everything())
	if f.replayFrom != "" {
		empty := func() (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: f.replayFrom}}, nil
		}
		lw.ListFunc = func(metav1.ListOptions) (runtime.Object, error) { return empty() }
		lw.ListWithContextFunc = func(context.Context, metav1.ListOptions) (runtime.Object, error) { return empty() }
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench"})
	counter := benchkit.NewCounter(f.n)
	// Only the handler goroutine appends: client-go calls a handler's functions one at a time.
	seenNames, seenAt := make([]string, 0, f.n), make([]float64, 0, f.n)
	handle := func(obj any) {
		pod := obj.(*corev1.Pod)
		if f.phase != "" {
			if pod.Annotations["bench/phase"] != f.phase {
				return
			}
			seenNames, seenAt = append(seenNames, pod.Name), append(seenAt, float64(time.Now().UnixNano())/1e9)
		}
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			panic(err)
		}
		q.Add(key)
		counter.Hit()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, UpdateFunc: func(_, obj any) { handle(obj) }}); err != nil {
		benchkit.Fail(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	cpu0, start := benchkit.CPUSeconds(), time.Now()
	go inf.Run(stop)
	if f.phase != "" {
		if !cache.WaitForCacheSync(stop, inf.HasSynced) {
			benchkit.Fail(fmt.Errorf("cache did not sync"))
		}
		cpu0, start = benchkit.CPUSeconds(), time.Now()
		fmt.Println("synced")
	}
	select {
	case <-counter.Done:
	case <-time.After(10 * time.Minute):
		benchkit.Fail(fmt.Errorf("timeout: %d of %d handler calls", counter.N(), f.n))
	}
	cpu := benchkit.CPUSeconds() - cpu0
	at := counter.At.Load()
	q.ShutDown()
	benchkit.Emit("plain", map[string]any{
		"events": f.n, "elapsed_s": time.Duration(at - start.UnixNano()).Seconds(), "cpu_s": cpu,
		"t_last": float64(at) / 1e9, "seen_names": seenNames, "seen_at": seenAt,
		"cached": len(inf.GetStore().ListKeys()),
	})
}
