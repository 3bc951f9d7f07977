package ctrlscope

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
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
	Errors []struct {
		Env      map[string]string `json:"env"`
		Contains []string          `json:"contains"`
	} `json:"errors"`
	Keys []struct {
		Prefix, Topic, Stream, Snapshot, Pubseq, Epoch, Topics string
		Slot                                                   int
	} `json:"keys"`
}

func loadRedisClusterVector(t *testing.T) redisClusterVector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "config", "redis-cluster-env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v redisClusterVector
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
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
		var want []string
		for _, n := range c.Cluster.Nodes {
			want = append(want, net.JoinHostPort(n[0].(string), strconv.Itoa(int(n[1].(float64)))))
		}
		if strings.Join(target.Nodes, ",") != strings.Join(want, ",") {
			t.Errorf("%q parsed as %v; want %v", got, target.Nodes, want)
		}
	}
}

func TestABadClusterEnvironmentIsAClearError(t *testing.T) {
	for _, c := range loadRedisClusterVector(t).Errors {
		_, err := RedisURLFromEnv(getenvOf(c.Env), DefaultRedisURL)
		if err == nil {
			t.Errorf("env %v: no error", c.Env)
			continue
		}
		for _, part := range c.Contains {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("env %v: error %q does not say %q", c.Env, err, part)
			}
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("env %v: error %q shows the password", c.Env, err)
		}
	}
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
