package ctrlscope

// A Redis Cluster as the publisher's Redis (protocol/redis-layout.md, "Where to connect" and
// "Redis Cluster"; controllers/telemetry/redis_config.py is the Python side):
//
//   - REDIS_CLUSTER_NODES=host:port,host:port (port 6379 when left out; IPv6 in brackets), or a
//     redis+cluster://host:port,host:port[/0] URL: seed nodes; go-redis' ClusterClient learns the
//     other nodes and which master serves which of the 16,384 slots from them.
//   - A cluster URL selects the cluster key layout: every key frame.lua touches for a topic T is
//     tagged {T}, so that one frame (one script call, which Redis Cluster runs only when all its
//     keys share a slot) stays atomic while the topics spread over the shards; the epoch is per
//     topic ({prefix}epoch:{T}), and the topic set is SADDed by the publisher, not by the script.
//   - The prefix must not contain { or }: its braces would become every key's hash tag.

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// EnvRedisClusterNodes names a Redis Cluster's seed nodes; it wins over REDIS_URL.
const EnvRedisClusterNodes = "REDIS_CLUSTER_NODES"

// ClusterScheme is the scheme of a cluster URL.
const ClusterScheme = "redis+cluster"

// DefaultClusterPort is a cluster node's port when an address leaves it out.
const DefaultClusterPort = 6379

// ClusterTarget is a parsed cluster URL: its seed nodes, host:port each, in the order given.
type ClusterTarget struct{ Nodes []string }

// URL is the canonical cluster URL: every seed with its port, no path.
func (t ClusterTarget) URL() string { return ClusterScheme + "://" + strings.Join(t.Nodes, ",") }

// IsClusterURL says whether u names a Redis Cluster (and so the cluster key layout).
func IsClusterURL(u string) bool { return strings.HasPrefix(u, ClusterScheme+"://") }

// ParseClusterNodes reads "host:port,host:port" (port 6379 when left out; IPv6 as [::1]:7000).
// what names the setting in errors.
func ParseClusterNodes(raw, what string) ([]string, error) {
	return parseHosts(raw, what, DefaultClusterPort, "node address", "redis-0:6379,redis-1:6379,redis-2:6379")
}

// ParseClusterURL reads redis+cluster://host:port,host:port[/0].
func ParseClusterURL(u string) (ClusterTarget, error) {
	head := ClusterScheme + "://"
	if !IsClusterURL(u) {
		return ClusterTarget{}, fmt.Errorf("%q is not a %s... URL", redactURL(u), head)
	}
	netloc, path, _ := strings.Cut(u[len(head):], "/")
	if strings.Contains(netloc, "@") || strings.ContainsAny(u, "?#") {
		return ClusterTarget{}, fmt.Errorf("REDIS_URL: a %s URL takes no password or options: set %s instead",
			head, EnvRedisPassword)
	}
	if p := strings.Trim(path, "/"); p != "" && p != "0" {
		return ClusterTarget{}, fmt.Errorf("REDIS_URL: a Redis Cluster has only database 0; %q names another", u)
	}
	nodes, err := ParseClusterNodes(netloc, "REDIS_URL")
	if err != nil {
		return ClusterTarget{}, err
	}
	return ClusterTarget{Nodes: nodes}, nil
}

// CheckPrefix refuses a prefix with a brace for a cluster URL: the braces would be every key's hash
// tag and put all topics into one slot.
func CheckPrefix(prefix, u string) error {
	if IsClusterURL(u) && strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%s=%q: with a Redis Cluster the prefix must not contain '{' or '}' (the topic is "+
			"the keys' hash tag)", EnvPrefix, prefix)
	}
	return nil
}

// ClusterKeys are a topic's keys in the cluster layout (all in the topic's slot but Topics).
type ClusterKeys struct{ Stream, Snapshot, Pubseq, Epoch, Topics string }

// ClusterKeysOf is topic's keys under prefix in the cluster layout.
func ClusterKeysOf(prefix, topic string) ClusterKeys {
	tag := "{" + topic + "}"
	return ClusterKeys{Stream: prefix + "stream:" + tag, Snapshot: prefix + "snap:" + tag,
		Pubseq: prefix + "pubseq:" + tag, Epoch: prefix + "epoch:" + tag, Topics: prefix + "topics"}
}

// ClusterSlot is the slot of key: CRC16 (XMODEM) of its hash tag -- the part between the first {
// and the next }, when that is not empty -- or of the whole key, mod 16384.
func ClusterSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// parseHosts reads "host:port,host:port" for Sentinels and cluster nodes (a port may be left out:
// defaultPort; IPv6 in brackets). what names the setting in errors, noun one address.
func parseHosts(raw, what string, defaultPort int, noun, example string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, item := range strings.Split(raw, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var host, port string
		if strings.HasPrefix(item, "[") {
			end := strings.Index(item, "]")
			rest := ""
			if end > 0 {
				rest = item[end+1:]
			}
			if end < 0 || (rest != "" && !strings.HasPrefix(rest, ":")) {
				return nil, fmt.Errorf("%s: %q is not [ipv6]:port", what, item)
			}
			host, port = item[1:end], strings.TrimPrefix(rest, ":")
		} else if strings.Count(item, ":") > 1 {
			return nil, fmt.Errorf("%s: %q: write an IPv6 address in brackets, [::1]:%d", what, item, defaultPort)
		} else {
			host, port, _ = strings.Cut(item, ":")
		}
		if host == "" || strings.ContainsAny(host, "/@?# \t") {
			return nil, fmt.Errorf("%s: %q is not host:port", what, item)
		}
		n := defaultPort
		if port != "" {
			var err error
			if n, err = strconv.Atoi(port); err != nil {
				return nil, fmt.Errorf("%s: the port of %q is not a number", what, item)
			}
		}
		if n <= 0 || n >= 65536 {
			return nil, fmt.Errorf("%s: the port of %q is out of range", what, item)
		}
		addr := net.JoinHostPort(host, strconv.Itoa(n))
		if seen[addr] {
			return nil, fmt.Errorf("%s: a %s is listed twice", what, noun)
		}
		seen[addr] = true
		out = append(out, addr)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no %s; expected host:port,host:port (e.g. %s)", what, noun, example)
	}
	return out, nil
}
