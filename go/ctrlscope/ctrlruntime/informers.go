package ctrlruntime

import (
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

// observeInformer hands the cache's informer to the client-go observation (its list, watch and
// handler records, the cache as state; with clientgo.WrapConfig on the manager's config also the
// exact LIST/WATCH requests). It must run before the informer starts, which is why Watch creates
// the informer while the controllers are set up, before mgr.Start.
func observeInformer(tel *ctrlscope.Telemetry, name string, inf toolscache.SharedIndexInformer) (*clientgo.Informer, error) {
	return clientgo.ObserveInformer(tel, name, inf)
}
