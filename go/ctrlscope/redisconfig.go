package ctrlscope

// The Redis a publisher writes to, named the way every ctrlscope process names it
// (controllers/telemetry/redis_config.py; README "Redis Sentinel"):
//
//   - redis://[:password@]host:port/db (or rediss://, unix://): one server;
//   - redis+sentinel://host:port,host:port/master-name[/db]: the master the Sentinels at those
//     addresses currently name. The URL carries no password: REDIS_PASSWORD (the servers'
//     requirepass) and REDIS_SENTINEL_PASSWORD (the Sentinels' own) come from the environment.
//
// PublisherFromEnv reads REDIS_SENTINELS (host:port,host:port) with REDIS_MASTER_NAME, which win
// over REDIS_URL, as the dashboard does: a Go controller deployed next to a Sentinel-managed Redis
// publishes where the dashboard reads. go-redis' failover client asks the Sentinels for the master
// whenever it dials and drops connections to a master that was demoted, so a failover is, to the
// publisher, an outage and a reconnect; what the promoted replica may lack is the publisher's to
// find (Publisher.checkApplied).

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables of a Sentinel-managed Redis (the dashboard reads the same ones).
const (
	EnvRedisSentinels        = "REDIS_SENTINELS"
	EnvRedisMasterName       = "REDIS_MASTER_NAME"
	EnvRedisPassword         = "REDIS_PASSWORD"
	EnvRedisSentinelPassword = "REDIS_SENTINEL_PASSWORD"
)

// SentinelScheme is the scheme of a Sentinel URL.
const SentinelScheme = "redis+sentinel"

// DefaultSentinelPort is a Sentinel's port when an address leaves it out.
const DefaultSentinelPort = 26379

// sentinelTimeout bounds each question to one Sentinel, so that a dead one does not hold up the
// question to the next.
const sentinelTimeout = 2 * time.Second

// SentinelTarget is a parsed Sentinel URL.
type SentinelTarget struct {
	Sentinels  []string // host:port each (IPv6 hosts in brackets)
	MasterName string
	DB         int
}

// URL is the target as a redis+sentinel:// URL.
func (t SentinelTarget) URL() string {
	return fmt.Sprintf("%s://%s/%s/%d", SentinelScheme, strings.Join(t.Sentinels, ","), t.MasterName, t.DB)
}

// ParseSentinels reads "host:port,host:port" (a port may be left out: 26379; IPv6 as [::1]:26379).
// what names the setting in errors.
func ParseSentinels(raw, what string) ([]string, error) {
	return parseHosts(raw, what, DefaultSentinelPort, "Sentinel address",
		"redis-sentinel-0:26379,redis-sentinel-1:26379,redis-sentinel-2:26379")
}

func checkMasterName(name, what string) error {
	ok := name != ""
	for _, c := range name {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.", c))
	}
	if !ok {
		return fmt.Errorf("%s: %q is not a Sentinel master name (letters, digits, - _ .; the name in the "+
			"Sentinels' `sentinel monitor NAME ...`)", what, name)
	}
	return nil
}

// ParseSentinelURL reads redis+sentinel://host:port,host:port/master-name[/db].
func ParseSentinelURL(u string) (SentinelTarget, error) {
	head := SentinelScheme + "://"
	if !strings.HasPrefix(u, head) {
		return SentinelTarget{}, fmt.Errorf("%q is not a %s... URL", u, head)
	}
	netloc, path, _ := strings.Cut(u[len(head):], "/")
	if strings.Contains(netloc, "@") || strings.ContainsAny(u, "?#") {
		return SentinelTarget{}, fmt.Errorf("REDIS_URL: a %s URL takes no password or options: set %s and %s instead",
			head, EnvRedisPassword, EnvRedisSentinelPassword)
	}
	sentinels, err := ParseSentinels(netloc, "REDIS_URL")
	if err != nil {
		return SentinelTarget{}, err
	}
	name, dbRaw, _ := strings.Cut(strings.Trim(path, "/"), "/")
	if name, err = url.PathUnescape(name); err != nil {
		return SentinelTarget{}, fmt.Errorf("REDIS_URL: %w", err)
	}
	if err := checkMasterName(name, "REDIS_URL"); err != nil {
		return SentinelTarget{}, err
	}
	db := 0
	if dbRaw != "" {
		if db, err = strconv.Atoi(dbRaw); err != nil || db < 0 {
			return SentinelTarget{}, fmt.Errorf("REDIS_URL: the database in %q is not a number (%sHOSTS/NAME/DB)", u, head)
		}
	}
	return SentinelTarget{Sentinels: sentinels, MasterName: name, DB: db}, nil
}

