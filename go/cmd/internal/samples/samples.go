// Package samples holds what the sample programs share and a user's program has its own way of
// doing: loading the cluster's config, and (for the conformance twins, which are not read as
// examples) the ctrlscope wiring that deployment-informer spells out line by line.
package samples

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/otel"
)

// RestConfig loads kubeconfig, or the pod's in-cluster config when kubeconfig is "".
func RestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// Observed loads kubeconfig (RestConfig) and wires ctrlscope to it: a publisher from the
// environment, started; the worker's telemetry, with OpenTelemetry spans exported beside it when
// an OTLP endpoint is configured (otel.FromEnvironment); when readOnly, the write guard (writes
// refused anywhere but the simulated cluster); and every request through the returned config
// observed. stop flushes and stops the publisher and the span export.
func Observed(kubeconfig, worker string, readOnly bool) (cfg *rest.Config, tel *ctrlscope.Telemetry, stop func(), err error) {
	if cfg, err = RestConfig(kubeconfig); err != nil {
		return nil, nil, nil, err
	}
	pub, err := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	sink, err := otel.FromEnvironment(context.Background(), worker)
	if err != nil {
		return nil, nil, nil, err
	}
	opts := ctrlscope.TelemetryOptions{}
	if sink != nil { // a nil *Sink in the interface would be a hook
		opts.Hook = sink
	}
	pub.Start()
	stop = func() {
		pub.Stop(5 * time.Second)
		if sink != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := sink.Shutdown(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "otel: flushing spans:", err)
			}
			cancel()
		}
	}
	tel = ctrlscope.NewTelemetry(pub, worker, opts)
	if readOnly {
		if cfg, err = clientgo.GuardWrites(tel, cfg, false); err != nil {
			stop()
			return nil, nil, nil, err
		}
	}
	return clientgo.WrapConfig(tel, cfg), tel, stop, nil
}
