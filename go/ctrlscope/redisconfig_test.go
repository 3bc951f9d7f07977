package ctrlscope

// Where a publisher connects (redisconfig.go): the protocol's config vector, which the Python side
// runs too (tests/protocol/test_config_vectors.py), and the client each URL makes.

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type redisEnvVector struct {
	OK []struct {
		Env      map[string]string `json:"env"`
		Default  string            `json:"default"`
		URL      string            `json:"url"`
		Sentinel *struct {
			Sentinels  [][]any `json:"sentinels"`
			MasterName string  `json:"master_name"`
			DB         int     `json:"db"`
		} `json:"sentinel"`
	} `json:"ok"`
	Errors []envErrorCase `json:"errors"`
}

// envErrorCase is one of a config vector's "errors" (redis-env.json, redis-cluster-env.json): an
// environment and what its error must say.
type envErrorCase struct {
	Env      map[string]string `json:"env"`
	Contains []string          `json:"contains"`
}

// loadConfigVector decodes protocol/vectors/config/<name> into v.
func loadConfigVector(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "config", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}

func loadRedisEnvVector(t *testing.T) redisEnvVector {
	t.Helper()
	var v redisEnvVector
	loadConfigVector(t, "redis-env.json", &v)
	if len(v.OK) == 0 || len(v.Errors) == 0 {
		t.Fatal("protocol/vectors/config/redis-env.json has no cases")
	}
	return v
}

// checkEnvErrors: each bad environment is an error that says what its case says, without the
// password (every vector's passwords contain "secret").
func checkEnvErrors(t *testing.T, cases []envErrorCase) {
	t.Helper()
	for _, c := range cases {
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

// hostPorts is a vector's [host, port] pairs as host:port addresses (net.JoinHostPort).
func hostPorts(pairs [][]any) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, net.JoinHostPort(p[0].(string), strconv.Itoa(int(p[1].(float64)))))
	}
	return out
}

func getenvOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestTheEnvironmentNamesItsRedisAsTheVectorSays(t *testing.T) {
	for _, c := range loadRedisEnvVector(t).OK {
		got, err := RedisURLFromEnv(getenvOf(c.Env), c.Default)
		if err != nil || got != c.URL {
			t.Errorf("env %v: got %q, %v; want %q", c.Env, got, err, c.URL)
			continue
		}
		if c.Sentinel == nil {
			if strings.HasPrefix(got, SentinelScheme+"://") {
				t.Errorf("%q parsed as a Sentinel URL", got)
			}
			continue
		}
		target, err := ParseSentinelURL(got)
		if err != nil {
			t.Errorf("%q: %v", got, err)
			continue
		}
		want := hostPorts(c.Sentinel.Sentinels)
		if strings.Join(target.Sentinels, ",") != strings.Join(want, ",") || target.MasterName != c.Sentinel.MasterName ||
			target.DB != c.Sentinel.DB {
			t.Errorf("%q parsed as %+v; want %v, %q, db %d", got, target, want, c.Sentinel.MasterName, c.Sentinel.DB)
		}
	}
}

func TestABadEnvironmentIsAClearErrorThatShowsNoPassword(t *testing.T) {
	checkEnvErrors(t, loadRedisEnvVector(t).Errors)
}

func TestNewPublisherFollowsSentinelsAndTakesPasswordsFromTheEnvironment(t *testing.T) {
	t.Setenv(EnvRedisPassword, "data-pw")
	t.Setenv(EnvRedisSentinelPassword, "sentinel-pw")
	p, err := NewPublisher("redis+sentinel://127.0.0.1:1,[::1]:2/ctrlscope/3", PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(0)
	o := p.Redis().Options()
	if o.Password != "data-pw" || o.DB != 3 || o.MaxRetries > 0 || !strings.HasPrefix(o.Addr, "FailoverClient") {
		t.Fatalf("a Sentinel URL made %+v", o)
	}
	p2, err := NewPublisher("redis://127.0.0.1:6399/2", PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Stop(0)
	if o := p2.Redis().Options(); o.Password != "data-pw" || o.DB != 2 {
		t.Fatalf("REDIS_PASSWORD is the password of a URL without one: %+v", o)
	}
	p3, err := NewPublisher("redis://:url-pw@127.0.0.1:6399/0", PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p3.Stop(0)
	if o := p3.Redis().Options(); o.Password != "url-pw" {
		t.Fatalf("the URL's password wins: %+v", o)
	}
	if _, err := NewPublisher("redis://:s3cret@h:notaport/0", PublisherOptions{}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a bad URL: %v (an error, without its password)", err)
	}
	if _, err := NewPublisher("redis+sentinel://a:1/my master", PublisherOptions{}); err == nil ||
		!strings.Contains(err.Error(), "not a Sentinel master name") {
		t.Fatalf("a bad Sentinel URL: %v", err)
	}
}

func TestPublisherFromEnvPrefersTheSentinels(t *testing.T) {
	t.Setenv(EnvRedisURL, "redis://redis-0:6379/0")
	t.Setenv(EnvRedisSentinels, "127.0.0.1:26399")
	t.Setenv(EnvRedisMasterName, "ctrlscope")
	p, err := PublisherFromEnv(PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(0)
	if !strings.HasPrefix(p.Redis().Options().Addr, "FailoverClient") {
		t.Fatalf("REDIS_SENTINELS set: got a client for %s", p.Redis().Options().Addr)
	}
	t.Setenv(EnvRedisMasterName, "")
	if _, err := PublisherFromEnv(PublisherOptions{}); err == nil || !strings.Contains(err.Error(), "REDIS_MASTER_NAME") {
		t.Fatalf("REDIS_SENTINELS without a master name: %v", err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:s3cret@h:6379/0":     "redis://:***@h:6379/0",
		"redis://user:s3cret@h:6379/0": "redis://user:***@h:6379/0",
		"redis://h:6379/0":             "redis://h:6379/0",
		"redis://user@h":               "redis://user@h",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
