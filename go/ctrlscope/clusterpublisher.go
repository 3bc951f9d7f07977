package ctrlscope

// The publisher's loop against a Redis Cluster (protocol/redis-layout.md, "Redis Cluster"): what
// differs from one server, and only that.
//
//   - Each topic has its own epoch key ({prefix}epoch:{T}, in the topic's slot), SET NX and read for
//     every known topic at each (re)connect and for a new topic before its first frame; its value is
//     ARGV[1] of the topic's frames. A changed epoch, or a script reply {0, current}, is handled as
//     the v1 epoch change for all topics (the layout allows doing more than the one topic).
//   - frame.lua gets four KEYS (stream, snapshot, epoch, pubseq: one slot); the topic set lives in
//     another slot, so the publisher SADDs a topic after its first confirmed frame on a connection
//     and re-announces every topic at least every clusterAnnounceEvery.
//   - A (re)connect first asks the cluster for its slot map, synchronously, and opens the connection
//     to every master (clusterIdentity), then reads the epochs. go-redis' ReloadState only schedules
//     a reload: after a master was killed, the epoch pipeline that followed it went by the old map to
//     the dead master, and so did every retry until a reload happened to finish in between.
//   - "The same server" is the set of (run_id, master_replid) of every master, read at each
//     (re)connect: a failover or a restarted master changes it. Frames in flight above a topic's
//     stored seq are void only for the topics now served by a master that was not among the masters
//     before (movedTopics: a promoted replica, a restarted master); the other masters' topics retry
//     theirs, and the seq check applies them once.
//   - No connection is dialed behind the publisher's back: the client's dialer refuses every dial
//     while the publisher counts itself connected (a node it had lost, or one a redirect names that
//     it never dialed), so the next round reconnects and checks first. For that each node keeps one
//     pool (no separate pipeline pool: its first dial, or the main pool's first single command
//     after a reconnect made only pipelines, was refused on every round, a reconnect every 2 s), and
//     a dial is tried once (go-redis' default five attempts spend 0.5 s on a dead master per call).
//     go-redis' cluster client follows MOVED/ASK and retries TRYAGAIN/CLUSTERDOWN itself
//     (MaxRedirects), which is safe: a redirected call did nothing.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterAnnounceEvery bounds how long a topic's SADD to the topic set may be lost with its shard.
const clusterAnnounceEvery = 30 * time.Second

// newClusterClient is newRedisClient for a cluster URL: the same timeouts, no retries on a lost
// connection, one pool and one dial attempt per node, and p's dial guard on every node.
func newClusterClient(u string, getenv func(string) string, p *Publisher) (*redis.ClusterClient, error) {
	t, err := ParseClusterURL(u)
	if err != nil {
		return nil, fmt.Errorf("ctrlscope: %w", err)
	}
	const rw, dialTimeout = 5 * time.Second, 2 * time.Second
	base := &net.Dialer{Timeout: dialTimeout, KeepAlive: 5 * time.Minute}
	dial := pollDialer(base.DialContext)
	// The slot map over connections of its own (clusterslots.go): go-redis' background reloads
	// would otherwise share the nodes' one connection with the flush, and their dials be refused.
	p.slots = newSlotSource(t.Nodes, getenv(EnvRedisPassword), dialTimeout, dial)
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: t.Nodes, Password: getenv(EnvRedisPassword),
		ReadTimeout: rw, WriteTimeout: rw, DialTimeout: dialTimeout, MaxRetries: -1, MaxRedirects: 8,
		DialerRetries: 1, PipelinePoolSize: -1, ClusterSlots: p.slots.ClusterSlots,
		// Every command of the publisher has one key, so it needs no request/response policies;
		// with them, go-redis sends a lone command only after its COMMAND table is cached, which
		// it reads from a random node of the map, a replica too, over that node's data pool: the
		// first SADD after a connect dialed a node nobody had checked, and the guard refused it.
		DisableRoutingPolicies: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p.connected.Load() && !p.mayReconnect.Load() {
				return p.refuse(addr), nil // as redialGuard: the call fails, the loop reconnects and checks
			}
			return dial(ctx, network, addr)
		},
	}), nil
}

// clusterEpochs reads every known topic's epoch (SET NX first), after clusterIdentity refreshed the
// slot map. It returns "cluster/N", N counting the reconnects at which some topic's epoch had
// changed: ensureEpoch then handles it as a new epoch.
func (p *Publisher) clusterEpochs(ctx context.Context) (string, error) {
	p.mu.Lock()
	topics := make([]*topicState, 0, len(p.topics))
	for _, t := range p.topics {
		topics = append(topics, t)
	}
	p.mu.Unlock()
	epochs, err := p.readEpochs(ctx, topics)
	if err != nil {
		return "", err
	}
	changed := false
	for i, t := range topics {
		changed = changed || (t.epoch != "" && t.epoch != epochs[i])
		t.epoch, t.announced = epochs[i], false
	}
	if changed {
		p.clusterGen++
	}
	p.announcedAt = time.Time{}
	return fmt.Sprintf("cluster/%d", p.clusterGen), nil
}

