package clientgo

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultKey names a queue item the way informers key objects ("namespace/name", or "name" when
// cluster-scoped): strings are themselves, a types.NamespacedName is namespace/name, anything else
// its String or fmt form (controller-runtime's reconcile.Request gets its own, see ctrlruntime).
func DefaultKey[T comparable](item T) string {
	switch v := any(item).(type) {
	case string:
		return v
	case types.NamespacedName:
		return namespacedKey(v)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(item)
}

func namespacedKey(n types.NamespacedName) string {
	if n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "/" + n.Name
}
