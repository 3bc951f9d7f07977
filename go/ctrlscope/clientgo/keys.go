package clientgo

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// ObjectKey is obj's key in an informer's cache ("namespace/name", or "name" when cluster-scoped;
// a tombstone's own key), "" for anything without metadata.
func ObjectKey(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Key
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return key
}

// DefaultKey names a queue item the way informers key objects ("namespace/name", or "name" when
// cluster-scoped): strings are themselves, a types.NamespacedName is namespace/name, anything else
// its String or fmt form (controller-runtime's reconcile.Request gets its own, see ctrlruntime).
func DefaultKey[T comparable](item T) string {
	switch v := any(item).(type) {
	case string:
		return v
	case types.NamespacedName:
		return NamespacedKey(v)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(item)
}

// NamespacedKey is n as informers key objects: "namespace/name", or "name" when cluster-scoped
// (types.NamespacedName's String gives "/name" there).
func NamespacedKey(n types.NamespacedName) string {
	if n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "/" + n.Name
}
