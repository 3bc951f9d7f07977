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
// retried unchanged (same seq): frame.lua applies a (publisher, seq) once.

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	Clock           clock.PassiveClock
}

type pending struct {
	topic string
	rec   []byte
}

type topicState struct {
	name    string
	state   map[string][]byte // key -> JSON value: the truth
	dirty   map[string]struct{}
	reset   bool // the first frame of every publisher run rewrites the snapshot
	dropped int
	seq     int64
	maxlen  int
}

type builtFrame struct {
	topic string
	args  []any // ARGV after epoch and maxlen: frame, topic, src, seq, reset, nset, pairs..., deletes...
}

type inflight struct {
	frames  []builtFrame
	records map[string][][]byte
}

// Publisher publishes frames to Redis (see the file comment). Create with NewPublisher, Start it,
// Stop it to flush what is left.
type Publisher struct {
	opts  PublisherOptions
	clock clock.PassiveClock
	rdb   *redis.Client

	mu     sync.Mutex // guards buf, topics
	buf    []pending  // a ring: head is the oldest
	head   int
	n      int
	topics map[string]*topicState

	flushMu   sync.Mutex // one flush at a time (the loop, Stop, tests)
	inflight  *inflight
	epoch     string
	lastEpoch string

	wake     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
	started  atomic.Bool

	RecordsPublished atomic.Int64
	FramesPublished  atomic.Int64
	RecordsDropped   atomic.Int64
	RedisErrors      atomic.Int64
	connected        atomic.Bool
}

// NewPublisher connects lazily to the Redis at url (redis://host:port/db). It fails only on a
// URL it cannot parse.
func NewPublisher(url string, opts PublisherOptions) (*Publisher, error) {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("ctrlscope: bad Redis URL %q: %w", url, err)
	}
	// Every call is bounded: a frame pipeline is small, so 5 s without an answer means Redis is gone.
	ro.ReadTimeout, ro.WriteTimeout, ro.DialTimeout = 5*time.Second, 5*time.Second, 2*time.Second
	ro.MaxRetries = -1 // the loop retries frames itself, unchanged; go-redis must not resend on its own
	if opts.Prefix == "" {
		opts.Prefix = "ctrlscope:"
	}
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
	if opts.Name == "" {
		host, _ := os.Hostname()
		opts.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(3))
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return &Publisher{opts: opts, clock: c, rdb: redis.NewClient(ro), topics: map[string]*topicState{},
		buf: make([]pending, 64), wake: make(chan struct{}, 1), stop: make(chan struct{}),
		stopped: make(chan struct{})}, nil
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
func (p *Publisher) Redis() *redis.Client { return p.rdb }

func (p *Publisher) topic(name string) *topicState {
	t := p.topics[name]
	if t == nil {
		t = &topicState{name: name, state: map[string][]byte{}, dirty: map[string]struct{}{}, reset: true}
		p.topics[name] = t
	}
	return t
}

