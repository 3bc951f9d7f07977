package ctrlscope

// The publisher against a real Redis Cluster (protocol/redis-layout.md, "Redis Cluster"): Debian's
// redis-server ×6 with cluster-enabled on loopback ports, 3 masters and 3 replicas made by
// redis-cli --cluster create, booted as controllers/telemetry/clusterboot.py boots them for the
// Python tests (the same flags, a node timeout of 1 s, ports whose cluster bus port is free too).
//
//   - TestPublisherOnARealRedisCluster: frames land in their topic's slot (on the master serving
//     it, the topics spread over all three), a reader sees every record once and in order, and the
//     topic set lists every topic (SADDed by the publisher, not the script).
//   - TestPublisherSurvivesAMasterKill: kill -9 of a master under load; its replica is promoted,
//     the publisher reconnects, and what the new master lacks is reported as dropped on a reset
//     frame of its topic, never a silent gap or a record twice; the other masters' topics lose
//     nothing and are not reset.
//   - TestPublisherAcrossAReshard: redis-cli --cluster reshard moves the slots of some topics to
//     another master under load; nothing is lost, nothing is reset, every record arrives once.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is clusterboot.py's NODE_TIMEOUT_MS: a killed master's replica is promoted
// within a few seconds.
const clusterNodeTimeout = 1000

type testCluster struct {
	cli   string
	ports []int
	procs map[int]*exec.Cmd
}

