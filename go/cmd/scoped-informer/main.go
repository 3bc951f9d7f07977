// Command scoped-informer is client-go's informer narrowed the ways big clusters need: a
// metadata-only informer (metadatainformer: PartialObjectMetadata through the
// as=PartialObjectMetadata Accept negotiation) in one namespace, with a label selector
// (WithTweakListOptions) and controller-runtime's TransformStripManagedFields, observed by ctrlscope.
//
// Each handler call is printed to stdout as one JSON line ({"handler": "add", "name": ...,
// "kind": ..., "labels": {...}, "managedFields": 0}) and the line "synced" once the cache is: the
// twin of what tests/golang/test_scoped_informers.py runs in ctrlscope's Python runtime against the
// same simulator, so the two can be compared call by call.
//
//	scoped-informer [--kubeconfig PATH] [--worker-name go-scoped] [--namespace NS] [--selector SEL]
//	                [--resource pods] [--strip-managed-fields=true]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/ctrlscope/ctrlscope/go/cmd/internal/samples"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig (empty: in-cluster config)")
	workerName := flag.String("worker-name", "go-scoped", "the worker's name on the dashboard")
	namespace := flag.String("namespace", "", "watch one namespace (empty: all)")
	selector := flag.String("selector", "", "label selector for LIST and WATCH (empty: everything)")
	resource := flag.String("resource", "pods", "the core/v1 resource to watch")
	strip := flag.Bool("strip-managed-fields", true, "SetTransform(controller-runtime's TransformStripManagedFields())")
	flag.Parse()
	if err := run(*kubeconfig, *workerName, *namespace, *selector, *resource, *strip); err != nil {
		fmt.Fprintln(os.Stderr, "scoped-informer:", err)
		os.Exit(1)
	}
}

// printer writes one JSON line per call; handler calls come from one goroutine, "synced" from
// another.
type printer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (p *printer) line(v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.enc.Encode(v)
}

func (p *printer) call(handler string, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		p.line(map[string]any{"handler": handler, "error": fmt.Sprintf("unexpected object %T", obj)})
		return
	}
	p.line(map[string]any{"handler": handler, "name": m.Name, "namespace": m.Namespace, "kind": m.Kind,
		"apiVersion": m.APIVersion, "labels": m.Labels, "managedFields": len(m.ManagedFields),
		"resourceVersion": m.ResourceVersion})
}

func run(kubeconfig, workerName, namespace, selector, resource string, strip bool) error {
	// ctrlscope: a publisher, the worker's telemetry, read-only, every request observed.
	config, tel, stopPublisher, err := samples.Observed(kubeconfig, workerName, true)
	if err != nil {
		return err
	}
	defer stopPublisher()

	client, err := metadata.NewForConfig(config)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: resource}
	factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	informer := factory.ForResource(gvr).Informer()
	opts := []clientgo.InformerOption{clientgo.WithResource(gvr), clientgo.WithNamespace(namespace),
		clientgo.WithSelectors(selector, ""), clientgo.WithMetadataOnly()}
	if strip {
		if err := informer.SetTransform(crcache.TransformStripManagedFields()); err != nil {
			return err
		}
		opts = append(opts, clientgo.WithTransform("strip managedFields"))
	}
	// The informer's dashboard name: the kind's ("v1/Pod" for pods).
	kind := map[string]string{"pods": "Pod", "configmaps": "ConfigMap", "services": "Service"}[resource]
	if kind == "" {
		return fmt.Errorf("--resource %q: one of pods, configmaps, services", resource)
	}
	name := clientgo.InformerName(gvr.GroupVersion().WithKind(kind))
	if _, err := clientgo.ObserveInformer(tel, name, informer, opts...); err != nil {
		return err
	}
	out := &printer{enc: json.NewEncoder(os.Stdout)}
	if _, err := informer.AddEventHandler(clientgo.HandlerFuncs(tel, name, "print", cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { out.call("add", obj) },
		UpdateFunc: func(_, obj any) { out.call("update", obj) },
		DeleteFunc: func(obj any) { out.call("delete", obj) },
	})); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	factory.Start(ctx.Done())
	for gvr, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("%s never synced", gvr)
		}
	}
	out.line("synced")
	<-ctx.Done()
	factory.Shutdown()
	return nil
}
