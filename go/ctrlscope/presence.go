package ctrlscope

// Presence and retention (protocol/redis-layout.md, "Presence and retention"; the Python reference
// is controllers/telemetry/presence.py and RedisPublisher.refresh).
//
// A snapshot in Redis outlives the process that wrote it, so a reader cannot tell from the keys
// alone whether a worker still runs. Every run therefore keeps one presence entry in the hash
// {prefix}publishers (field: the publisher id), refreshed at least every PresenceRefresh, and
// writes "stopped" into it when it stops cleanly. And it gives its topics' stream and snapshot keys
// a TTL of the retention, refreshed every retention/4, so that the keys of a run silent for longer
// than the retention expire by themselves. A refresh that finds a snapshot gone (it expired during
// a long outage, or an operator forgot the worker) rewrites the topic with a reset frame: only this
// process knows the state, and an expiry must never leave a live topic half written.
//
// The refresh runs on the publisher's goroutine right after a successful flush, under flushMu:
// a reset frame built and sent meanwhile would otherwise recreate a hash without a TTL that the
// refresh then records as refreshed.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// EnvRetention is how long a publisher's keys outlive it: seconds, or a number with s/m/h/d.
	EnvRetention = "CTRLSCOPE_RETENTION"
	// DefaultRetention applies when EnvRetention is unset or empty.
	DefaultRetention = time.Hour
	// MinRetention: below it the keys would expire between two refreshes of a busy publisher.
	MinRetention = time.Minute
	// PresenceRefresh is how often a running publisher rewrites its presence entry; readers take
	// a run as alive while its entry is at most 10 s old, so a few refreshes may be lost.
	PresenceRefresh = 2 * time.Second
)

