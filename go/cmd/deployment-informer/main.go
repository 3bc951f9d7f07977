// Command deployment-informer is the classic client-go informer program (a SharedInformerFactory
// with a 5-minute resync, a Deployment informer, Add/Update/Delete handlers that print), observed
// by ctrlscope. The lines marked "ctrlscope:" are all a user adds to their own program: a
// Publisher and a Telemetry, WrapConfig around the rest.Config, ObserveInformer on the informer
// before it starts, and HandlerFuncs around the handlers. Everything else is the program as it is
// usually written.
//
//	deployment-informer [--kubeconfig PATH] [--worker-name go-informer] [--namespace NS]
//
// REDIS_URL (redis://127.0.0.1:6379/0) and CTRLSCOPE_PREFIX ("ctrlscope:") say where the
// dashboard reads. Without --kubeconfig the program runs in a pod (in-cluster config).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	v1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlscope/ctrlscope/go/cmd/internal/samples"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig (empty: in-cluster config)")
	workerName := flag.String("worker-name", "go-informer", "the worker's name on the dashboard")
	namespace := flag.String("namespace", "", "watch one namespace (empty: all)")
	flag.Parse()
	if err := run(*kubeconfig, *workerName, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "deployment-informer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, workerName, namespace string) error {
	// Kubernetes 클러스터와 연결 (connect to the cluster)
	config, err := samples.RestConfig(kubeconfig)
	if err != nil {
		return err
	}

	// ctrlscope: a publisher to the dashboard's Redis, and the worker's telemetry.
	pub, err := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{})
	if err != nil {
		return err
	}
	pub.Start()
	defer pub.Stop(5 * time.Second) // flushes what is left
	tel := ctrlscope.NewTelemetry(pub, workerName, ctrlscope.TelemetryOptions{})
	// ctrlscope: this program only reads, so it never needs --allow-writes: read-only anywhere but
	// the simulated cluster.
	if config, err = clientgo.GuardWrites(tel, config, false); err != nil {
		return err
	}
	// ctrlscope: every API request through this config is observed (lists, watches, writes).
	config = clientgo.WrapConfig(tel, config)

	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}

	// Informer Factory 생성 (캐시 유지 시간 5분): the factory, resync every 5 minutes
	resync := 5 * time.Minute
	var opts []informers.SharedInformerOption
	if namespace != "" {
		opts = append(opts, informers.WithNamespace(namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, resync, opts...)

	// Deployment 리소스를 감시하는 Informer 생성: the Deployment informer
	deploymentInformer := factory.Apps().V1().Deployments().Informer()

	// ctrlscope: observe the informer (before it starts): its reflector, cache and watch events.
	informerName := clientgo.InformerName(v1.SchemeGroupVersion.WithKind("Deployment")) // "apps/v1/Deployment"
	observed, err := clientgo.ObserveInformer(tel, informerName, deploymentInformer,
		clientgo.WithResyncPeriod(resync), clientgo.WithNamespace(namespace))
	if err != nil {
		return err
	}

	// 이벤트 핸들러 추가: the event handlers (ctrlscope: wrapped, so each call is a handler record)
	_, err = deploymentInformer.AddEventHandler(clientgo.HandlerFuncs(tel, informerName, "print", cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			deployment := obj.(*v1.Deployment)
			fmt.Println("새로운 Deployment 생성됨:", deployment.Name) // a new Deployment was created
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldDeployment := oldObj.(*v1.Deployment)
			newDeployment := newObj.(*v1.Deployment)
			fmt.Println("Deployment 업데이트됨:", oldDeployment.Name, "→", newDeployment.Name) // updated
		},
		DeleteFunc: func(obj interface{}) {
			// The document asserts *v1.Deployment here, which panics when a relist finds a
			// Deployment gone whose delete the watch missed: client-go then hands over a
			// DeletedFinalStateUnknown tombstone with the last known object.
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			deployment := obj.(*v1.Deployment)
			fmt.Println("Deployment 삭제됨:", deployment.Name) // deleted
		},
	}))
	if err != nil {
		return err
	}

	// Informer 실행: run the informers until SIGINT/SIGTERM
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// ctrlscope: a sample a second: the worker's heartbeat on the dashboard and its pipeline's
	// stage counters (a client-go program registers no controller-runtime metrics).
	sampler, err := ctrlscope.NewMetricsSampler(prometheus.NewRegistry(), pub, tel.MetricsTopic,
		ctrlscope.MetricsSamplerOptions{Stages: tel.Stages})
	if err != nil {
		return err
	}
	sampler.Start(ctx)
	defer sampler.Stop(time.Second)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	// Operator 실행 유지: keep running
	<-ctx.Done()
	factory.Shutdown() // waits for the informers' goroutines to end
	observed.Stopped() // ctrlscope: the reflector's state "stopped"
	return nil
}
