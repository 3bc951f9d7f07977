package ctrlscope

// Publisher: batches records and state changes into protocol frames on its own goroutine and
// appends them to Redis with frame.lua (protocol/redis-layout.md, "The publisher's loop").
//
// Producers (informer, queue and reconcile goroutines) call Publish and SetState. Both are
// non-blocking and do no I/O: a record goes into a bounded buffer, a state change updates the
// in-memory mirror of the topic's state and marks the key changed. Every FlushInterval (or as
// soon as MaxFrameRecords records wait) the loop drains the buffer into one frame per topic and
// sends all frames in one pipeline.
//
// Why the mirror: after Redis lost its data (a restart without persistence) the snapshot hashes
// must be rebuilt, and only this process knows its state. The rebuild is a reset frame, which makes
// every dashboard client resync, so a gap is visible, never silent. A frame whose reply was lost is
// retried unchanged (same seq): frame.lua applies a (publisher, seq) once -- on the server it went to.
// Another server (a promoted replica, a restarted or emptied Redis) that lacks it cannot say whether
// the old one applied it and a reader read it there: the frame is void and its records are counted
// as dropped, never sent again (protocol/redis-layout.md, "Failover and exactly once").

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"crypto/rand"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

//go:embed frame.lua
var frameLua string

var frameScript = redis.NewScript(frameLua)

// StateKeysPerFrame bounds the state changes one ordinary frame carries (protocol/README.md §3).
const StateKeysPerFrame = 1000

// PublisherOptions configure a Publisher; zero values take the defaults in brackets.
type PublisherOptions struct {
	Prefix          string        // key prefix, the dashboard's CTRLSCOPE_PREFIX ["ctrlscope:"]
	FlushInterval   time.Duration // [20ms]
	MaxFrameRecords int           // records per flush before the loop drains at once [2000]
	BufferLimit     int           // records kept while Redis is away; then the oldest drop [200000]
	MaxLen          int           // XADD MAXLEN ~ per topic [20000]
	Name            string        // publisher id, unique per run [host-pid-random]
	Retention       time.Duration // the topics' keys' TTL, >= MinRetention (presence.go) [CTRLSCOPE_RETENTION, else 1h]
	Clock           clock.PassiveClock
	// Logf receives the publisher's one line per reconnect to Redis (how long it was down, why, and
	// whether Redis kept every frame) [log.Printf]. A healthy run logs nothing.
	Logf func(format string, args ...any)
}

type pending struct {
	t   *topicState
	rec []byte // a copy in one of the publisher's slabs
	gen uint64 // that slab's generation (see copyRecord)
}

// stateEntry is one key of a topic's state. An entry that is not live is a delete that no frame
// has carried yet: it stays in the map (dirty) until the next frame is built.
type stateEntry struct {
	key   string
	val   []byte    // the JSON value (kind valueRaw), owned by the entry
	item  QueueItem // the value (kind valueQueueItem), encoded only when a frame carries it
	count int       // kept with the key across values by its writer (a reconcile summary's attempts)
	kind  uint8
	live  bool // the key holds a value
	dirty bool // changed since the last frame (then in topicState.dirty)
}

const (
	valueRaw uint8 = iota
	valueQueueItem
)

func (e *stateEntry) appendValue(b []byte) []byte {
	if e.kind == valueQueueItem {
		return e.item.appendJSON(b)
	}
	return append(b, e.val...)
}

type topicState struct {
	name                       string
	streamKey, snapKey, seqKey string
	state                      map[string]*stateEntry // the truth, plus deletes not yet in a frame
	live                       int                    // keys holding a value
	dirty                      []*stateEntry          // changed since the last frame, each once
	reset                      bool                   // the first frame of every publisher run rewrites the snapshot
	dropped                    int
	seq                        int64
	confirmed                  int64       // the last seq Redis confirmed as applied (frame.lua status 1 or 2)
	sent                       []sentFrame // recently confirmed frames that carried records, oldest first
	maxlen                     int
	ttlAt                      time.Time // when its keys' TTL was last set (zero: not since its last reset frame)
	taking                     [][]byte  // records being taken for a frame (takeRecordsLocked)
	spare                      [][]byte  // a confirmed frame's record list, for reuse

	// In a cluster (clusterpublisher.go): the topic's own epoch key and value ("" until read after
	// the last connect), and whether it is in the topic set since then (SADD after a frame).
	epochKey, epoch string
	announced       bool
}

func (t *topicState) markDirty(e *stateEntry) {
	if !e.dirty {
		e.dirty = true
		t.dirty = append(t.dirty, e)
	}
}

// sentFrame is a confirmed frame's seq and how many records it carried: what a failover that lost
// confirmed frames is counted against (checkApplied).
type sentFrame struct {
	seq  int64
	nrec int
}

// confirmedHistory bounds topicState.sent per topic (some 40 s of frames at 50 frames/s), as the
// Python publisher's CONFIRMED_HISTORY does.
const confirmedHistory = 2048

type builtFrame struct {
	topic string
	t     *topicState
	seq   int64
	nrec  int   // records it carries (a topic's records ride on its first chunk)
	args  []any // ARGV: epoch and maxlen (filled in by send), frame, topic, src, seq, reset, nset, pairs..., deletes...
}

type inflight struct {
	frames  []builtFrame
	records map[string][][]byte
	maxGen  uint64 // the newest slab generation its records were copied to
	unsure  bool   // an attempt to send it got no reply: Redis may have applied its frames
}

