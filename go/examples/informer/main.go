// Command informer is the classic client-go program -- a SharedInformerFactory, a Deployment
// informer, Add/Update/Delete handlers that print -- with ctrlscope added: the lines marked
// "ctrlscope:". README's "Go controllers" section shows this very file (a test keeps them equal).
//
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/informer --kubeconfig ~/.kube/config
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

func main() {
	kubeconfig := flag.String("kubeconfig", clientcmd.RecommendedHomeFile, "path to a kubeconfig")
	worker := flag.String("worker-name", "deployment-printer", "the worker's name on the dashboard")
	flag.Parse()
	if err := run(*kubeconfig, *worker); err != nil {
		fmt.Fprintln(os.Stderr, "informer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, worker string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// ctrlscope: a publisher to the dashboard's Redis (REDIS_URL, CTRLSCOPE_PREFIX), this worker's telemetry.
	pub, err := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{})
	if err != nil {
		return err
	}
	pub.Start()
	defer pub.Stop(5 * time.Second) // flushes what is left
	tel := ctrlscope.NewTelemetry(pub, worker, ctrlscope.TelemetryOptions{})
	// ctrlscope: this program only reads: writes are refused anywhere but ctrlscope's simulated cluster.
	if config, err = clientgo.GuardWrites(tel, config, false); err != nil {
		return err
	}
	// ctrlscope: every request through this config is observed (lists, watches, writes).
	config = clientgo.WrapConfig(tel, config)

	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	resync := 5 * time.Minute
	factory := informers.NewSharedInformerFactory(clientset, resync)
	deployments := factory.Apps().V1().Deployments().Informer()

	// ctrlscope: the informer's reflector, cache and watch events, observed before it starts.
	name := clientgo.InformerName(appsv1.SchemeGroupVersion.WithKind("Deployment")) // "apps/v1/Deployment"
	observed, err := clientgo.ObserveInformer(tel, name, deployments, clientgo.WithResyncPeriod(resync))
	if err != nil {
		return err
	}
	// ctrlscope: HandlerFuncs publishes each handler call (duration, outcome; a panic is re-raised).
	_, err = deployments.AddEventHandler(clientgo.HandlerFuncs(tel, name, "print", cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { fmt.Println("added:", obj.(*appsv1.Deployment).Name) },
		UpdateFunc: func(_, obj any) { fmt.Println("updated:", obj.(*appsv1.Deployment).Name) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok { // a delete only a relist saw
				obj = tombstone.Obj
			}
			fmt.Println("deleted:", obj.(*appsv1.Deployment).Name)
		},
	}))
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// ctrlscope: a sample a second of the pipeline's counters: the overview's numbers for this worker.
	sampler, err := ctrlscope.NewMetricsSampler(prometheus.NewRegistry(), pub, tel.MetricsTopic,
		ctrlscope.MetricsSamplerOptions{Stages: tel.Stages})
	if err != nil {
		return err
	}
	sampler.Start(ctx)
	defer sampler.Stop(time.Second)

	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	observed.Stopped() // ctrlscope: the reflector's state "stopped"
	return nil
}