// freeClusterPort is a free loopback port whose cluster bus port (port + 10,000) is free too and a
// port at all (clusterboot.cluster_port): a node on a port above 55,535 cannot open its bus.
func freeClusterPort(t *testing.T, taken map[int]bool) int {
	t.Helper()
	for range 1000 {
		port := freePort(t)
		if port >= 55_000 || taken[port] || taken[port+10_000] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10_000))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	t.Fatal("no free pair of ports (port, port + 10000) on 127.0.0.1")
	return 0
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server (apt-get install -y redis-server)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("no redis-cli")
	}
	dir := t.TempDir()
	c := &testCluster{cli: cli, procs: map[int]*exec.Cmd{}}
	taken := map[int]bool{}
	var addrs []string
	for range 6 {
		port := freeClusterPort(t, taken)
		taken[port], taken[port+10_000] = true, true
		c.ports = append(c.ports, port)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, port := range c.ports {
		c.procs[port] = spawn(t, dir, fmt.Sprintf("node-%d", port), server, "--port", strconv.Itoa(port),
			"--bind", "127.0.0.1", "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
			"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout), "--save", "", "--appendonly", "no", "--dir", dir)
	}
	for _, a := range addrs {
		waitWithin(t, a+" up", 10*time.Second, func() bool {
			return exec.Command(cli, "-u", "redis://"+a, "ping").Run() == nil
		})
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	out, err := exec.Command(cli, append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	waitWithin(t, "cluster_state:ok", 30*time.Second, func() bool { return c.ok() })
	// A replica that never finished its first sync (a master delays it by repl-diskless-sync-delay,
	// 5 s) is not promoted when its master dies: wait for every replica's link.
	waitWithin(t, "every replica in sync", 30*time.Second, func() bool {
		up := 0
		for _, port := range c.ports {
			if strings.Contains(replicationInfo(port), "master_link_status:up") {
				up++
			}
		}
		return up == len(c.ports)/2
	})
	return c
}

// node is a plain client of one node, with short timeouts (the node may be the one killed).
func node(port int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// ok says whether every live node says cluster_state:ok.
func (c *testCluster) ok() bool {
	for _, port := range c.ports {
		if c.procs[port] == nil {
			continue
		}
		n := node(port)
		info, err := n.ClusterInfo(context.Background()).Result()
		_ = n.Close()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
	}
	return true
}

// masterOf is the port of the master serving slot, as a live node sees it (0: none).
func (c *testCluster) masterOf(slot int) int {
	for _, port := range c.ports {
		if c.procs[port] == nil {
			continue
		}
		n := node(port)
		slots, err := n.ClusterSlots(context.Background()).Result()
		_ = n.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
				_, p, _ := net.SplitHostPort(s.Nodes[0].Addr)
				n, _ := strconv.Atoi(p)
				return n
			}
		}
		return 0
	}
	return 0
}

// kill is kill -9 of one node: no shutdown, nothing more replicated.
func (c *testCluster) kill(t *testing.T, port int) {
	t.Helper()
	_ = c.procs[port].Process.Signal(syscall.SIGKILL)
	_, _ = c.procs[port].Process.Wait()
	c.procs[port] = nil
}

func (c *testCluster) nodeID(t *testing.T, port int) string {
	t.Helper()
	n := node(port)
	defer n.Close()
	id, err := n.Do(context.Background(), "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// reshard moves slots slots (redis-cli takes the source's lowest) from one master to another with
// their keys (clusterboot.LocalRedisCluster.reshard): CLUSTER SETSLOT MIGRATING/IMPORTING and
// MIGRATE per slot, which clients see as ASK, TRYAGAIN and then MOVED.
func (c *testCluster) reshard(t *testing.T, from, to, slots int) {
	t.Helper()
	out, err := exec.Command(c.cli, "--cluster", "reshard", fmt.Sprintf("127.0.0.1:%d", from),
		"--cluster-from", c.nodeID(t, from), "--cluster-to", c.nodeID(t, to), "--cluster-slots", strconv.Itoa(slots),
		"--cluster-yes", "--cluster-pipeline", "100").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out[max(0, len(out)-2000):])
	}
}

func (c *testCluster) url() string { return fmt.Sprintf("redis+cluster://127.0.0.1:%d", c.ports[0]) }

// reader is a fresh cluster client: it learns the slot map as the cluster has it now.
func (c *testCluster) reader(t *testing.T) *redis.ClusterClient {
	var addrs []string
	for _, port := range c.ports {
		if c.procs[port] != nil {
			addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
		}
	}
	r := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// topicIn is a topic named after name whose slot lies in [lo, hi).
func topicIn(name string, lo, hi int) string {
	for i := 0; ; i++ {
		topic := fmt.Sprintf("%s-%d", name, i)
		if s := ClusterSlot(topic); lo <= s && s < hi {
			return topic
		}
	}
}

// topicLog is what a topic's stream holds of one publisher's frames.
type topicLog struct {
	keys    []string // the records' "key" fields, in order
	resets  int      // reset frames after the topic's first (which is one: it creates the hash)
	dropped int64    // the sum of the reset frames' dropped counts
}

// readTopic reads every frame of topic from src and fails on a frame applied twice or a gap in the
// seqs no reset frame announces.
func readTopic(t *testing.T, rdb *redis.ClusterClient, prefix, topic, src string) topicLog {
	t.Helper()
	entries, err := rdb.XRange(context.Background(), ClusterKeysOf(prefix, topic).Stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out topicLog
	var last int64
	for _, e := range entries {
		var f struct {
			R       []map[string]any `json:"r"`
			Src     string           `json:"src"`
			Seq     int64            `json:"seq"`
			Reset   bool             `json:"reset"`
			Dropped int64            `json:"dropped"`
		}
		if err := json.Unmarshal([]byte(e.Values["f"].(string)), &f); err != nil {
			t.Fatal(err)
		}
		if f.Src != src {
			continue
		}
		if f.Seq <= last {
			t.Fatalf("%s: seq %d after %d: a frame applied twice", topic, f.Seq, last)
		}
		if last > 0 && f.Seq > last+1 && !f.Reset {
			t.Fatalf("%s: frames %d..%d missing without a reset frame: a silent gap", topic, last+1, f.Seq-1)
		}
		if f.Reset && f.Seq > 1 {
			out.resets++
		}
		out.dropped += f.Dropped
		last = f.Seq
		for _, r := range f.R {
			out.keys = append(out.keys, r["key"].(string))
		}
	}
	return out
}

// checkRecords fails unless log holds records k<i> in increasing order, none twice, the last being
// k<published-1>, and every record published is either there or counted as dropped.
func checkRecords(t *testing.T, topic string, log topicLog, published int) {
	t.Helper()
	prev := -1
	for _, k := range log.keys {
		i, err := strconv.Atoi(strings.TrimPrefix(k, "k"))
		if err != nil || i <= prev {
			t.Fatalf("%s: record %s after k%d: out of order or twice", topic, k, prev)
		}
		prev = i
	}
	if int64(len(log.keys))+log.dropped != int64(published) {
		t.Fatalf("%s: published %d records; the stream holds %d and reports %d dropped",
			topic, published, len(log.keys), log.dropped)
	}
	if prev != published-1 {
		t.Fatalf("%s: the last record is k%d, want k%d", topic, prev, published-1)
	}
}

// clusterLoad publishes records k0, k1, ... round-robin over topics at rate records/s, each with a
// state change (k<i%10> = i), until stop.
type clusterLoad struct {
	p         *Publisher
	topics    []string
	published []atomic.Int64
	stopCh    chan struct{}
	done      chan struct{}
}

func startLoad(p *Publisher, topics []string, rate int) *clusterLoad {
	l := &clusterLoad{p: p, topics: topics, published: make([]atomic.Int64, len(topics)),
		stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		start := time.Now()
		n := 0
		for {
			select {
			case <-l.stopCh:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for due := int(time.Since(start).Seconds() * float64(rate)); n < due; n++ {
				j := n % len(topics)
				i := int(l.published[j].Load())
				p.Publish(topics[j], rec(i))
				p.SetState(topics[j], fmt.Sprintf("k%d", i%10), []byte(strconv.Itoa(i)))
				l.published[j].Store(int64(i + 1))
			}
		}
	}()
	return l
}

// stop ends the load and waits until the publisher has sent (or given up) every record.
func (l *clusterLoad) stop(t *testing.T) {
	t.Helper()
	close(l.stopCh)
	<-l.done
	waitWithin(t, "the publisher drained", 30*time.Second, func() bool {
		l.p.flushMu.Lock()
		idle := l.p.inflight == nil
		l.p.flushMu.Unlock()
		l.p.mu.Lock()
		idle = idle && l.p.n == 0
		l.p.mu.Unlock()
		return idle && l.p.Connected()
	})
}

// checkState fails unless topic's snapshot hash is the publisher's state (k<j> = the last i with
// i%10 == j).
func checkState(t *testing.T, rdb *redis.ClusterClient, prefix, topic string, published int) {
	t.Helper()
	snap, err := rdb.HGetAll(context.Background(), ClusterKeysOf(prefix, topic).Snapshot).Result()
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 10 && j < published; j++ {
		want := published - 1 - (published-1-j)%10
		if got := snap[fmt.Sprintf("k%d", j)]; got != strconv.Itoa(want) {
			t.Fatalf("%s: k%d is %q in the hash, want %d: the hash is not the publisher's state", topic, j, got, want)
		}
	}
}

func TestPublisherOnARealRedisCluster(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	prefix := "ctrlscope-go-cluster:"
	p, err := NewPublisher(c.url(), PublisherOptions{Prefix: prefix, Name: "pub-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	reader := c.reader(t)
	topics := make([]string, 24)
	for i := range topics {
		topics[i] = fmt.Sprintf("w/go/queue/c%d", i)
	}
	flush := func() {
		t.Helper()
		var err error
		for range 50 { // the loop's retries
			if _, err = p.Flush(ctx); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("flush: %v", err)
	}
	const before = 30
	for i := 0; i < before; i++ {
		for _, topic := range topics {
			p.Publish(topic, rec(i))
		}
		if i%10 == 9 {
			flush()
		}
	}
	// Frames landed in each topic's slot, on the master that serves it; every record once; the
	// topic set lists every topic; the epochs are per topic.
	masters := map[string]bool{}
	for _, topic := range topics {
		k := ClusterKeysOf(prefix, topic)
		for _, key := range []string{k.Stream, k.Snapshot, k.Pubseq, k.Epoch} {
			slot, err := reader.ClusterKeySlot(ctx, key).Result()
			if err != nil || int(slot) != ClusterSlot(key) {
				t.Fatalf("slot of %s: redis says %d (%v), ours %d", key, slot, err, ClusterSlot(key))
			}
			if n, _ := reader.Exists(ctx, key).Result(); n != 1 {
				t.Fatalf("%s missing", key)
			}
		}
		m, err := reader.MasterForKey(ctx, k.Stream)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		log := readTopic(t, reader, prefix, topic, p.Name())
		if log.resets != 0 {
			t.Fatalf("%s: %d reset frames", topic, log.resets)
		}
		checkRecords(t, topic, log, before)
	}
	if len(masters) != 3 {
		t.Fatalf("the topics' streams are on %d masters, want 3", len(masters))
	}
	if members, _ := reader.SMembers(ctx, prefix+"topics").Result(); len(members) != len(topics) {
		t.Fatalf("topic set has %d members, want %d", len(members), len(topics))
	}
}

// go-redis reloads the slot map by itself (after a MOVED, every 60 s). Over the data pools a
// reload dialled the nodes the publisher had no connection to, and a second connection to a master
// whose one connection a flush held: the dial guard refused them, and a flush that got the refused
// one logged a reconnect on a healthy cluster (a loaded CI run). The reloads now ask over
// connections of their own (clusterslots.go): while they run under load, the guard refuses nothing.
func TestGoRedisSlotMapReloadsUseNoConnectionOfTheFrames(t *testing.T) {
	traceRefusals.Store(true)
	defer traceRefusals.Store(false)
	c := startCluster(t)
	var logs logLines
	p, err := NewPublisher(c.url(), PublisherOptions{Prefix: "ctrlscope-go-reload:", Name: "pub-reload", Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	p.Start()
	var topics []string
	for j := range 12 {
		lo := (j % 3) * 5462
		topics = append(topics, topicIn(fmt.Sprintf("w/go/reload/t%d", j), lo, lo+5000))
	}
	load := startLoad(p, topics, 2000)
	waitWithin(t, "frames of every topic", 30*time.Second, func() bool {
		return p.Connected() && p.FramesPublished.Load() >= int64(5*len(topics))
	})
	before := p.FramesPublished.Load()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		p.cc.ReloadState(context.Background()) // go-redis' own LazyReload, as a MOVED triggers it
		time.Sleep(20 * time.Millisecond)
	}
	load.stop(t)
	if n := p.refusedDials.Load(); n != 0 {
		t.Fatalf("the dial guard refused %d connection(s) go-redis made while connected; log %q; the goroutines at the first:\n%v",
			n, logs.all(), p.firstRefusal.Load())
	}
	if lines := logs.all(); len(lines) != 0 {
		t.Fatalf("reconnects on a healthy cluster: %q", lines)
	}
	if p.FramesPublished.Load() <= before {
		t.Fatal("no frames were published while the slot map was reloaded")
	}
}

// TestALoneCommandDialsNoNode: a publisher's first lone command after it connected (the SADD that
// announces its topics) dials no node. With go-redis' routing policies on, that command first read
// the COMMAND table from a random node of the map over its data pool, a replica half the time, which
// the guard refused; ten fresh publishers all escaping that is a chance of 1 in ~1,000.
func TestALoneCommandDialsNoNode(t *testing.T) {
	traceRefusals.Store(true)
	defer traceRefusals.Store(false)
	c := startCluster(t)
	topic := topicIn("w/go/lone", 0, 16383)
	for i := range 10 {
		p, err := NewPublisher(c.url(), PublisherOptions{Prefix: "ctrlscope-go-lone:", Name: fmt.Sprintf("pub-lone-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		p.Start()
		p.Publish(topic, rec(i))
		waitWithin(t, "the first frame", 30*time.Second, func() bool { return p.FramesPublished.Load() >= 1 })
		p.Stop(time.Second)
		if n := p.refusedDials.Load(); n != 0 {
			t.Fatalf("publisher %d: the dial guard refused %d connection(s); the goroutines at the first:\n%v",
				i, n, p.firstRefusal.Load())
		}
	}
	members, err := c.reader(t).SMembers(context.Background(), "ctrlscope-go-lone:topics").Result()
	if err != nil || !slices.Contains(members, topic) {
		t.Fatalf("the topic was not announced: %v %v", members, err)
	}
}

// logLines collects a publisher's log lines (its one line per reconnect).
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestPublisherSurvivesAMasterKill(t *testing.T) {
	traceRefusals.Store(true) // a reconnect before the kill says which go-redis call dialed
	defer traceRefusals.Store(false)
	c := startCluster(t)
	prefix := "ctrlscope-go-kill:"
	var logs logLines
	p, err := NewPublisher(c.url(), PublisherOptions{Prefix: prefix, Name: "pub-kill", Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the publisher's log: %q", logs.all())
		}
	})
	p.Start()
	// Eight topics in each master's slots (redis-cli --cluster create gives 0-5460, 5461-10922,
	// 10923-16383 to the three masters); the third master is killed.
	var topics []string
	for j := range 24 {
		lo := (j % 3) * 5462
		topics = append(topics, topicIn(fmt.Sprintf("w/go/kill/t%d", j), lo, lo+5000))
	}
	victim := c.masterOf(ClusterSlot(topics[2]))
	onVictim := map[string]bool{}
	for _, topic := range topics {
		onVictim[topic] = c.masterOf(ClusterSlot(topic)) == victim
	}
	const rate = 2000
	load := startLoad(p, topics, rate)
	waitWithin(t, "frames of every topic", 30*time.Second, func() bool {
		return p.Connected() && p.FramesPublished.Load() >= int64(5*len(topics))
	})
	time.Sleep(500 * time.Millisecond)

	// The victim's replica has its data (a replica in a full resync holds none: its promotion
	// would be a new epoch for every topic, a case of its own).
	waitWithin(t, "the killed master's replica in sync", 10*time.Second, func() bool {
		m := node(victim)
		defer m.Close()
		want := m.DBSize(context.Background()).Val()
		for _, port := range c.ports {
			if strings.Contains(replicationInfo(port), fmt.Sprintf("master_port:%d\r", victim)) {
				r := node(port)
				defer r.Close()
				return r.DBSize(context.Background()).Val() >= want
			}
		}
		return false
	})
	// Nothing was down yet: a reconnect here is the publisher refusing its own client's dials
	// (before one pool per node: the first SADD's connection, every round, a reconnect every 2 s).
	if lines := logs.all(); len(lines) != 0 {
		t.Fatalf("reconnects while every node was up: %q (the outage's error and its chain: %v); the first dial refused (%d in all), "+
			"every goroutine:\n%v", lines, p.lostWith.Load(), p.refusedDials.Load(), p.firstRefusal.Load())
	}
	killedAt := time.Now()
	c.kill(t, victim)
	waitWithin(t, "the killed master's replica promoted", 30*time.Second, func() bool {
		m := c.masterOf(ClusterSlot(topics[2]))
		return m != 0 && m != victim && c.ok()
	})
	promoted := time.Since(killedAt)
	atPromotion := p.FramesPublished.Load()
	waitWithin(t, "frames after the promotion", 30*time.Second, func() bool {
		return p.Connected() && p.FramesPublished.Load() > atPromotion+int64(5*len(topics))
	})
	back := time.Since(killedAt)
	time.Sleep(500 * time.Millisecond)
	load.stop(t)

	reader := c.reader(t)
	var killed, dropped int64
	for j, topic := range topics {
		n := int(load.published[j].Load())
		log := readTopic(t, reader, prefix, topic, p.Name())
		checkRecords(t, topic, log, n)
		checkState(t, reader, prefix, topic, n)
		if !onVictim[topic] && (log.resets != 0 || log.dropped != 0) {
			t.Fatalf("%s, on a master that lived: %d resets, %d dropped", topic, log.resets, log.dropped)
		}
		if onVictim[topic] {
			killed++
			dropped += log.dropped
		}
	}
	if dropped != p.RecordsLost.Load()+p.RecordsDropped.Load() {
		t.Fatalf("the streams report %d records dropped; the publisher lost %d and dropped %d",
			dropped, p.RecordsLost.Load(), p.RecordsDropped.Load())
	}
	reconnected := 0
	for _, line := range logs.all() {
		if strings.Contains(line, "reconnected to Redis") {
			reconnected++
		}
	}
	if reconnected == 0 {
		t.Fatalf("no reconnect logged: %q", logs.all())
	}
	var total int64
	for j := range topics {
		total += load.published[j].Load()
	}
	t.Logf("%d records on %d topics (%d on the killed master) at %d/s; promoted %v after the kill, frames again %v "+
		"after it; lost %d frames, %d records (reported as dropped); %q",
		total, len(topics), killed, rate, promoted.Round(time.Millisecond), back.Round(time.Millisecond),
		p.FramesLost.Load(), p.RecordsLost.Load(), logs.all())
}

func TestPublisherAcrossAReshard(t *testing.T) {
	c := startCluster(t)
	prefix := "ctrlscope-go-reshard:"
	p, err := NewPublisher(c.url(), PublisherOptions{Prefix: prefix, Name: "pub-reshard"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	p.Start()
	// 1,000 slots (0-999, the lowest of the first master's) move to the second master: eight
	// topics in them, eight in each other master's slots.
	const slots = 1000
	var topics []string
	for j := range 24 {
		lo, hi := 0, slots
		if j%3 > 0 {
			lo = (j % 3) * 5462
			hi = lo + 5000
		}
		topics = append(topics, topicIn(fmt.Sprintf("w/go/reshard/t%d", j), lo, hi))
	}
	from, to := c.masterOf(0), c.masterOf(8000)
	const rate = 2000
	load := startLoad(p, topics, rate)
	waitWithin(t, "frames of every topic", 30*time.Second, func() bool {
		return p.Connected() && p.FramesPublished.Load() >= int64(5*len(topics))
	})
	time.Sleep(500 * time.Millisecond)
	started := time.Now()
	c.reshard(t, from, to, slots)
	took := time.Since(started)
	at := p.FramesPublished.Load()
	waitWithin(t, "frames after the reshard", 30*time.Second, func() bool {
		return p.FramesPublished.Load() > at+int64(5*len(topics))
	})
	load.stop(t)

	reader := c.reader(t)
	var total int64
	for j, topic := range topics {
		n := int(load.published[j].Load())
		total += int64(n)
		if j%3 == 0 && c.masterOf(ClusterSlot(topic)) != to {
			t.Fatalf("%s did not move", topic)
		}
		log := readTopic(t, reader, prefix, topic, p.Name())
		if log.resets != 0 || log.dropped != 0 {
			t.Fatalf("%s: %d resets, %d dropped across a reshard", topic, log.resets, log.dropped)
		}
		checkRecords(t, topic, log, n)
		checkState(t, reader, prefix, topic, n)
	}
	if p.FramesLost.Load() != 0 || p.RecordsLost.Load() != 0 || p.RecordsDropped.Load() != 0 {
		t.Fatalf("lost %d frames, %d records, dropped %d across a reshard",
			p.FramesLost.Load(), p.RecordsLost.Load(), p.RecordsDropped.Load())
	}
	t.Logf("%d records on %d topics (8 moved) at %d/s; the reshard of %d slots took %v; %d Redis errors met",
		total, len(topics), rate, slots, took.Round(time.Millisecond), p.RedisErrors.Load())
}