// readEpochs SETs NX and GETs the topics' epoch keys in one pipeline (split per master).
func (p *Publisher) readEpochs(ctx context.Context, topics []*topicState) ([]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	pipe := p.cc.Pipeline()
	gets := make([]*redis.StringCmd, len(topics))
	for i, t := range topics {
		pipe.SetNX(ctx, t.epochKey, randomHex(16), 0)
		gets[i] = pipe.Get(ctx, t.epochKey)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err // redis.Nil too: deleted between SET NX and GET, try again next round
	}
	out := make([]string, len(topics))
	for i, g := range gets {
		out[i] = g.Val()
	}
	return out, nil
}

// topicEpochs reads the epochs of the frames' topics not read since the last connect.
func (p *Publisher) topicEpochs(ctx context.Context, frames []builtFrame) error {
	var fresh []*topicState
	for _, f := range frames {
		if f.t.epoch == "" && !slices.Contains(fresh, f.t) {
			fresh = append(fresh, f.t)
		}
	}
	epochs, err := p.readEpochs(ctx, fresh)
	if err != nil {
		return err
	}
	for i, t := range fresh {
		t.epoch = epochs[i]
	}
	return nil
}

// clusterIdentity asks the cluster for its slot map (ForEachMaster reloads it before it runs: the
// promoted replica now serves the dead master's slots) and talks to every master in it, while
// connections are expected. It returns the sorted set of every master's run_id/master_replid ("" when
// one does not say: then every reconnect counts as one to another server) and each master's by
// address.
func (p *Publisher) clusterIdentity(ctx context.Context) (string, map[string]string, error) {
	var mu sync.Mutex
	var ids []string
	byAddr := map[string]string{}
	unknown := false
	err := p.cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		pipe := node.Pipeline()
		server := pipe.Info(ctx, "server")
		replication := pipe.Info(ctx, "replication")
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		runID, replID := infoField(server.Val(), "run_id"), infoField(replication.Val(), "master_replid")
		mu.Lock()
		defer mu.Unlock()
		if runID == "" || replID == "" {
			unknown = true
			return nil
		}
		ids = append(ids, runID+"/"+replID)
		byAddr[node.Options().Addr] = runID + "/" + replID
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	if unknown {
		return "", byAddr, nil
	}
	slices.Sort(ids)
	return strings.Join(ids, ","), byAddr, nil
}

// movedTopics says, after a reconnect, which topics' frames in flight may have gone to a server that
// is not the one serving them now: those whose slot's master (masters, by address) was not a master
// at the last connect (p.masters), or does not say who it is. A topic whose slot moved between two
// masters that were both there (a reshard) took its pubseq entry along: its frames are retried.
func (p *Publisher) movedTopics(ctx context.Context, masters map[string]string) func(*topicState) bool {
	before := map[string]bool{}
	for _, id := range p.masters {
		before[id] = true
	}
	return func(t *topicState) bool {
		m, err := p.cc.MasterForKey(ctx, t.seqKey)
		if err != nil {
			return true
		}
		id, ok := masters[m.Options().Addr]
		return !ok || !before[id]
	}
}

// announce SADDs to the topic set the topics of confirmed frames not announced since the last
// connect, and every topic once clusterAnnounceEvery has passed.
func (p *Publisher) announce(ctx context.Context, frames []builtFrame, results []int64) error {
	var names []any
	var ts []*topicState
	now := p.clock.Now()
	all := p.announcedAt.IsZero() || now.Sub(p.announcedAt) >= clusterAnnounceEvery
	if all {
		p.mu.Lock()
		for _, t := range p.topics {
			if t.epoch != "" && t.confirmed > 0 { // confirm ran for this round's frames
				names, ts = append(names, t.name), append(ts, t)
			}
		}
		p.mu.Unlock()
	} else {
		for i, f := range frames {
			if results[i] != 0 && !f.t.announced && !slices.Contains(ts, f.t) {
				names, ts = append(names, f.topic), append(ts, f.t)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	if err := p.cc.SAdd(ctx, p.opts.Prefix+"topics", names...).Err(); err != nil {
		return err
	}
	for _, t := range ts {
		t.announced = true
	}
	if all {
		p.announcedAt = now
	}
	return nil
}