// Publish queues one record (a JSON object with "k" and "ts") for topic. When the buffer is full
// the oldest record is dropped and counted against its topic, whose next frame says so.
func (p *Publisher) Publish(topic string, rec []byte) {
	p.mu.Lock()
	if p.n == p.opts.BufferLimit {
		old := p.buf[p.head]
		p.buf[p.head] = pending{}
		p.head = (p.head + 1) % len(p.buf)
		p.n--
		p.topic(old.topic).dropped++
		p.RecordsDropped.Add(1)
	}
	if p.n == len(p.buf) {
		p.grow()
	}
	p.buf[(p.head+p.n)%len(p.buf)] = pending{topic, rec}
	p.n++
	full := p.n >= p.opts.MaxFrameRecords
	p.mu.Unlock()
	if full {
		p.poke()
	}
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

// SetState sets key in topic's state to the JSON value (nil deletes the key).
func (p *Publisher) SetState(topic, key string, value []byte) {
	p.mu.Lock()
	t := p.topic(topic)
	if value == nil {
		if _, ok := t.state[key]; !ok {
			p.mu.Unlock()
			return
		}
		delete(t.state, key)
	} else {
		t.state[key] = value
	}
	t.dirty[key] = struct{}{}
	p.mu.Unlock()
}

// StateLen is how many keys topic's state holds.
func (p *Publisher) StateLen(topic string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.topics[topic]; t != nil {
		return len(t.state)
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
	keys := make([]string, 0, len(t.state))
	for k := range t.state {
		keys = append(keys, k)
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
	go p.run()
	return p
}

// Stop flushes what is buffered (best effort within timeout) and closes the connection.
func (p *Publisher) Stop(timeout time.Duration) {
	p.stopOnce.Do(func() {
		close(p.stop)
		if p.started.Load() {
			select {
			case <-p.stopped:
			case <-time.After(timeout):
			}
		}
		_ = p.rdb.Close()
	})
}

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
		err := p.drain(context.Background())
		if err != nil {
			p.RedisErrors.Add(1)
			backoff = min(2*time.Second, max(100*time.Millisecond, backoff*2))
		} else {
			backoff = 0
		}
		if stopping { // one last flush, whatever its outcome: Stop bounds the wait
			return
		}
	}
}

// drain flushes until the buffer holds less than a flush's worth of records.
func (p *Publisher) drain(ctx context.Context) error {
	for {
		n, err := p.Flush(ctx)
		if err != nil {
			return err
		}
		if n < p.opts.MaxFrameRecords {
			return nil
		}
	}
}

func (p *Publisher) key(kind, topic string) string { return p.opts.Prefix + kind + ":" + topic }

func (p *Publisher) ensureEpoch(ctx context.Context) (string, error) {
	if p.epoch != "" {
		return p.epoch, nil
	}
	epochKey := p.opts.Prefix + "epoch"
	if err := p.rdb.SetNX(ctx, epochKey, randomHex(16), 0).Err(); err != nil {
		return "", p.lost(err)
	}
	epoch, err := p.rdb.Get(ctx, epochKey).Result()
	if err != nil { // redis.Nil: deleted between SET NX and GET: try again next flush
		return "", p.lost(err)
	}
	if p.lastEpoch != "" && epoch != p.lastEpoch {
		p.onNewEpoch()
	}
	p.epoch, p.lastEpoch = epoch, epoch
	p.connected.Store(true)
	return epoch, nil
}

func (p *Publisher) lost(err error) error {
	p.connected.Store(false)
	p.epoch = ""
	return err
}

// onNewEpoch: Redis lost our data. Frames in flight are void (their records go back to the front
// of the buffer), every snapshot is rewritten from the mirror as a reset frame.
func (p *Publisher) onNewEpoch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.inflight; in != nil {
		p.inflight = nil
		var back []pending
		for _, f := range in.frames { // in frame order, each topic's records once
			if recs, ok := in.records[f.topic]; ok {
				for _, r := range recs {
					back = append(back, pending{f.topic, r})
				}
				delete(in.records, f.topic)
			}
		}
		p.prepend(back)
	}
	for _, t := range p.topics {
		t.reset = true
	}
}

func (p *Publisher) prepend(items []pending) {
	for p.n+len(items) > len(p.buf) && len(p.buf) < p.opts.BufferLimit {
		p.grow()
	}
	for i := len(items) - 1; i >= 0; i-- {
		if p.n == len(p.buf) { // full: the oldest (being prepended) is the one to drop
			p.topic(items[i].topic).dropped++
			p.RecordsDropped.Add(1)
			continue
		}
		p.head = (p.head - 1 + len(p.buf)) % len(p.buf)
		p.buf[p.head] = items[i]
		p.n++
	}
}

// Flush sends everything buffered now (at most MaxFrameRecords records) and returns how many
// records it sent. A frame that failed in flight is retried unchanged before any new one is built.
func (p *Publisher) Flush(ctx context.Context) (int, error) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	return p.flush(ctx, 0)
}

