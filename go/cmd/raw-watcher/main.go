// Command raw-watcher is the watch loop people write before they meet informers --
// clientset.AppsV1().Deployments(ns).Watch(...) and a for loop over its ResultChan -- beside the
// source document's informer program (go/examples/informer, go/cmd/deployment-informer), observed
// by ctrlscope. It is the Go twin of controllers/examples/raw_watcher.py; the scenario
// watcher-vs-informer measures the Python one against an informer.
//
// Per event the loop GETs the Deployment the event names: it has no cache, and code that acts on an
// object reads it as it is now. Each GET is a request the API server serves; an informer's handler
// reads its lister instead.
//
// When the watch ends -- the API server closes every watch after its timeout (TimeoutSeconds, or
// the server's own 30-60 minutes), a connection breaks (client-go's StreamWatcher then closes the
// channel as if the server had) -- each variant does what people do. Each is a function below, a
// named choice, not a hidden flag:
//
//   - stopsOnEnd: range over ResultChan and return when it closes. The program keeps running and
//     watches nothing; nothing fails, nothing is logged.
//   - restartFromEmpty: the same in a for loop, watching again with ResourceVersion "": every
//     existing Deployment arrives as ADDED again, and one deleted while no watch was open is never
//     seen.
//   - restartFromLast: watching again from the last ResourceVersion it saw, so a dropped connection
//     loses nothing -- until the server has compacted that version away and sends 410 Gone. It does
//     not handle 410: like any error it waits a second and tries the same ResourceVersion again.
//
// None of them relists: that is what client-go's Reflector adds (LIST, WATCH from the list's
// resourceVersion, LIST again on 410) with a cache the handlers read.
//
// The lines marked "ctrlscope:" report the loop to the dashboard (protocol v1.6 watcher): each
// watch it opens, each event, how each stream ended, each GET, and whether it still watches at all.
//
//	raw-watcher --variant stops-on-end [--kubeconfig PATH] [--namespace default] [--worker-name NAME]
//
// REDIS_URL (redis://127.0.0.1:6379/0) and CTRLSCOPE_PREFIX ("ctrlscope:") say where the
// dashboard reads. Without --kubeconfig the program runs in a pod (in-cluster config).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlscope/ctrlscope/go/cmd/internal/samples"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

const (
	resource     = "apps/v1/deployments"
	watcherName  = "deployments"
	retryDelay   = time.Second
	defaultLimit = 300 // each watch's TimeoutSeconds
)

// loop is one variant: it watches until it returns.
type loop func(ctx context.Context, w *watcher) error

var variants = map[ctrlscope.WatcherVariant]loop{
	ctrlscope.WatcherVariantStopsOnEnd:       stopsOnEnd,
	ctrlscope.WatcherVariantRestartFromEmpty: restartFromEmpty,
	ctrlscope.WatcherVariantRestartFromLast:  restartFromLast,
}

// watcher is what every variant needs: the clientset, the namespace, the watch's timeout, and
// (ctrlscope:) the telemetry it reports to.
type watcher struct {
	clientset *kubernetes.Clientset
	namespace string
	timeout   int64
	tel       *ctrlscope.Telemetry
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig (empty: in-cluster config)")
	variant := flag.String("variant", "", "stops-on-end, restart-from-empty or restart-from-last")
	namespace := flag.String("namespace", "default", "the namespace whose Deployments it watches")
	workerName := flag.String("worker-name", "", "the worker's name on the dashboard (default: go-raw-watcher-VARIANT)")
	timeout := flag.Int64("timeout-seconds", defaultLimit, "each watch's TimeoutSeconds")
	flag.Parse()
	if _, ok := variants[ctrlscope.WatcherVariant(*variant)]; !ok {
		fmt.Fprintln(os.Stderr, "raw-watcher: --variant must be stops-on-end, restart-from-empty or restart-from-last")
		os.Exit(2)
	}
	if *workerName == "" {
		*workerName = "go-raw-watcher-" + *variant
	}
	if err := run(*kubeconfig, ctrlscope.WatcherVariant(*variant), *namespace, *workerName, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "raw-watcher:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, variant ctrlscope.WatcherVariant, namespace, workerName string, timeout int64) error {
	config, err := samples.RestConfig(kubeconfig)
	if err != nil {
		return err
	}
	// The API server counts requests by User-Agent: this loop's are its own.
	config.UserAgent = "raw-watcher/" + string(variant) + " (go)"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}

	// ctrlscope: a publisher to the dashboard's Redis, the worker's telemetry, and the watcher.
	pub, err := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{})
	if err != nil {
		return err
	}
	pub.Start()
	defer pub.Stop(5 * time.Second)
	tel := ctrlscope.NewTelemetry(pub, workerName, ctrlscope.TelemetryOptions{})
	tel.Watcher(watcherName, resource, namespace, variant)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// ctrlscope: a sample a second: the worker's heartbeat and the watcher's counters.
	sampler, err := ctrlscope.NewMetricsSampler(prometheus.NewRegistry(), pub, tel.MetricsTopic,
		ctrlscope.MetricsSamplerOptions{Stages: tel.Stages})
	if err != nil {
		return err
	}
	sampler.Start(ctx)
	defer sampler.Stop(time.Second)

	w := &watcher{clientset: clientset, namespace: namespace, timeout: timeout, tel: tel}
	go func() {
		tel.WatcherState(watcherName, ctrlscope.ReflectorStateWatching) // ctrlscope
		if err := variants[variant](ctx, w); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "raw-watcher: the watch loop died:", err)
		}
		tel.WatcherState(watcherName, ctrlscope.ReflectorStateStopped) // ctrlscope: the loop is over
	}()
	// The program goes on with whatever else it does; whether its loop still watches, it cannot tell.
	<-ctx.Done()
	return nil
}