// Publisher publishes frames to Redis (see the file comment). Create with NewPublisher, Start it,
// Stop it to flush what is left.
type Publisher struct {
	opts  PublisherOptions
	clock clock.PassiveClock
	rdb   *redis.Client         // nil with a cluster
	cc    *redis.ClusterClient  // a cluster's client (rediscluster.go), else nil
	cmd   redis.UniversalClient // rdb or cc
	// announcedAt is when every topic was last SADDed to the topic set (a cluster: at least every
	// clusterAnnounceEvery). Flush goroutine only.
	announcedAt time.Time
	clusterGen  int // reconnects at which a topic's epoch had changed (clusterEpochs)

	mu     sync.Mutex // guards buf, slab, topics (and their state), free
	buf    []pending  // a ring: head is the oldest
	head   int
	n      int
	peak   int64
	behind int    // records published past half the buffer since the last yield
	slab   []byte // records are copied here, slab after slab: one allocation per many records
	gen    uint64 // slab's generation: counts the slabs
	// retired are full slabs, oldest first; once every record in one is confirmed (or dropped)
	// it goes to freeSlabs for reuse (see releaseSlabs).
	retired   []slab
	freeSlabs [][]byte
	topics    map[string]*topicState
	free      []*stateEntry // entries of deletes a frame carried, for reuse
	bufs      [][]byte      // frame buffers Redis confirmed, for reuse

	flushMu   sync.Mutex // one flush or refresh at a time (the loop, tests)
	hooksMu   sync.Mutex
	hooks     []func() // run before each flush builds its frames (addFlushHook)
	inflight  *inflight
	epoch     string
	lastEpoch string
	server    string // the server the frames go to and its data's history (serverIdentity); "" unknown
	// masters is, with a cluster, each master's run_id/master_replid by address at the last connect
	// (clusterIdentity; a master that did not say is missing): movedTopics compares with it.
	masters map[string]string

	// Presence (presence.go). role, name, startedMs: guarded by mu; presenceDue by flushMu.
	role          string
	name          *string
	host          string
	startedMs     float64
	presenceDue   time.Time
	presenceStale atomic.Bool // rewrite the entry on the next round (Describe, a reconnect)
	ttlStale      atomic.Bool // a topic's hash has no TTL (a reset frame recreated it)

	wake     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
	started  atomic.Bool

	RecordsPublished atomic.Int64
	FramesPublished  atomic.Int64
	RecordsDropped   atomic.Int64
	BufferPeak       atomic.Int64 // the most records the buffer held at once
	RedisErrors      atomic.Int64
	// SnapshotsRewritten counts topics whose snapshot a refresh found gone (expired, forgotten)
	// and rewrote with a reset frame.
	SnapshotsRewritten atomic.Int64
	// FramesLost and RecordsLost count frames (and their records) the Redis reconnected to does not
	// have although an earlier one may have applied them: frames it had confirmed (a failover to a
	// replica they had not reached; checkApplied) and frames in flight whose reply was lost there
	// (void, never sent again; voidInflightLocked). All are reported as dropped.
	FramesLost  atomic.Int64
	RecordsLost atomic.Int64
	connected   atomic.Bool
	// mayReconnect: ensureEpoch is (re)connecting, which is expected; a connection made at any
	// other time while connected is refused (redialGuard), so no frame goes to a new server before
	// checkApplied looked at what it kept.
	mayReconnect atomic.Bool
	refusedDials atomic.Int64 // connections the guard refused (tests: nothing but a reconnect's cause dials)
	// firstRefusal: every goroutine's stack when the guard refused its first dial (string; only while
	// traceRefusals is set), so a test that finds a refusal says which call of go-redis dialed.
	firstRefusal atomic.Value
	// slots: a cluster's slot map source, with connections of its own (clusterslots.go).
	slots *slotSource
	// downSince and downCause: when and why the connection was lost after it had been up (zero while
	// up), for the one line the reconnect logs. Only the flush goroutine touches them.
	downSince time.Time
	downCause error
	// lostWith: the error of the last outage, and the types along its Unwrap chain (string), for a
	// test that sees a reconnect it did not cause: the log line reads every cause that is not a
	// refused dial and unwraps to errReconnected as "the connection dropped".
	lostWith atomic.Value
	// probe tells whether the server answers at all, without go-redis (newRedisClient); nil: unknown.
	probe func(context.Context) error
}

// errReconnected is what a frame pipeline fails with when its connection was made anew while the
// publisher counted itself connected (go-redis redials silently; after a Sentinel failover that is
// a different server).
var errReconnected = errors.New("ctrlscope: the connection to Redis was made anew behind the publisher's back; checking what Redis kept before sending frames")

// redialGuard is a go-redis hook on the publisher's data connections only (a hook belongs to its
// client: a failover client's Sentinel connections are not its, where an OnConnect would be passed
// on to them too). A connection made while the publisher counts itself connected is refused: the
// dial returns a refusedConn, which never reaches the network, and go-redis' handshake fails on it
// with errReconnected. Not a dial error, because go-redis' pool logs every failed dial on the
// process-wide logger; the one line a reconnect logs is ensureEpoch's. The guard relies on the client
// keeping one connection (one pool, PipelinePoolSize < 0: redisconfig.go): with a second pool, the
// first pipeline's connection would be refused on every healthy start.
type redialGuard struct{ p *Publisher }

func (g redialGuard) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if g.p.connected.Load() && !g.p.mayReconnect.Load() {
			// The call fails with errReconnected; the loop then counts the publisher disconnected and
			// its next flush rechecks the epoch and what Redis kept.
			return g.p.refuse(addr), nil
		}
		return next(ctx, network, addr)
	}
}

// traceRefusals makes refuse keep the stacks of the first refusal (tests).
var traceRefusals atomic.Bool

// refuse counts a dial the guard refused and keeps the first one's stack.
func (p *Publisher) refuse(addr string) net.Conn {
	if p.refusedDials.Add(1) == 1 && traceRefusals.Load() {
		// Every goroutine: the dial runs in a goroutine of go-redis' pool, the caller in another.
		buf := make([]byte, 1<<20)
		p.firstRefusal.Store(string(buf[:runtime.Stack(buf, true)]))
	}
	return refusedConn{addr}
}