func (p *Publisher) flush(ctx context.Context, depth int) (int, error) {
	epoch, err := p.ensureEpoch(ctx)
	if err != nil {
		return 0, err
	}
	if p.inflight == nil {
		records := p.takeRecords()
		frames := p.buildFrames(records)
		if len(frames) == 0 {
			return 0, nil
		}
		p.inflight = &inflight{frames: frames, records: records}
	}
	in := p.inflight
	results, err := p.send(ctx, epoch, in.frames)
	if err != nil && isNoScript(err) {
		// Redis restarted (or SCRIPT FLUSH): load the script and resend; seqs make this exactly-once.
		if lerr := frameScript.Load(ctx, p.rdb).Err(); lerr != nil {
			return 0, p.lost(lerr)
		}
		results, err = p.send(ctx, epoch, in.frames)
	}
	if err != nil {
		return 0, p.lost(err)
	}
	p.inflight = nil
	lost := map[string]bool{}
	for i, res := range results {
		if res == 0 {
			lost[in.frames[i].topic] = true
		}
	}
	if len(lost) > 0 && depth < 3 {
		// The epoch changed: rewrite every snapshot with a reset frame and resend the records.
		keep := map[string][][]byte{}
		for t := range lost {
			keep[t] = in.records[t]
		}
		p.inflight = &inflight{frames: in.frames, records: keep}
		p.epoch = ""
		p.onNewEpoch()
		return p.flush(ctx, depth+1)
	}
	sent := 0
	for _, recs := range in.records {
		sent += len(recs)
	}
	p.RecordsPublished.Add(int64(sent))
	p.FramesPublished.Add(int64(len(in.frames)))
	return sent, nil
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// send runs one EVALSHA per frame in one pipeline; the status of each reply (0, 1 or 2).
func (p *Publisher) send(ctx context.Context, epoch string, frames []builtFrame) ([]int64, error) {
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(frames))
	epochKey, topicsKey := p.opts.Prefix+"epoch", p.opts.Prefix+"topics"
	p.mu.Lock()
	maxlens := make([]int, len(frames))
	for i, f := range frames {
		maxlens[i] = p.opts.MaxLen
		if t := p.topics[f.topic]; t != nil && t.maxlen > 0 {
			maxlens[i] = t.maxlen
		}
	}
	p.mu.Unlock()
	for i, f := range frames {
		keys := []string{p.key("stream", f.topic), p.key("snap", f.topic), epochKey, topicsKey, p.key("pubseq", f.topic)}
		args := append([]any{epoch, maxlens[i]}, f.args...)
		cmds[i] = frameScript.EvalSha(ctx, pipe, keys, args...)
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
	out := map[string][][]byte{}
	n := min(p.n, p.opts.MaxFrameRecords)
	for i := 0; i < n; i++ {
		e := p.buf[p.head]
		p.buf[p.head] = pending{}
		p.head = (p.head + 1) % len(p.buf)
		out[e.topic] = append(out[e.topic], e.rec)
	}
	p.n -= n
	return out
}

func (p *Publisher) wallMs() float64 { return wallMs(p.clock.Now()) }

func wallMs(t time.Time) float64 {
	return float64(t.UnixMilli()) + float64(t.Nanosecond()%1_000_000)/1e6
}

func (p *Publisher) buildFrames(records map[string][][]byte) []builtFrame {
	now := roundMs(p.wallMs())
	p.mu.Lock()
	defer p.mu.Unlock()
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
		var keys []string // set keys first, then deleted (a reset has no deletes)
		var deleted map[string]bool
		if t.reset {
			keys = make([]string, 0, len(t.state))
			for k := range t.state {
				keys = append(keys, k)
			}
			sort.Strings(keys)
		} else {
			// Sorted: which keys share a frame is then the same in every run and implementation
			// (protocol/vectors/encode/state-chunking.json).
			dirty := make([]string, 0, len(t.dirty))
			for k := range t.dirty {
				dirty = append(dirty, k)
			}
			sort.Strings(dirty)
			deleted = map[string]bool{}
			var gone []string
			for _, k := range dirty {
				if _, ok := t.state[k]; ok {
					keys = append(keys, k)
				} else {
					deleted[k] = true
					gone = append(gone, k)
				}
			}
			keys = append(keys, gone...)
		}
		var chunks [][]string
		if t.reset {
			chunks = [][]string{keys} // a reset carries its state in the hash write only
		} else {
			for i := 0; i < len(keys); i += StateKeysPerFrame {
				chunks = append(chunks, keys[i:min(i+StateKeysPerFrame, len(keys))])
			}
			if len(chunks) == 0 {
				chunks = [][]string{nil}
			}
		}
		for n, chunk := range chunks {
			t.seq++
			b := make([]byte, 0, 256)
			if t.reset {
				// "reset" first, else "r" first: readers tell frames apart by these bytes.
				b = append(b, `{"reset":true,"r":[`...)
			} else {
				b = append(b, `{"r":[`...)
			}
			if n == 0 {
				for i, r := range records[name] {
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
			if !t.reset {
				b = append(b, `,"s":{`...)
				for i, k := range chunk {
					if i > 0 {
						b = append(b, ',')
					}
					b = appendString(b, k)
					b = append(b, ':')
					if deleted[k] {
						b = append(b, "null"...)
					} else {
						b = append(b, t.state[k]...)
					}
				}
				b = append(b, '}')
			}
			if t.dropped > 0 && n == 0 {
				b = append(b, `,"dropped":`...)
				b = strconv.AppendInt(b, int64(t.dropped), 10)
			}
			b = append(b, '}')
			var pairs, gone []any
			for _, k := range chunk {
				if deleted[k] {
					gone = append(gone, k)
				} else {
					pairs = append(pairs, k, string(t.state[k]))
				}
			}
			reset := "0"
			if t.reset && n == 0 {
				reset = "1"
			}
			args := make([]any, 0, 6+len(pairs)+len(gone))
			args = append(args, string(b), name, p.opts.Name, t.seq, reset, len(pairs)/2)
			args = append(args, pairs...)
			args = append(args, gone...)
			frames = append(frames, builtFrame{topic: name, args: args})
		}
		// Consumed now: the built frames are retried unchanged until Redis confirms them.
		t.reset = false
		t.dirty = map[string]struct{}{}
		t.dropped = 0
	}
	return frames
}

func roundMs(ms float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(ms, 'f', 3, 64), 64)
	return r
}