// RedisURLFromEnv is the Redis URL the environment (getenv, e.g. os.Getenv) configures, or def:
// REDIS_SENTINELS with REDIS_MASTER_NAME give a Sentinel URL and win over REDIS_URL.
//
// REDIS_CLUSTER_NODES gives a cluster URL (rediscluster.go) and wins over both (with REDIS_SENTINELS
// it is an error); with a cluster, CTRLSCOPE_PREFIX must not contain a brace.
func RedisURLFromEnv(getenv func(string) string, def string) (string, error) {
	u := strings.TrimSpace(getenv(EnvRedisURL))
	sentinels := strings.TrimSpace(getenv(EnvRedisSentinels))
	name := strings.TrimSpace(getenv(EnvRedisMasterName))
	if nodes := strings.TrimSpace(getenv(EnvRedisClusterNodes)); nodes != "" {
		if sentinels != "" {
			return "", fmt.Errorf("%s and %s are both set: a Redis Cluster fails over by itself; set one of them",
				EnvRedisClusterNodes, EnvRedisSentinels)
		}
		addrs, err := ParseClusterNodes(nodes, EnvRedisClusterNodes)
		if err != nil {
			return "", err
		}
		target := ClusterTarget{Nodes: addrs}.URL()
		if err := CheckPrefix(getenv(EnvPrefix), target); err != nil {
			return "", err
		}
		return target, nil
	}
	if IsClusterURL(u) {
		t, err := ParseClusterURL(u)
		if err != nil {
			return "", err
		}
		if err := CheckPrefix(getenv(EnvPrefix), t.URL()); err != nil {
			return "", err
		}
		return t.URL(), nil
	}
	if sentinels != "" {
		if name == "" {
			return "", fmt.Errorf("%s is set but %s is not: name the master the Sentinels monitor "+
				"(`sentinel monitor NAME host port quorum`)", EnvRedisSentinels, EnvRedisMasterName)
		}
		addrs, err := ParseSentinels(sentinels, EnvRedisSentinels)
		if err != nil {
			return "", err
		}
		if err := checkMasterName(name, EnvRedisMasterName); err != nil {
			return "", err
		}
		return SentinelTarget{Sentinels: addrs, MasterName: name}.URL(), nil
	}
	if name != "" {
		return "", fmt.Errorf("%s is set without %s (host:port,host:port)", EnvRedisMasterName, EnvRedisSentinels)
	}
	if strings.HasPrefix(u, SentinelScheme+"://") {
		if _, err := ParseSentinelURL(u); err != nil {
			return "", err
		}
	}
	if u != "" {
		return u, nil
	}
	return def, nil
}

// newRedisClient is the publisher's client for a plain or a Sentinel URL: every call bounded
// (a frame pipeline is small, so 5 s without an answer means Redis is gone), no retries of its
// own (the loop retries frames itself, unchanged, with its backoff: so one dial per attempt too),
// reads through pollConn (NewPublisher adds the redial guard).
//
// The probe, for a plain URL, only opens and closes a TCP (or unix) connection to the server: the
// publisher's loop tries it while it is disconnected before it asks go-redis for anything, because
// go-redis' pool logs every failed dial ("redis: connection pool: failed to dial…") on the
// process-wide logger, a line per retry through an outage. For a Sentinel URL it is nil (the
// master's address is the Sentinels' answer; go-redis may log while they have none).
func newRedisClient(u string, getenv func(string) string) (*redis.Client, func(context.Context) error, error) {
	const rw, dialTimeout = 5 * time.Second, 2 * time.Second
	password, sentinelPassword := getenv(EnvRedisPassword), getenv(EnvRedisSentinelPassword)
	if strings.HasPrefix(u, SentinelScheme+"://") {
		t, err := ParseSentinelURL(u)
		if err != nil {
			return nil, nil, fmt.Errorf("ctrlscope: %w", err)
		}
		base := &net.Dialer{Timeout: min(dialTimeout, sentinelTimeout), KeepAlive: 5 * time.Minute}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: t.MasterName, SentinelAddrs: t.Sentinels, DB: t.DB,
			Password: password, SentinelPassword: sentinelPassword,
			ReadTimeout: rw, WriteTimeout: rw, DialTimeout: dialTimeout, MaxRetries: -1, DialerRetries: 1,
			PipelinePoolSize: -1, Dialer: pollDialer(base.DialContext),
		}), nil, nil
	}
	ro, err := redis.ParseURL(u)
	if err != nil {
		// url.Parse's errors quote the whole URL, password and all.
		return nil, nil, fmt.Errorf("ctrlscope: bad Redis URL %q: %s", redactURL(u), strings.ReplaceAll(err.Error(), u, redactURL(u)))
	}
	if ro.Password == "" && password != "" {
		ro.Password = password // a password in the URL wins, as in the dashboard
	}
	ro.ReadTimeout, ro.WriteTimeout, ro.DialTimeout = rw, rw, dialTimeout
	// One pool: the publisher's one flush goroutine needs one connection, and a connection made while
	// it is connected is refused (redialGuard), which a second pool's first dial would be.
	ro.MaxRetries, ro.DialerRetries, ro.PipelinePoolSize = -1, 1, -1
	dial := ro.Dialer
	if dial == nil {
		dial = redis.NewDialer(ro)
	}
	ro.Dialer = pollDialer(dial)
	probe := func(ctx context.Context) error {
		c, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, ro.Network, ro.Addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	return redis.NewClient(ro), probe, nil
}

func pollDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &pollConn{Conn: c}, nil
	}
}

// redactURL is u without its password, for errors and logs.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	netloc, path, _ := strings.Cut(rest, "/")
	creds, host, ok := strings.Cut(netloc, "@")
	if !ok {
		return u
	}
	user, _, hasPass := strings.Cut(creds, ":")
	if hasPass {
		creds = user + ":***"
	}
	out := scheme + "://" + creds + "@" + host
	if path != "" || strings.Contains(rest, "/") {
		out += "/" + path
	}
	return out
}
