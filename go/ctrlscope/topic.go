package ctrlscope

import (
	"fmt"
	"strings"
)

// TopicPart makes a user-given name (a worker, an informer, a queue) one topic segment: every
// character outside A-Z a-z 0-9 : . _ @ - becomes "_", at most 120 characters, "_" if empty
// (protocol/README.md §2; controllers/schema.py topic_part).
func TopicPart(name string) string {
	var b strings.Builder
	n := 0
	for _, c := range name {
		if n == 120 {
			break
		}
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9',
			c == ':', c == '.', c == '_', c == '@', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
		n++
	}
	if n == 0 {
		return "_"
	}
	return b.String()
}

// WorkerTopic is w/{worker}/{kind}[/{name}] from raw names; named kinds need a name, others none.
func WorkerTopic(worker string, kind TopicKind, name string) (string, error) {
	base := WorkerPrefix + TopicPart(worker) + "/" + string(kind)
	if namedKinds[kind] {
		if name == "" {
			return "", fmt.Errorf("ctrlscope: a %s topic needs a name", kind)
		}
		return base + "/" + TopicPart(name), nil
	}
	if name != "" {
		return "", fmt.Errorf("ctrlscope: a %s topic has no name", kind)
	}
	return base, nil
}

func mustTopic(worker string, kind TopicKind, name string) string {
	t, err := WorkerTopic(worker, kind, name)
	if err != nil {
		panic(err)
	}
	return t
}
