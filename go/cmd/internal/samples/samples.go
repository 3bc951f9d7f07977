// Package samples holds what the sample programs share and a user's program has its own way of
// doing: loading the cluster's config.
package samples

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RestConfig loads kubeconfig, or the pod's in-cluster config when kubeconfig is "".
func RestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}