var retentionSyntax = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$`)

var retentionUnits = map[string]float64{"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

// ParseRetention reads a CTRLSCOPE_RETENTION value: "3600", "90m", "6h", "2d" ("" is the default).
// It refuses anything else, and anything under MinRetention, with an error that says why.
func ParseRetention(raw string) (time.Duration, error) {
	if strings.TrimSpace(raw) == "" {
		return DefaultRetention, nil
	}
	m := retentionSyntax.FindStringSubmatch(raw)
	if m == nil {
		return 0, fmt.Errorf("%s must be a duration like 3600, 90m, 6h or 2d, not %q", EnvRetention, raw)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%s must be a duration like 3600, 90m, 6h or 2d, not %q", EnvRetention, raw)
	}
	seconds := n * retentionUnits[m[2]]
	if seconds > float64(1<<62)/float64(time.Second) {
		return 0, fmt.Errorf("%s is too long (got %q)", EnvRetention, raw)
	}
	d := time.Duration(seconds * float64(time.Second))
	if d < MinRetention {
		return 0, fmt.Errorf("%s must be at least %d s (got %q): a worker's keys would expire between two refreshes",
			EnvRetention, int(MinRetention/time.Second), raw)
	}
	return d, nil
}

// RetentionFromEnv is ParseRetention of $CTRLSCOPE_RETENTION.
func RetentionFromEnv() (time.Duration, error) { return ParseRetention(os.Getenv(EnvRetention)) }

// presenceEntry is the JSON value of this run's field in {prefix}publishers, keys in the order
// the spec lists them. Name is nil until Describe: a publisher that does not say is "publisher" null.
type presenceEntry struct {
	Role      string   `json:"role"`
	Name      *string  `json:"name"`
	Host      string   `json:"host"`
	PID       int      `json:"pid"`
	Started   float64  `json:"started"`
	Seen      float64  `json:"seen"`
	Stopped   *float64 `json:"stopped"`
	Topics    []string `json:"topics"` // never null: a run that has sent nothing yet lists []
	Retention float64  `json:"retention"`
	V         string   `json:"v"`
}

// Describe says who publishes, for the presence entry: role "worker", "simulator", "replay",
// "scenario" (or "publisher", the default), and its name (a worker's topic segment). NewTelemetry
// calls it for its worker. The entry is rewritten on the loop's next round.
func (p *Publisher) Describe(role, name string) {
	p.mu.Lock()
	p.role, p.name = role, &name
	p.mu.Unlock()
	p.presenceStale.Store(true)
	p.poke()
}

// Retention is how long this publisher's keys outlive it (their TTL).
func (p *Publisher) Retention() time.Duration { return p.opts.Retention }

func (p *Publisher) presenceJSON(stopped bool) []byte {
	now := roundMs(p.wallMs())
	p.mu.Lock()
	e := presenceEntry{Role: p.role, Name: p.name, Host: p.host, PID: os.Getpid(), Started: p.startedMs,
		Seen: now, Topics: make([]string, 0, len(p.topics)), Retention: p.opts.Retention.Seconds(), V: ProtocolVersion}
	for name, t := range p.topics {
		if t.seq > 0 { // a frame was built for it: it is (or is about to be) in Redis
			e.Topics = append(e.Topics, name)
		}
	}
	p.mu.Unlock()
	sort.Strings(e.Topics)
	if e.Started == 0 { // never started (a test flushing by hand): the run began now
		e.Started = now
	}
	if stopped {
		e.Stopped = &now
	}
	b, err := json.Marshal(e)
	if err != nil { // the fields are strings and numbers: cannot happen
		panic(err)
	}
	return b
}

// Refresh rewrites this run's presence entry and the TTL of every topic's keys now, whatever is
// due, and marks for a reset frame the topics whose snapshot it found gone (the next Flush rewrites
// them). The loop does this by itself; Refresh is for tests and callers that flush by hand.
func (p *Publisher) Refresh(ctx context.Context) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	return p.refresh(ctx, true)
}

// refreshDue is refresh as the loop calls it: only what is due.
func (p *Publisher) refreshDue(ctx context.Context) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	return p.refresh(ctx, false)
}

// refresh sends, in one pipeline, the presence entry when it is due (every PresenceRefresh, at once
// after Describe or a reconnect) and a PEXPIRE of the stream and snapshot of every topic whose TTL
// is due (every retention/4; at once after a reset frame recreated its hash, or a reconnect).
func (p *Publisher) refresh(ctx context.Context, force bool) error { // p.flushMu held
	now := p.clock.Now()
	presenceDue := force || !now.Before(p.presenceDue) || p.presenceStale.Load()
	// Checking every topic each round (every 20 ms) would take p.mu from the producers for nothing:
	// look only when the presence is due anyway (the TTLs' interval is minutes) or a frame left a
	// hash without its TTL.
	if !presenceDue && !p.ttlStale.Load() {
		return nil
	}
	// Due a little early: the TTLs are looked at only with the presence entry's refresh, and must
	// be set again within retention/4.
	ttlEvery := p.opts.Retention/4 - PresenceRefresh
	var due []*topicState
	p.mu.Lock()
	// Frames in flight (their send failed) may include a reset that deletes the hash after this
	// PEXPIRE: leave the TTLs until they went out (the loop refreshes only after a good flush).
	if p.inflight == nil {
		p.ttlStale.Store(false)
		for _, t := range p.topics {
			if t.seq > 0 && (force || t.ttlAt.IsZero() || now.Sub(t.ttlAt) >= ttlEvery) {
				due = append(due, t)
			}
		}
	}
	p.mu.Unlock()
	if !presenceDue && len(due) == 0 {
		return nil
	}
	p.presenceStale.Store(false)
	pipe := p.cmd.Pipeline()
	ttl := p.opts.Retention
	snaps := make([]*redis.BoolCmd, len(due))
	for i, t := range due {
		snaps[i] = pipe.PExpire(ctx, t.snapKey, ttl)
		pipe.PExpire(ctx, t.streamKey, ttl)
	}
	if presenceDue {
		pipe.HSet(ctx, p.opts.Prefix+"publishers", p.opts.Name, p.presenceJSON(false))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		// Nothing is recorded as refreshed; the reconnect (ensureEpoch) makes everything due again.
		return p.lost(err)
	}
	lost := 0
	p.mu.Lock()
	for i, t := range due {
		if snaps[i].Val() {
			t.ttlAt = now
		} else { // gone: the next flush rewrites it whole; its TTL is set again after that frame
			t.reset = true
			t.ttlAt = time.Time{}
			lost++
		}
	}
	p.mu.Unlock()
	if presenceDue {
		p.presenceDue = now.Add(PresenceRefresh)
	}
	if lost > 0 {
		p.SnapshotsRewritten.Add(int64(lost))
		p.poke()
	}
	return nil
}

// markStaleLocked makes the next refresh set every topic's TTL and rewrite the presence entry:
// after an outage, keys may have expired meanwhile and the entry aged past alive.
func (p *Publisher) markStaleLocked() { // p.mu held
	for _, t := range p.topics {
		t.ttlAt = time.Time{}
	}
	p.ttlStale.Store(true)
	p.presenceStale.Store(true)
}

// writeStopped records in the presence entry that this run stopped cleanly (the loop's last act).
func (p *Publisher) writeStopped(ctx context.Context) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	if !p.connected.Load() {
		return // the entry then shows the run as stopped once it ages
	}
	if err := p.cmd.HSet(ctx, p.opts.Prefix+"publishers", p.opts.Name, p.presenceJSON(true)).Err(); err != nil {
		p.RedisErrors.Add(1)
	}
}