func (redialGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (redialGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// refusedConn is a connection redialGuard refused (to addr): every read and write fails with
// errReconnected, naming the address, which the reconnect's log line then says.
type refusedConn struct{ addr string }

func (c refusedConn) Read([]byte) (int, error)  { return 0, c.err() }
func (c refusedConn) Write([]byte) (int, error) { return 0, c.err() }

// err is wrapped once more than refusedDial: go-redis unwraps a failed handshake's error once
// (initPooledConn), and the reconnect's line names the address only while refusedDial is in the chain.
func (c refusedConn) err() error { return fmt.Errorf("%w", refusedDial{c.addr}) }

// refusedDial is errReconnected with the address of the connection refused.
type refusedDial struct{ addr string }

func (e refusedDial) Error() string {
	return errReconnected.Error() + " (go-redis dialled " + e.addr + ")"
}
func (e refusedDial) Unwrap() error { return errReconnected }

func (refusedConn) Close() error                     { return nil }
func (refusedConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (refusedConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (refusedConn) SetDeadline(time.Time) error      { return nil }
func (refusedConn) SetReadDeadline(time.Time) error  { return nil }
func (refusedConn) SetWriteDeadline(time.Time) error { return nil }

// NewPublisher connects lazily to the Redis at url: redis://[:password@]host:port/db (rediss://,
// unix://), or redis+sentinel://host:port,host:port/master-name[/db] for the master those Sentinels
// name (redisconfig.go; REDIS_PASSWORD and REDIS_SENTINEL_PASSWORD from the environment). It fails
// only on a URL it cannot parse or a retention it refuses (opts.Retention, else $CTRLSCOPE_RETENTION).
func NewPublisher(url string, opts PublisherOptions) (*Publisher, error) {
	p := &Publisher{}
	if opts.Prefix == "" {
		opts.Prefix = "ctrlscope:"
	}
	var rdb *redis.Client
	var cc *redis.ClusterClient
	var cmd redis.UniversalClient
	var probe func(context.Context) error
	if IsClusterURL(url) {
		if err := CheckPrefix(opts.Prefix, url); err != nil {
			return nil, fmt.Errorf("ctrlscope: %w", err)
		}
		c, err := newClusterClient(url, os.Getenv, p)
		if err != nil {
			return nil, err
		}
		cc, cmd = c, c
	} else {
		c, pr, err := newRedisClient(url, os.Getenv)
		if err != nil {
			return nil, err
		}
		c.AddHook(redialGuard{p})
		rdb, cmd, probe = c, c, pr
	}
	var err error
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 20 * time.Millisecond
	}
	if opts.MaxFrameRecords <= 0 {
		opts.MaxFrameRecords = 2000
	}
	if opts.BufferLimit <= 0 {
		opts.BufferLimit = 200_000
	}
	if opts.MaxLen <= 0 {
		opts.MaxLen = 20_000
	}
	if opts.Retention == 0 {
		if opts.Retention, err = RetentionFromEnv(); err != nil {
			return nil, fmt.Errorf("ctrlscope: %w", err)
		}
	} else if opts.Retention < MinRetention {
		return nil, fmt.Errorf("ctrlscope: a retention of %v is under the minimum of %v: a worker's keys "+
			"would expire between two refreshes", opts.Retention, MinRetention)
	}
	host, _ := os.Hostname()
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(3))
	}
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	*p = Publisher{opts: opts, clock: c, rdb: rdb, cc: cc, cmd: cmd, topics: map[string]*topicState{},
		buf: make([]pending, 64), wake: make(chan struct{}, 1), stop: make(chan struct{}),
		stopped: make(chan struct{}), role: "publisher", host: host, probe: probe}
	return p, nil
}

// pollInterval is how long a read of Redis' reply waits at a time (see pollConn).
const pollInterval = time.Millisecond

// pollConn is the publisher's Redis connection: a read that would wait for the reply waits in
// steps of pollInterval (within the deadline go-redis set) instead of all at once. Why: a waiting
// read parks its goroutine on the network poller, and a process whose every P is busy polls the
// network only when the scheduler runs out of work or sysmon steps in, every 10 ms; the replies to a
// pipeline of frames trickle in over tens of ms, so the flush goroutine lost ~10 ms per wake-up and
// fell behind the records of a busy controller. Deadlines are timers, which the scheduler runs on
// every round: a read that times out returns at once and the next one finds the bytes that arrived.
type pollConn struct {
	net.Conn
	deadline time.Time // the read deadline go-redis asked for (one goroutine uses a conn at a time)
}

func (c *pollConn) SetDeadline(t time.Time) error {
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

func (c *pollConn) SetReadDeadline(t time.Time) error {
	c.deadline = t
	return c.Conn.SetReadDeadline(t)
}

func (c *pollConn) Read(b []byte) (int, error) {
	for {
		step := time.Now().Add(pollInterval)
		if !c.deadline.IsZero() && !step.Before(c.deadline) {
			if err := c.Conn.SetReadDeadline(c.deadline); err != nil {
				return 0, err
			}
			return c.Conn.Read(b)
		}
		if err := c.Conn.SetReadDeadline(step); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(b)
		var ne net.Error
		if n == 0 && err != nil && errors.As(err, &ne) && ne.Timeout() {
			continue // the step is over, not the caller's deadline
		}
		if rerr := c.Conn.SetReadDeadline(c.deadline); err == nil && rerr != nil {
			err = rerr
		}
		return n, err
	}
}

// SyscallConn is the underlying connection's (go-redis' health check peeks at the socket).
func (c *pollConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Name is the publisher id, the frames' "src".
func (p *Publisher) Name() string { return p.opts.Name }

// Prefix is the Redis key prefix.
func (p *Publisher) Prefix() string { return p.opts.Prefix }

// Connected says whether the last flush reached Redis.
func (p *Publisher) Connected() bool { return p.connected.Load() }

// Redis is the publisher's client (for the inspector and tests; do not send frames through it).
// With a cluster it is nil: see Cluster.
func (p *Publisher) Redis() *redis.Client { return p.rdb }

// Cluster is the publisher's Redis Cluster client, or nil when its URL is not a cluster's.
func (p *Publisher) Cluster() *redis.ClusterClient { return p.cc }

func (p *Publisher) topic(name string) *topicState { // p.mu held
	t := p.topics[name]
	if t == nil {
		t = &topicState{name: name, state: map[string]*stateEntry{}, reset: true,
			streamKey: p.key("stream", name), snapKey: p.key("snap", name), seqKey: p.key("pubseq", name)}
		if p.cc != nil {
			k := ClusterKeysOf(p.opts.Prefix, name)
			t.streamKey, t.snapKey, t.seqKey, t.epochKey = k.Stream, k.Snapshot, k.Pubseq, k.Epoch
		}
		p.topics[name] = t
	}
	return t
}

// slabSize is the size of the slabs records are copied into.
const slabSize = 64 << 10

// slabsKept bounds the free slabs kept for reuse.
const slabsKept = 4

type slab struct {
	gen uint64
	b   []byte
}

func (p *Publisher) copyRecord(rec []byte) []byte { // p.mu held
	if cap(p.slab)-len(p.slab) < len(rec) {
		if cap(p.slab) == slabSize {
			p.retired = append(p.retired, slab{p.gen, p.slab})
		}
		p.gen++
		if n := len(p.freeSlabs); n > 0 && len(rec) <= slabSize {
			p.slab = p.freeSlabs[n-1][:0]
			p.freeSlabs[n-1] = nil
			p.freeSlabs = p.freeSlabs[:n-1]
		} else {
			p.slab = make([]byte, 0, max(slabSize, len(rec)))
		}
	}
	n := len(p.slab)
	p.slab = append(p.slab, rec...)
	return p.slab[n:len(p.slab):len(p.slab)]
}

// forgetSlabs drops the retired slabs older than gen from the list (not for reuse: a frame in flight
// may hold their records), so that the slabs of dropped records do not pile up while Redis is away.
func (p *Publisher) forgetSlabs(gen uint64) { // p.mu held
	if len(p.retired) == 0 || p.retired[0].gen >= gen {
		return
	}
	i := 0
	for i < len(p.retired) && p.retired[i].gen < gen {
		i++
	}
	n := copy(p.retired, p.retired[i:])
	clear(p.retired[n:])
	p.retired = p.retired[:n]
}

// releaseSlabs makes the retired slabs older than gen free: a confirmed frame held records up to
// slab gen, and the buffer is taken oldest first, so nothing refers to them any more (records a
// refused frame put back are in slabs onNewEpoch forgot).
func (p *Publisher) releaseSlabs(gen uint64) { // p.mu held
	i := 0
	for ; i < len(p.retired) && p.retired[i].gen < gen; i++ {
		if len(p.freeSlabs) < slabsKept {
			p.freeSlabs = append(p.freeSlabs, p.retired[i].b[:0])
		}
	}
	if i > 0 {
		n := copy(p.retired, p.retired[i:])
		clear(p.retired[n:])
		p.retired = p.retired[:n]
	}
}

// publishLocked buffers a copy of rec for t; it says what to do once p.mu is released (p.after).
func (p *Publisher) publishLocked(t *topicState, rec []byte) next { // p.mu held
	if p.n == p.opts.BufferLimit {
		old := p.buf[p.head]
		p.buf[p.head] = pending{}
		p.head = (p.head + 1) % len(p.buf)
		p.n--
		old.t.dropped++
		p.RecordsDropped.Add(1)
		p.forgetSlabs(old.gen)
	}
	if p.n == len(p.buf) {
		p.grow()
	}
	c := p.copyRecord(rec)
	p.buf[(p.head+p.n)%len(p.buf)] = pending{t, c, p.gen}
	p.n++
	if int64(p.n) > p.peak {
		p.peak = int64(p.n)
		p.BufferPeak.Store(p.peak)
	}
	if p.n < p.opts.MaxFrameRecords {
		return nextNothing
	}
	if p.n > p.opts.BufferLimit/2 {
		if p.behind++; p.behind >= yieldEvery {
			p.behind = 0
			return nextYield
		}
	}
	return nextPoke
}

// next is what a producer does after publishing, outside the lock.
type next uint8

const (
	nextNothing next = iota
	nextPoke         // a flush's worth of records waits: wake the loop
	nextYield        // and the buffer is more than half full: also yield the processor
)

// yieldEvery: past half the buffer, every yieldEvery-th record yields the CPU (see after).
const yieldEvery = 64

// after pokes the flush loop when a flush's worth of records waits. Past half the buffer it also
// yields the processor now and then (runtime.Gosched: the caller goes on at once when nothing else
// waits to run; it never waits for the flush). Why: goroutines that hand work to each other (a
// controller's queue and workers) run one after the other ahead of the rest of the run queue, so on
// a busy processor the flush goroutine, runnable, can wait long enough for the buffer to overflow;
// a turn now costs the controller what the flush costs anyway, and keeps the records.
func (p *Publisher) after(n next) {
	if n == nextNothing {
		return
	}
	p.poke()
	if n == nextYield {
		runtime.Gosched()
	}
}

// entry is key's entry in t, created (not yet live) if there is none.
func (p *Publisher) entry(t *topicState, key string) *stateEntry { // p.mu held
	e := t.state[key]
	if e == nil {
		if n := len(p.free); n > 0 {
			e = p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
			e.key = key
		} else {
			e = &stateEntry{key: key}
		}
		t.state[key] = e
	}
	return e
}

// setLive makes e hold a value of kind and marks it changed.
func (t *topicState) setLive(e *stateEntry, kind uint8) {
	if !e.live {
		e.live = true
		t.live++
	}
	e.kind = kind
	t.markDirty(e)
}

// deleteLocked deletes key from t's state (a no-op for a key it does not hold).
func (t *topicState) deleteLocked(key string) {
	e := t.state[key]
	if e == nil || !e.live {
		return
	}
	e.live = false
	e.val = e.val[:0]
	t.live--
	t.markDirty(e)
}

func (p *Publisher) setStateLocked(t *topicState, key string, value []byte) { // p.mu held
	if value == nil {
		t.deleteLocked(key)
		return
	}
	e := p.entry(t, key)
	e.val = append(e.val[:0], value...)
	t.setLive(e, valueRaw)
}

// Publish queues one record (a JSON object with "k" and "ts") for topic; rec is copied, the caller
// may reuse it. When the buffer is full the oldest record is dropped and counted against its
// topic, whose next frame says so.
func (p *Publisher) Publish(topic string, rec []byte) {
	p.mu.Lock()
	n := p.publishLocked(p.topic(topic), rec)
	p.mu.Unlock()
	p.after(n)
}

func (p *Publisher) grow() {
	size := len(p.buf) * 2
	if size > p.opts.BufferLimit {
		size = p.opts.BufferLimit
	}
	nb := make([]pending, size)
	for i := 0; i < p.n; i++ {
		nb[i] = p.buf[(p.head+i)%len(p.buf)]
	}
	p.buf, p.head = nb, 0
}

func (p *Publisher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// SetState sets key in topic's state to the JSON value (nil deletes the key); value is copied,
// the caller may reuse it.
func (p *Publisher) SetState(topic, key string, value []byte) {
	p.mu.Lock()
	p.setStateLocked(p.topic(topic), key, value)
	p.mu.Unlock()
}

// StateLen is how many keys topic's state holds.
func (p *Publisher) StateLen(topic string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.topics[topic]; t != nil {
		return t.live
	}
	return 0
}

// StateKeys lists topic's state keys.
func (p *Publisher) StateKeys(topic string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.topics[topic]
	if t == nil {
		return nil
	}
	keys := make([]string, 0, t.live)
	for k, e := range t.state {
		if e.live {
			keys = append(keys, k)
		}
	}
	return keys
}

// Retain keeps about maxlen frames of topic instead of MaxLen (a slow topic, e.g. metrics samples).
func (p *Publisher) Retain(topic string, maxlen int) {
	if maxlen < 1 {
		maxlen = 1
	}
	p.mu.Lock()
	p.topic(topic).maxlen = maxlen
	p.mu.Unlock()
}

// Start runs the flush loop until Stop.
func (p *Publisher) Start() *Publisher {
	if p.started.Swap(true) {
		return p
	}
	p.mu.Lock()
	p.startedMs = roundMs(p.wallMs())
	p.mu.Unlock()
	p.presenceStale.Store(true) // announce the run at once
	go p.run()
	return p
}

// Stop flushes what is buffered, records in the presence entry that this run stopped (best effort
// within timeout), and closes the connection.
func (p *Publisher) Stop(timeout time.Duration) {
	p.stopOnce.Do(func() {
		close(p.stop)
		if p.started.Load() {
			select {
			case <-p.stopped:
			case <-time.After(timeout):
			}
		}
		_ = p.cmd.Close()
		if p.slots != nil {
			p.slots.Close()
		}
	})
}

// Reconnect attempts back off up to reconnectBackoffMax; a cluster's up to the lower
// clusterReconnectBackoffMax: while the publisher reconnects after a master died the other masters'
// topics wait too (one batch across masters), and a failover is over in 1-3 s, so retrying every
// 0.5 s resumes them within half a second of it (as the Python publisher).
const (
	reconnectBackoffMax        = 2 * time.Second
	clusterReconnectBackoffMax = 500 * time.Millisecond
)

func (p *Publisher) run() {
	defer close(p.stopped)
	backoff := time.Duration(0)
	ticker := time.NewTicker(p.opts.FlushInterval)
	defer ticker.Stop()
	for {
		stopping := false
		if backoff > 0 {
			select {
			case <-time.After(backoff):
			case <-p.stop:
				stopping = true
			}
		} else {
			select {
			case <-ticker.C:
			case <-p.wake:
			case <-p.stop:
				stopping = true
			}
		}
		err := p.reachable(context.Background())
		if err == nil {
			err = p.drain(context.Background())
		}
		if err == nil {
			err = p.refreshDue(context.Background())
		}
		if err != nil {
			p.RedisErrors.Add(1)
			most := reconnectBackoffMax
			if p.cc != nil {
				most = clusterReconnectBackoffMax
			}
			backoff = min(most, max(100*time.Millisecond, backoff*2))
		} else {
			backoff = 0
		}
		if stopping { // one last flush, whatever its outcome: Stop bounds the wait
			p.writeStopped(context.Background())
			return
		}
	}
}

// reachable is nil while connected, else whether the server answers a bare connect (probe): while it
// does not, the loop leaves go-redis alone, so an outage logs nothing until the reconnect's one line.
func (p *Publisher) reachable(ctx context.Context) error {
	if p.probe == nil || p.connected.Load() {
		return nil
	}
	if err := p.probe(ctx); err != nil {
		return p.lost(err)
	}
	return nil
}

// drain flushes until the buffer holds less than a flush's worth of records. Whatever waits goes
// in one pipeline, up to sendBatches flushes' worth (each flush's frames as one Flush builds them):
// in a busy process the flush goroutine waits for its turn on the CPU and again for the poller to
// hand it Redis' reply (with GOMAXPROCS 1 and busy workers, up to ~10 ms each), so a round trip
// must carry the backlog, not a fixed 2,000 records.
func (p *Publisher) drain(ctx context.Context) error {
	for {
		n, err := p.flushBatches(ctx, sendBatches)
		if err != nil {
			return err
		}
		if n < sendBatches*p.opts.MaxFrameRecords {
			return nil
		}
	}
}

// sendBatches is how many flushes' worth of frames (each at most MaxFrameRecords records, one
// frame per topic) the loop sends in one pipeline at most when that many records wait: 64,000
// records by default, some 7 MB of frames.
const sendBatches = 32

func (p *Publisher) key(kind, topic string) string { return p.opts.Prefix + kind + ":" + topic }

func (p *Publisher) ensureEpoch(ctx context.Context) (string, error) {
	if p.epoch != "" {
		return p.epoch, nil
	}
	p.mayReconnect.Store(true) // (re)connecting here is expected: the checks follow
	defer p.mayReconnect.Store(false)
	var epoch, server string
	var masters map[string]string
	var err error
	if p.cc != nil {
		// The slot map and every master first, so that the epochs are read where the slots are now.
		if server, masters, err = p.clusterIdentity(ctx); err == nil {
			epoch, err = p.clusterEpochs(ctx)
		}
	} else {
		epochKey := p.opts.Prefix + "epoch"
		if err = p.rdb.SetNX(ctx, epochKey, randomHex(16), 0).Err(); err == nil {
			// redis.Nil: deleted between SET NX and GET: try again next flush
			epoch, err = p.rdb.Get(ctx, epochKey).Result()
		}
		if err == nil {
			server, err = p.serverIdentity(ctx)
		}
	}
	if err != nil {
		return "", p.lost(err)
	}
	kept := ""
	if p.lastEpoch != "" && epoch != p.lastEpoch {
		kept = "it had lost its data (a new epoch): rewriting every topic" + p.onNewEpoch(true)
	} else if p.lastEpoch != "" && !p.connected.Load() {
		// The same data set after an outage: did it keep what it confirmed, and is it the server
		// the frames in flight went to?
		moved := func(*topicState) bool { return server == "" || server != p.server }
		if p.cc != nil {
			moved = p.movedTopics(ctx, masters)
		}
		if kept, err = p.checkApplied(ctx, moved); err != nil {
			return "", p.lost(err)
		}
	}
	p.server, p.masters = server, masters
	if !p.downSince.IsZero() {
		// One line per reconnect, nothing while it is down (the loop retries quietly, with backoff).
		cause := "the connection dropped" // found when go-redis made a new one (redialGuard)
		var refused refusedDial
		if errors.As(p.downCause, &refused) {
			cause += ": go-redis dialled " + refused.addr + " anew"
		} else if p.downCause != nil && !errors.Is(p.downCause, errReconnected) {
			cause = p.downCause.Error()
		}
		p.opts.Logf("ctrlscope: reconnected to Redis after %v (%s); %s",
			p.clock.Since(p.downSince).Round(time.Millisecond), cause, kept)
		p.downSince, p.downCause = time.Time{}, nil
	}
	if !p.connected.Load() {
		// Back after an outage (or first contact): keys may have expired meanwhile, and the
		// presence entry aged; check and announce at once.
		p.mu.Lock()
		p.markStaleLocked()
		p.mu.Unlock()
	}
	p.epoch, p.lastEpoch = epoch, epoch
	p.connected.Store(true)
	return epoch, nil
}

func (p *Publisher) lost(err error) error {
	if p.downSince.IsZero() && p.lastEpoch != "" {
		p.downSince, p.downCause = p.clock.Now(), err
		chain := fmt.Sprintf("%v [", err)
		for e := err; e != nil; e = errors.Unwrap(e) {
			chain += fmt.Sprintf(" %T", e)
		}
		p.lostWith.Store(chain + " ]")
	}
	p.connected.Store(false)
	p.epoch = ""
	return err
}

// serverIdentity names the server this connection writes to and the history of its data: run_id
// (INFO server) changes when the server restarts, master_replid (INFO replication) when its data
// stops continuing what it had (a replica promoted, a master resynced from another). "" when the
// server does not say (INFO refused): then every reconnect counts as one to another server.
func (p *Publisher) serverIdentity(ctx context.Context) (string, error) {
	pipe := p.rdb.Pipeline()
	server := pipe.Info(ctx, "server")
	replication := pipe.Info(ctx, "replication")
	if _, err := pipe.Exec(ctx); err != nil {
		var refused redis.Error
		if errors.As(err, &refused) && !errors.Is(err, errReconnected) {
			return "", nil
		}
		return "", err
	}
	runID, replID := infoField(server.Val(), "run_id"), infoField(replication.Val(), "master_replid")
	if runID == "" || replID == "" {
		return "", nil
	}
	return runID + "/" + replID, nil
}

// infoField is the value of field in an INFO reply ("field:value" lines), or "".
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}

// onNewEpoch: Redis lost our data; every snapshot is rewritten from the mirror as a reset frame.
// Frames in flight Redis refused (status 0: the script wrote nothing) have their records put back at
// the front of the buffer; frames whose reply was lost (appliedUnknown) may have reached the old data
// set and a reader, so they are void. It says what became of the frames in flight, for the log.
func (p *Publisher) onNewEpoch(appliedUnknown bool) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	said := ""
	if appliedUnknown {
		if frames, records := p.voidInflightLocked(func(builtFrame) bool { return true }); frames > 0 {
			said = fmt.Sprintf("; %d frame(s) (%d records) in flight may have been applied there, counted as dropped", frames, records)
		}
	} else if in := p.inflight; in != nil {
		var back []pending
		for _, f := range in.frames {
			if recs, ok := in.records[f.topic]; ok {
				for _, r := range recs {
					back = append(back, pending{f.t, r, 0})
				}
				delete(in.records, f.topic)
			}
		}
		p.prepend(back)
		// The records put back may sit in any retired slab: let the GC have those.
		clear(p.retired)
		p.retired = p.retired[:0]
		p.inflight = nil
	}
	for _, t := range p.topics {
		t.reset = true
		t.confirmed = 0 // seqs of the old data set: nothing to check against the new one
		t.sent = t.sent[:0]
	}
	return said
}

// voidInflightLocked gives up the frames in flight that void names: Redis may have applied them
// where a reader read them, and the server written to now does not have them. Their records are
// never sent again (that would deliver them twice) but counted as dropped on their topic, which is
// rewritten whole (its hash lacks their state changes). A topic's frames are voided from some seq on,
// so the frames kept carry the first of its records. Returns the frames and records voided. p.mu held.
func (p *Publisher) voidInflightLocked(void func(f builtFrame) bool) (frames, records int64) {
	in := p.inflight
	if in == nil {
		return 0, 0
	}
	keep := in.frames[:0:0]
	kept := map[string]int{} // records of the frames kept, per topic
	for _, f := range in.frames {
		if !void(f) {
			keep = append(keep, f)
			kept[f.topic] += f.nrec
			continue
		}
		f.t.reset = true
		f.t.dropped += f.nrec
		frames++
		records += int64(f.nrec)
	}
	for topic, recs := range in.records {
		if n := kept[topic]; n > 0 {
			in.records[topic] = recs[:n]
		} else {
			delete(in.records, topic)
		}
	}
	if len(keep) == 0 {
		p.inflight = nil
	} else {
		in.frames = keep
	}
	p.FramesLost.Add(frames)
	p.RecordsLost.Add(records)
	return frames, records
}

// checkApplied, after a reconnect to the same epoch, resets every topic whose last confirmed frame
// Redis no longer has (its pubseq entry is behind). That is a failover to a replica the old master
// had not yet replicated those frames to (replication is asynchronous): the new master's snapshot
// hash misses their state changes, so the topic is rewritten whole (a reset frame, which makes every
// dashboard client resync) and the records of the frames Redis lost ride on it as "dropped".
//
// Frames in flight (their reply was lost) are retried unchanged only where their fate is known: on
// the server they went to (their topic not moved), which kept every frame it confirmed of their
// topic, its pubseq entry says whether it applied them and the seq check applies them once.
// Elsewhere the old server may have applied them and a reader read them there: the frames this
// server lacks are void, their records counted as dropped (voidInflightLocked).
func (p *Publisher) checkApplied(ctx context.Context, moved func(*topicState) bool) (string, error) {
	p.mu.Lock()
	var names []string
	var want []int64
	for name, t := range p.topics {
		if t.confirmed > 0 {
			names = append(names, name)
			want = append(want, t.confirmed)
		}
	}
	if in := p.inflight; in != nil {
		for _, f := range in.frames {
			if f.t.confirmed == 0 && !slices.Contains(names, f.topic) {
				names = append(names, f.topic)
				want = append(want, 0)
			}
		}
	}
	p.mu.Unlock()
	if len(names) == 0 {
		return "it kept every frame", nil
	}
	pipe := p.cmd.Pipeline()
	cmds := make([]*redis.StringCmd, len(names))
	for i, name := range names {
		cmds[i] = pipe.HGet(ctx, p.topics[name].seqKey, p.opts.Name)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	lost := map[string]int64{}
	stored := map[string]int64{}
	for i, c := range cmds {
		have, err := c.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", err
		}
		stored[names[i]] = have
		if have < want[i] {
			lost[names[i]] = have
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	voidFrames, voidRecords := p.voidInflightLocked(func(f builtFrame) bool {
		_, gone := lost[f.topic]
		return (gone || moved(f.t)) && f.seq > stored[f.topic]
	})
	void := ""
	if voidFrames > 0 {
		void = fmt.Sprintf("; %d frame(s) (%d records) in flight may have been applied by the Redis before it, "+
			"which it lacks: counted as dropped, not sent again", voidFrames, voidRecords)
	}
	if len(lost) == 0 {
		return "it kept every frame" + void, nil
	}
	var frames, records int64
	example := ""
	for name, have := range lost {
		t := p.topics[name]
		missing := 0
		for _, s := range t.sent {
			if s.seq > have {
				missing += s.nrec
			}
		}
		frames += t.confirmed - have
		records += int64(missing)
		t.dropped += missing
		t.reset = true
		t.confirmed = have
		t.sent = t.sent[:0]
		if example == "" || name < example {
			example = name
		}
	}
	p.FramesLost.Add(frames)
	p.RecordsLost.Add(records)
	return fmt.Sprintf("it lacks %d frame(s) (%d records) it had confirmed on %d topic(s), e.g. %s "+
		"(a failover to a replica that had not received them): rewriting those topics%s", frames, records, len(lost), example, void), nil
}

// confirm notes, per topic, the last seq Redis confirmed and the records the confirmed frames carried.
func (p *Publisher) confirm(frames []builtFrame, results []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range frames {
		if results[i] != 1 && results[i] != 2 {
			continue
		}
		t := f.t
		t.confirmed = max(t.confirmed, f.seq)
		if f.nrec > 0 {
			if len(t.sent) == confirmedHistory {
				n := copy(t.sent, t.sent[1:])
				t.sent = t.sent[:n]
			}
			t.sent = append(t.sent, sentFrame{f.seq, f.nrec})
		}
	}
}

func (p *Publisher) prepend(items []pending) {
	for p.n+len(items) > len(p.buf) && len(p.buf) < p.opts.BufferLimit {
		p.grow()
	}
	for i := len(items) - 1; i >= 0; i-- {
		if p.n == len(p.buf) { // full: the oldest (being prepended) is the one to drop
			items[i].t.dropped++
			p.RecordsDropped.Add(1)
			continue
		}
		p.head = (p.head - 1 + len(p.buf)) % len(p.buf)
		p.buf[p.head] = items[i]
		p.n++
	}
}

// addFlushHook has hook run before every flush builds its frames, with no lock held: a Telemetry's
// time rules (findings.go), whose records go in that flush.
func (p *Publisher) addFlushHook(hook func()) {
	p.hooksMu.Lock()
	p.hooks = append(p.hooks, hook)
	p.hooksMu.Unlock()
}

// Flush sends everything buffered now (at most MaxFrameRecords records) and returns how many
// records it sent. A frame that failed in flight is retried unchanged before any new one is built.
func (p *Publisher) Flush(ctx context.Context) (int, error) {
	return p.flushBatches(ctx, 1)
}

func (p *Publisher) flushBatches(ctx context.Context, batches int) (int, error) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.hooksMu.Lock()
	hooks := p.hooks
	p.hooksMu.Unlock()
	for _, hook := range hooks {
		hook()
	}
	return p.flush(ctx, batches, 0)
}

// build takes up to batches flushes' worth of records and builds their frames: each batch is what
// one Flush would send (one frame per topic, at most MaxFrameRecords records); the first carries
// the state changes.
func (p *Publisher) build(batches int) *inflight {
	now := roundMs(p.wallMs())
	p.mu.Lock()
	defer p.mu.Unlock()
	var in *inflight
	for b := 0; b < batches; b++ {
		if b > 0 && p.n == 0 {
			break
		}
		records, gen := p.takeRecordsGenLocked()
		frames := p.buildFramesLocked(records, now)
		if len(frames) == 0 {
			break
		}
		if in == nil {
			in = &inflight{frames: frames, records: records, maxGen: gen}
			continue
		}
		in.maxGen = max(in.maxGen, gen)
		in.frames = append(in.frames, frames...)
		for name, recs := range records {
			in.records[name] = append(in.records[name], recs...)
		}
	}
	return in
}

// loadScript loads the frame script where EVALSHA runs it: the server, or every master of a cluster.
// Not go-redis' ClusterClient.ScriptLoad, which loads it on every shard, replicas too: it dialed
// replicas the publisher never connects to, the dial guard refused them, and a healthy cluster
// counted a reconnect (TestPublisherSurvivesAMasterKill, 3 of 23 loaded runs). Every master has
// its connection by then: ensureEpoch's clusterIdentity asked each one.
func (p *Publisher) loadScript(ctx context.Context) error {
	if p.cc != nil {
		return p.cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return frameScript.Load(ctx, node).Err()
		})
	}
	return frameScript.Load(ctx, p.cmd).Err()
}

func (p *Publisher) flush(ctx context.Context, batches, depth int) (int, error) {
	epoch, err := p.ensureEpoch(ctx)
	if err != nil {
		return 0, err
	}
	if p.inflight == nil {
		in := p.build(batches)
		if in == nil {
			return 0, nil
		}
		p.inflight = in
	}
	in := p.inflight
	unsure := in.unsure
	in.unsure = true // until the replies are read
	results, err := p.send(ctx, epoch, in.frames)
	if err != nil && isNoScript(err) {
		// Redis restarted (or SCRIPT FLUSH): load the script and resend; seqs make this exactly-once.
		if lerr := p.loadScript(ctx); lerr != nil {
			return 0, p.lost(lerr)
		}
		results, err = p.send(ctx, epoch, in.frames)
	}
	if err != nil {
		return 0, p.lost(err)
	}
	p.inflight = nil
	p.confirm(in.frames, results)
	if p.cc != nil {
		if err := p.announce(ctx, in.frames, results); err != nil {
			return 0, p.lost(err)
		}
	}
	lost := map[string]bool{}
	for i, res := range results {
		if res == 0 {
			lost[in.frames[i].topic] = true
		}
	}
	if len(lost) > 0 && depth < 3 {
		// The epoch changed: rewrite every snapshot with a reset frame and resend the records of the
		// frames Redis refused -- unless an earlier attempt of theirs got no reply (then they may have
		// reached the old data set, and are void).
		keep := map[string][][]byte{}
		for t := range lost {
			keep[t] = in.records[t]
		}
		var refused []builtFrame
		for i, f := range in.frames {
			if results[i] == 0 {
				refused = append(refused, f)
			}
		}
		p.inflight = &inflight{frames: refused, records: keep}
		p.epoch = ""
		p.onNewEpoch(unsure)
		return p.flush(ctx, batches, depth+1)
	}
	sent := 0
	for _, recs := range in.records {
		sent += len(recs)
	}
	p.recycle(in)
	p.RecordsPublished.Add(int64(sent))
	p.FramesPublished.Add(int64(len(in.frames)))
	return sent, nil
}

// frameBufsKept bounds the confirmed frame buffers kept for reuse.
const frameBufsKept = 64

// recycle keeps the buffers of frames Redis confirmed, their record lists and the slabs of their
// records (nothing refers to them any more).
func (p *Publisher) recycle(in *inflight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseSlabs(in.maxGen)
	for _, f := range in.frames {
		if recs, ok := in.records[f.topic]; ok && f.t.spare == nil && cap(recs) <= 4*sendBatches*p.opts.MaxFrameRecords {
			clear(recs)
			f.t.spare = recs[:0]
			delete(in.records, f.topic)
		}
		if b, ok := f.args[2].([]byte); ok && len(p.bufs) < frameBufsKept && cap(b) <= 1<<20 {
			p.bufs = append(p.bufs, b[:0])
		}
	}
}

// frameBuf is an empty buffer of at least size bytes. Sizes are rounded up to a power of two (at
// least 4 KiB), so that confirmed buffers fit the next frames of their topic.
func (p *Publisher) frameBuf(size int) []byte { // p.mu held
	for i := len(p.bufs) - 1; i >= 0; i-- {
		if b := p.bufs[i]; cap(b) >= size {
			last := len(p.bufs) - 1
			p.bufs[i] = p.bufs[last]
			p.bufs[last] = nil
			p.bufs = p.bufs[:last]
			return b
		}
	}
	c := 4096
	for c < size {
		c <<= 1
	}
	return make([]byte, 0, c)
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// send runs one EVALSHA per frame in one pipeline; the status of each reply (0, 1 or 2).
func (p *Publisher) send(ctx context.Context, epoch string, frames []builtFrame) ([]int64, error) {
	if p.cc != nil {
		if err := p.topicEpochs(ctx, frames); err != nil {
			return nil, err
		}
	}
	pipe := p.cmd.Pipeline()
	cmds := make([]*redis.Cmd, len(frames))
	epochKey, topicsKey := p.opts.Prefix+"epoch", p.opts.Prefix+"topics"
	p.mu.Lock()
	for _, f := range frames {
		maxlen := p.opts.MaxLen
		if f.t.maxlen > 0 {
			maxlen = f.t.maxlen
		}
		f.args[0], f.args[1] = epoch, maxlen
		if p.cc != nil {
			f.args[0] = f.t.epoch
		}
	}
	p.mu.Unlock()
	for i, f := range frames {
		keys := []string{f.t.streamKey, f.t.snapKey, epochKey, topicsKey, f.t.seqKey}
		if p.cc != nil { // one slot: the script does not SADD (announce does)
			keys = []string{f.t.streamKey, f.t.snapKey, f.t.epochKey, f.t.seqKey}
		}
		cmds[i] = frameScript.EvalSha(ctx, pipe, keys, f.args...)
	}
	_, err := pipe.Exec(ctx)
	if err != nil {
		for _, c := range cmds {
			if isNoScript(c.Err()) {
				return nil, c.Err()
			}
		}
		return nil, err
	}
	out := make([]int64, len(cmds))
	for i, c := range cmds {
		vals, err := c.Slice()
		if err != nil || len(vals) == 0 {
			return nil, errors.Join(errors.New("ctrlscope: unexpected frame script reply"), err)
		}
		status, _ := vals[0].(int64)
		out[i] = status
	}
	return out, nil
}

func (p *Publisher) takeRecords() map[string][][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeRecordsLocked()
}

func (p *Publisher) buildFrames(records map[string][][]byte) []builtFrame {
	now := roundMs(p.wallMs())
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buildFramesLocked(records, now)
}

func (p *Publisher) takeRecordsLocked() map[string][][]byte { // p.mu held
	out, _ := p.takeRecordsGenLocked()
	return out
}

// takeRecordsGenLocked takes up to MaxFrameRecords records, by topic, and the newest slab
// generation among them.
func (p *Publisher) takeRecordsGenLocked() (map[string][][]byte, uint64) { // p.mu held
	out := map[string][][]byte{}
	n := min(p.n, p.opts.MaxFrameRecords)
	var gen uint64
	var topics []*topicState
	for i := 0; i < n; i++ {
		e := p.buf[p.head]
		p.buf[p.head] = pending{}
		p.head++
		if p.head == len(p.buf) {
			p.head = 0
		}
		t := e.t
		if t.taking == nil {
			t.taking = t.spare
			t.spare = nil
			if t.taking == nil {
				t.taking = make([][]byte, 0, 64)
			}
			topics = append(topics, t)
		}
		t.taking = append(t.taking, e.rec)
		gen = max(gen, e.gen)
	}
	for _, t := range topics {
		out[t.name] = t.taking
		t.taking = nil
	}
	p.n -= n
	return out, gen
}

func (p *Publisher) wallMs() float64 { return wallMs(p.clock.Now()) }

// wallMs is t in ms since the epoch, at µs resolution: the double nearest to a whole number of µs,
// which appendFloat writes without strconv (appendDecimal). Finer digits told nothing: records of
// other publishers (Python's time.time()) have µs at best, and a frame is ms apart.
func wallMs(t time.Time) float64 { return float64(t.UnixMicro()) / 1e3 }

func byKey(a, b *stateEntry) int { return strings.Compare(a.key, b.key) }

// freeLimit bounds the entries kept for reuse.
const freeLimit = 4096

func (p *Publisher) buildFramesLocked(records map[string][][]byte, now float64) []builtFrame { // p.mu held
	names := make([]string, 0, len(records))
	for name := range records {
		names = append(names, name)
	}
	for name, t := range p.topics {
		if _, ok := records[name]; !ok && (len(t.dirty) > 0 || t.reset || t.dropped > 0) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var frames []builtFrame
	for _, name := range names {
		t := p.topic(name)
		var entries []*stateEntry // set keys first, then deleted (a reset has no deletes)
		if t.reset {
			entries = make([]*stateEntry, 0, t.live)
			for _, e := range t.state {
				if e.live {
					entries = append(entries, e)
				}
			}
			slices.SortFunc(entries, byKey)
		} else {
			// Sorted: which keys share a frame is then the same in every run and implementation
			// (protocol/vectors/encode/state-chunking.json).
			entries = make([]*stateEntry, 0, len(t.dirty))
			nset := 0
			for _, e := range t.dirty {
				if e.live {
					entries = append(entries, e)
					nset++
				}
			}
			for _, e := range t.dirty {
				if !e.live {
					entries = append(entries, e)
				}
			}
			slices.SortFunc(entries[:nset], byKey)
			slices.SortFunc(entries[nset:], byKey)
		}
		var chunks [][]*stateEntry
		if t.reset {
			chunks = [][]*stateEntry{entries} // a reset carries its state in the hash write only
		} else {
			for i := 0; i < len(entries); i += StateKeysPerFrame {
				chunks = append(chunks, entries[i:min(i+StateKeysPerFrame, len(entries))])
			}
			if len(chunks) == 0 {
				chunks = [][]*stateEntry{nil}
			}
		}
		recs := records[name]
		recBytes := 0
		for _, r := range recs {
			recBytes += len(r) + 1
		}
		for n, chunk := range chunks {
			t.seq++
			size := 160 + len(p.opts.Name)
			if n == 0 {
				size += recBytes
			}
			if !t.reset {
				for _, e := range chunk {
					size += len(e.key) + 8 + len(e.val)
					if e.kind == valueQueueItem {
						size += 96
					}
				}
			}
			b := p.frameBuf(size)
			if t.reset {
				// "reset" first, else "r" first: readers tell frames apart by these bytes.
				b = append(b, `{"reset":true,"r":[`...)
			} else {
				b = append(b, `{"r":[`...)
			}
			if n == 0 {
				for i, r := range recs {
					if i > 0 {
						b = append(b, ',')
					}
					b = append(b, r...)
				}
			}
			b = append(b, `],"v":"`+ProtocolVersion+`","ts":`...)
			b = appendFloat(b, now)
			b = append(b, `,"src":`...)
			b = appendString(b, p.opts.Name)
			b = append(b, `,"seq":`...)
			b = strconv.AppendInt(b, t.seq, 10)
			// The snapshot's values are the very bytes of the frame's "s" (a reset: of vals).
			var offs []int
			var vals []byte
			if !t.reset {
				offs = make([]int, 0, 2*len(chunk))
				b = append(b, `,"s":{`...)
				for i, e := range chunk {
					if i > 0 {
						b = append(b, ',')
					}
					b = appendString(b, e.key)
					b = append(b, ':')
					if !e.live {
						b = append(b, "null"...)
					} else {
						start := len(b)
						b = e.appendValue(b)
						offs = append(offs, start, len(b))
					}
				}
				b = append(b, '}')
			} else {
				offs = make([]int, 0, 2*len(chunk))
				for _, e := range chunk {
					start := len(vals)
					vals = e.appendValue(vals)
					offs = append(offs, start, len(vals))
				}
			}
			if t.dropped > 0 && n == 0 {
				b = append(b, `,"dropped":`...)
				b = strconv.AppendInt(b, int64(t.dropped), 10)
			}
			b = append(b, '}')
			src := b
			if t.reset {
				src = vals
			}
			nset := len(offs) / 2
			reset := "0"
			if t.reset && n == 0 {
				reset = "1"
			}
			args := make([]any, 0, 8+2*nset+(len(chunk)-nset))
			args = append(args, nil, nil, b, name, p.opts.Name, t.seq, reset, nset)
			// The keys and values go in as *string (go-redis writes them as it writes a string or
			// a []byte): boxing a pointer allocates nothing, boxing a string or slice would, per key.
			// The values are strings over the frame's (or the reset's) bytes, which nothing writes
			// to until Redis confirmed the frame (recycle).
			strs := make([]string, len(chunk)+nset)
			j, v := 0, 0
			for _, e := range chunk {
				if e.live {
					strs[j] = e.key
					if n := offs[v+1] - offs[v]; n > 0 {
						strs[j+1] = unsafe.String(&src[offs[v]], n)
					}
					args = append(args, &strs[j], &strs[j+1])
					j += 2
					v += 2
				}
			}
			for _, e := range chunk {
				if !e.live {
					strs[j] = e.key
					args = append(args, &strs[j])
					j++
				}
			}
			nrec := 0
			if n == 0 {
				nrec = len(recs)
			}
			frames = append(frames, builtFrame{topic: name, t: t, seq: t.seq, nrec: nrec, args: args})
		}
		// Consumed now: the built frames are retried unchanged until Redis confirms them.
		for i, e := range t.dirty {
			e.dirty = false
			if !e.live { // the delete is in a frame: forget the key
				delete(t.state, e.key)
				if len(p.free) < freeLimit {
					*e = stateEntry{val: e.val[:0]}
					p.free = append(p.free, e)
				}
			}
			t.dirty[i] = nil
		}
		if cap(t.dirty) > 4*StateKeysPerFrame {
			t.dirty = nil
		} else {
			t.dirty = t.dirty[:0]
		}
		if t.reset { // frame.lua deletes and recreates the hash, without a TTL: set it again
			t.ttlAt = time.Time{}
			p.ttlStale.Store(true)
		}
		t.reset = false
		t.dropped = 0
	}
	return frames
}

func roundMs(ms float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(ms, 'f', 3, 64), 64)
	return r
}
