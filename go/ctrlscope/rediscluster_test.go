package ctrlscope

import (
	"strings"
	"testing"
)

// redisClusterVector is protocol/vectors/config/redis-cluster-env.json.
type redisClusterVector struct {
	OK []struct {
		Env     map[string]string `json:"env"`
		URL     string            `json:"url"`
		Cluster *struct {
			Nodes [][]any `json:"nodes"`
		} `json:"cluster"`
	} `json:"ok"`
	Errors []envErrorCase `json:"errors"`
	Keys   []struct {
		Prefix, Topic, Stream, Snapshot, Pubseq, Epoch, Topics string
		Slot                                                   int
	} `json:"keys"`
}

func loadRedisClusterVector(t *testing.T) redisClusterVector {
	t.Helper()
	var v redisClusterVector
	loadConfigVector(t, "redis-cluster-env.json", &v)
	if len(v.OK) == 0 || len(v.Errors) == 0 || len(v.Keys) == 0 {
		t.Fatal("protocol/vectors/config/redis-cluster-env.json has no cases")
	}
	return v
}

func TestTheEnvironmentNamesItsClusterAsTheVectorSays(t *testing.T) {
	for _, c := range loadRedisClusterVector(t).OK {
		got, err := RedisURLFromEnv(getenvOf(c.Env), DefaultRedisURL)
		if err != nil || got != c.URL {
			t.Errorf("env %v: got %q, %v; want %q", c.Env, got, err, c.URL)
			continue
		}
		if c.Cluster == nil {
			if IsClusterURL(got) {
				t.Errorf("%q parsed as a cluster URL", got)
			}
			continue
		}
		target, err := ParseClusterURL(got)
		if err != nil {
			t.Errorf("%q: %v", got, err)
			continue
		}
		want := hostPorts(c.Cluster.Nodes)
		if strings.Join(target.Nodes, ",") != strings.Join(want, ",") {
			t.Errorf("%q parsed as %v; want %v", got, target.Nodes, want)
		}
	}
}

func TestABadClusterEnvironmentIsAClearError(t *testing.T) {
	checkEnvErrors(t, loadRedisClusterVector(t).Errors)
}

func TestClusterKeysAndSlotsAreTheVectors(t *testing.T) {
	for _, c := range loadRedisClusterVector(t).Keys {
		k := ClusterKeysOf(c.Prefix, c.Topic)
		want := ClusterKeys{Stream: c.Stream, Snapshot: c.Snapshot, Pubseq: c.Pubseq, Epoch: c.Epoch, Topics: c.Topics}
		if k != want {
			t.Errorf("%q %q: keys %+v; want %+v", c.Prefix, c.Topic, k, want)
		}
		for _, key := range []string{k.Stream, k.Snapshot, k.Pubseq, k.Epoch} {
			if got := ClusterSlot(key); got != c.Slot {
				t.Errorf("slot of %q = %d; want %d", key, got, c.Slot)
			}
		}
	}
	if got := ClusterSlot("123456789"); got != 0x31C3%16384 { // CRC16/XMODEM's check value
		t.Errorf("ClusterSlot(123456789) = %d", got)
	}
}