// watchOnce opens one watch from resourceVersion and handles its events until the channel closes
// or an Error event arrives (returned as an error). It returns the last resourceVersion it saw.
func (w *watcher) watchOnce(ctx context.Context, resourceVersion string) (string, error) {
	w.tel.WatcherWatchStart(watcherName, resourceVersion) // ctrlscope
	stream, err := w.clientset.AppsV1().Deployments(w.namespace).Watch(ctx, metav1.ListOptions{
		ResourceVersion: resourceVersion, TimeoutSeconds: &w.timeout})
	if err != nil {
		w.ended(err) // ctrlscope
		return resourceVersion, err
	}
	defer stream.Stop()
	for event := range stream.ResultChan() {
		if event.Type == watch.Error {
			err := apierrors.FromObject(event.Object)
			w.ended(err) // ctrlscope
			return resourceVersion, err
		}
		deployment, ok := event.Object.(*appsv1.Deployment)
		if !ok {
			continue
		}
		resourceVersion = deployment.ResourceVersion
		w.tel.WatcherEvent(watcherName, ctrlscope.WatchEventType(event.Type), // ctrlscope
			deployment.Namespace+"/"+deployment.Name, deployment.ResourceVersion)
		w.handle(ctx, event.Type, deployment)
	}
	w.tel.WatcherWatchEnd(watcherName, ctrlscope.WatchEndReasonClosed, "") // ctrlscope
	return resourceVersion, nil
}

// handle is what the program does with one event: print it, reading the Deployment as it is now --
// a GET, since there is no cache to read it from. A deleted one cannot be read: it is only printed.
func (w *watcher) handle(ctx context.Context, eventType watch.EventType, d *appsv1.Deployment) {
	if eventType == watch.Deleted {
		fmt.Println("deleted:", d.Namespace+"/"+d.Name)
		return
	}
	start := time.Now()
	current, err := w.clientset.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	// ctrlscope: the GET, timed, with its status.
	w.tel.WatcherRead(watcherName, d.Namespace+"/"+d.Name,
		"/apis/apps/v1/namespaces/"+d.Namespace+"/deployments/"+d.Name, statusCode(err), time.Since(start))
	if err != nil {
		fmt.Printf("%s: %s/%s (could not read it: %v)\n", eventType, d.Namespace, d.Name, err)
		return
	}
	fmt.Printf("%s: %s/%s, %d replicas\n", eventType, d.Namespace, d.Name, *current.Spec.Replicas)
}

// stopsOnEnd watches once and returns when the server ends the watch.
func stopsOnEnd(ctx context.Context, w *watcher) error {
	_, err := w.watchOnce(ctx, "")
	// The channel is closed: nothing watches any more, and nothing says so.
	return err
}

// restartFromEmpty watches again from "" whenever a watch ends (after an error, a second later).
func restartFromEmpty(ctx context.Context, w *watcher) error {
	for ctx.Err() == nil {
		if _, err := w.watchOnce(ctx, ""); err != nil {
			fmt.Fprintln(os.Stderr, "watch failed:", err, "- watching again in", retryDelay)
			sleep(ctx, retryDelay)
		}
	}
	return ctx.Err()
}

// restartFromLast watches again from the last resourceVersion it saw; a 410 is one more error.
func restartFromLast(ctx context.Context, w *watcher) error {
	resourceVersion := ""
	for ctx.Err() == nil {
		var err error
		if resourceVersion, err = w.watchOnce(ctx, resourceVersion); err != nil {
			fmt.Fprintln(os.Stderr, "watch failed:", err, "- watching again from", resourceVersion, "in", retryDelay)
			sleep(ctx, retryDelay)
		}
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// ended reports (ctrlscope:) how a watch ended with err: 410 Gone is "expired".
func (w *watcher) ended(err error) {
	reason := ctrlscope.WatchEndReasonError
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		reason = ctrlscope.WatchEndReasonExpired
	}
	w.tel.WatcherWatchEnd(watcherName, reason, err.Error())
}

// statusCode is a request's HTTP status from its error: 200 without one, 0 when no answer came.
func statusCode(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return int(status.Status().Code)
	}
	return 0
}
