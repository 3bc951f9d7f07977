package ctrlscope

// Findings (protocol v1.7, record kind "finding"): a key or an informer is stuck or sick, stated
// by the publisher from the calls it already gets, with the same rules as ctrlscope's Python
// observer (controllers/telemetry/findings.py and detectors.py; protocol/vectors/encode fix both).
//
// A findingBook holds one component's open findings and publishes them the protocol's way: when
// one opens, when its count, detail or message change (at most once per FindingUpdateMs: a change
// within a second of the finding's last record is held, and the first flush a second later
// publishes it with the values of then), and when it closes. The open ones are also in the
// component's entry as findings (at most FindingsMax, the earliest opened dropped for good).
//
// Key rules live in the controller's ControllerTopic (keyState, under its mu): hot_loop, failing,
// terminal, slow_reconcile and waiting (fed by the queue named like the controller). Informer
// rules live in the InformerTopic (informerRules): not_synced, watch_silent, relist_storm. The time
// rules run at every flush (Telemetry.evaluate, before any frame is built), with the clock's time.

import (
	"bytes"
	"container/heap"
	"slices"
	"strconv"
	"strings"
)

type findingID struct {
	kind    FindingKind
	subject string
}

// finding is one open finding: its values now, and what was last published of them.
type finding struct {
	findingID
	since   float64
	count   int
	detail  []byte // JSON
	message string

	publishedAt     float64
	pubCount        int
	pubDetail       []byte
	pubMessage      string
	listed, dropped bool // in its component's entry; dropped from it (FindingsMax) for good
}

// held: a change not published yet.
func (f *finding) held() bool {
	return f.count != f.pubCount || f.message != f.pubMessage || !bytes.Equal(f.detail, f.pubDetail)
}

// findingBook is one component's open findings, guarded by its owner's mu.
type findingBook struct {
	tel     *Telemetry
	comp    ComponentKind
	name    string
	publish func(rec []byte) next // on the owner's topic, its mu held
	open    map[findingID]*finding
	listed  []*finding // in the component's entry, earliest opened first
}

func (b *findingBook) get(kind FindingKind, subject string) *finding {
	return b.open[findingID{kind, subject}]
}

// report: the rule holds. It opens the finding (published now) or updates its values (published
// now, or held when its last record is less than a second old); since counts only when it opens.
func (b *findingBook) report(kind FindingKind, subject string, ts, since float64, count int, detail []byte,
	message string) next {
	f := b.get(kind, subject)
	if f == nil {
		if b.open == nil {
			b.open = map[findingID]*finding{}
		}
		f = &finding{findingID: findingID{kind, subject}, since: since, count: count, detail: detail, message: message}
		b.open[f.findingID] = f
		return b.publishFinding(f, ts, true)
	}
	f.count, f.detail, f.message = count, detail, message
	if f.held() && ts-f.publishedAt >= FindingUpdateMs {
		return b.publishFinding(f, ts, true)
	}
	return nextNothing
}

// close: the rule no longer holds; the close carries the last values (a held change with it).
func (b *findingBook) close(kind FindingKind, subject string, ts float64) next {
	f := b.get(kind, subject)
	if f == nil {
		return nextNothing
	}
	delete(b.open, f.findingID)
	return b.publishFinding(f, ts, false)
}

// flushHeld publishes kind's held changes whose last record is a second old, by subject.
func (b *findingBook) flushHeld(kind FindingKind, ts float64) next {
	var due []*finding
	for _, f := range b.open {
		if f.kind == kind && f.held() && ts-f.publishedAt >= FindingUpdateMs {
			due = append(due, f)
		}
	}
	slices.SortFunc(due, func(x, y *finding) int { return strings.Compare(x.subject, y.subject) })
	n := nextNothing
	for _, f := range due {
		n = max(n, b.publishFinding(f, ts, true))
	}
	return n
}

func (b *findingBook) publishFinding(f *finding, ts float64, open bool) next {
	r := newRecord(RecordKindFinding).str("finding", string(f.kind)).str("subject", f.subject).boolean("open", open).
		float("since", f.since).int("count", f.count).raw("detail", f.detail).str("message", f.message)
	n := b.publish(r.done(ts))
	r.release()
	f.publishedAt, f.pubCount, f.pubDetail, f.pubMessage = ts, f.count, f.detail, f.message
	switch {
	case open && !f.listed && !f.dropped: // it opens: listed, the earliest opened dropped when full
		if len(b.listed) >= FindingsMax {
			b.listed[0].listed, b.listed[0].dropped = false, true
			b.listed = b.listed[1:]
		}
		f.listed = true
		b.listed = append(b.listed, f)
	case !f.listed:
		return n // dropped from the entry: it does not come back
	case !open:
		f.listed = false
		b.listed = slices.DeleteFunc(b.listed, func(x *finding) bool { return x == f })
	}
	entries := make(map[string]any, len(b.listed))
	for _, x := range b.listed {
		entries[string(x.kind)+"/"+x.subject] = map[string]any{"finding": string(x.kind), "subject": x.subject,
			"since": x.since, "count": x.count, "message": x.message}
	}
	b.tel.component(b.name, b.comp, map[string]any{"findings": entries})
	return n
}

// -- key rules ------------------------------------------------------------------------------------

// keyState is what a controller keeps about one request key (ControllerTopic.mu). A key with
// nothing pending, no streak, no failures, no attempt running and not in its queue has none.
type keyState struct {
	triggers pendingTriggers
	// the delay of the key's last add_rate_limited since its attempt started
	rateLimited    float64
	hasRateLimited bool

	// hot_loop: consecutive self-triggered attempts, and the diff paths of their triggers
	streak                   int
	streakFirst, streakLast  float64
	streakPaths              map[string]int
	failures                 bool // failing: consecutive retried results (a streak, or a retry delay only)
	failCount                int
	failFirst, failLast      float64
	failError                string
	failDelay                float64
	hasFailDelay             bool
	running                  bool // an attempt is running, since started
	started                  float64
	worker                   int
	queued                   bool // waiting: in the queue (ready since readySince, or being processed)
	readySince               float64
	hasReadySince            bool
	processing               bool
	streaking, runningListed bool // in the controller's streaking / running sets
}

func (ks *keyState) empty() bool {
	return ks.triggers.count == 0 && !ks.hasRateLimited && ks.streak == 0 && !ks.failures && !ks.running && !ks.queued
}

// gcLocked forgets key once nothing is kept about it.
func (c *ControllerTopic) gcLocked(key string, ks *keyState) { // c.mu held
	if ks != nil && ks.empty() {
		delete(c.keys, key)
	}
}

// dueEntry: key, ready since since, waits too long at deadline (a heap by deadline).
type dueEntry struct {
	deadline, since float64
	key             string
}

type dueHeap []dueEntry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].key < h[j].key
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// push and pop are container/heap's Push and Pop, typed: heap.Push takes an any, which boxes the
// dueEntry (an allocation for every key that becomes ready, on the queue's hot path).
func (h *dueHeap) push(e dueEntry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.Less(i, parent) {
			break
		}
		s.Swap(i, parent)
		i = parent
	}
}

func (h *dueHeap) pop() dueEntry {
	s := *h
	n := len(s) - 1
	s.Swap(0, n)
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && s.Less(r, j) {
			j = r
		}
		if !s.Less(j, i) {
			break
		}
		s.Swap(i, j)
		i = j
	}
	e := s[n]
	s[n] = dueEntry{} // its key string is not kept alive by the backing array
	*h = s[:n]
	return e
}

// detect is the controller's thresholds (nil: provenance and detection are off).
func (c *ControllerTopic) detect() *DetectConfig { return c.tel.detect }

// attemptStartedLocked: key's attempt started at now, its triggers taken (after its record).
func (c *ControllerTopic) attemptStartedLocked(key string, ks *keyState, worker int, now float64, selfTriggered bool,
	listed []trigger) next {
	cfg := c.detect()
	n := nextNothing
	if selfTriggered {
		if ks.streak == 0 {
			ks.streakFirst = now
			ks.streakPaths = map[string]int{}
			c.listStreaking(key, ks, true)
		}
		ks.streak++
		ks.streakLast = now
		for i := range listed {
			for _, p := range listed[i].paths {
				ks.streakPaths[p]++
			}
		}
		if ks.streak >= cfg.HotLoopAttempts {
			n = c.reportHotLoop(key, ks, now)
		}
	} else if ks.streak > 0 {
		n = c.breakStreak(key, ks, now)
	}
	if ks.failures && ks.failCount == 0 {
		ks.hasFailDelay = false // a new streak may begin: only its own retries' delays count
	}
	ks.running, ks.started, ks.worker = true, now, worker
	if !ks.runningListed {
		if c.running == nil {
			c.running = map[string]*keyState{}
		}
		c.running[key] = ks
		ks.runningListed = true
	}
	return n
}

func (c *ControllerTopic) listStreaking(key string, ks *keyState, on bool) {
	if on {
		if c.streaking == nil {
			c.streaking = map[string]*keyState{}
		}
		c.streaking[key] = ks
	} else {
		delete(c.streaking, key)
	}
	ks.streaking = on
}

func (c *ControllerTopic) reportHotLoop(key string, ks *keyState, now float64) next {
	paths := make([]string, 0, len(ks.streakPaths))
	for p := range ks.streakPaths {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(a, b string) int {
		if d := ks.streakPaths[b] - ks.streakPaths[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	// metadata.managedFields changes with every write (the API server stamps the manager's entry with
	// the write's time): it says nothing about what the loop changes, so it is neither listed (unless
	// it is all that changed) nor judged.
	if len(paths) > 1 {
		paths = slices.DeleteFunc(paths, func(p string) bool { return p == managedFieldsPath })
	}
	fields := paths[:min(5, len(paths))]
	under := func(prefix string) bool {
		judged := 0
		for _, p := range paths {
			if p == managedFieldsPath {
				continue
			}
			if p != prefix && !strings.HasPrefix(p, prefix+".") {
				return false
			}
			judged++
		}
		return judged > 0
	}
	statusOnly := under("status")
	advice := HotLoopAdvice["other"]
	switch {
	case statusOnly:
		advice = HotLoopAdvice["status"]
	case under("metadata"):
		advice = HotLoopAdvice["metadata"]
	}
	d := newFields()
	if ks.streakLast == ks.streakFirst {
		d.optFloat("rate", nil)
	} else {
		d.float("rate", float64(ks.streak-1)/((ks.streakLast-ks.streakFirst)/1000))
	}
	d.strs("fields", fields).boolean("status_only", statusOnly).str("advice", advice)
	message := strconv.Itoa(ks.streak) + " reconciles in a row triggered by its own writes"
	if len(fields) > 0 {
		message += "; changing: " + strings.Join(fields, ", ")
	}
	detail := d.object()
	d.release()
	return c.findings.report(FindingKindHotLoop, key, now, ks.streakFirst, ks.streak, detail, message)
}

func (c *ControllerTopic) breakStreak(key string, ks *keyState, now float64) next {
	ks.streak, ks.streakPaths = 0, nil
	c.listStreaking(key, ks, false)
	return c.findings.close(FindingKindHotLoop, key, now)
}

// attemptEndedLocked: key's attempt ended with result at now (after its record).
func (c *ControllerTopic) attemptEndedLocked(key string, result ReconcileResult, requeueAfter float64, errText string,
	now float64) next {
	ks := c.keyLocked(key)
	n := nextNothing
	retried := result == ReconcileResultError || result == ReconcileResultPanic || result == ReconcileResultRequeue
	switch {
	case retried:
		if !ks.failures || ks.failCount == 0 {
			ks.failFirst = now
		}
		ks.failures = true
		ks.failCount++
		ks.failLast, ks.failError = now, errText
		n = max(n, c.reportFailing(key, ks, now))
	case ks.failures:
		ks.failures, ks.failCount, ks.hasFailDelay = false, 0, false
		n = max(n, c.findings.close(FindingKindFailing, key, now))
	}
	switch result {
	case ReconcileResultTerminal:
		count := 1
		if f := c.findings.get(FindingKindTerminal, key); f != nil {
			count = f.count + 1
		}
		d := newFields().optStr("error", errText)
		detail := d.object()
		d.release()
		message := "terminal error"
		if errText != "" {
			message += ": " + errText
		}
		n = max(n, c.findings.report(FindingKindTerminal, key, now, now, count, detail, message))
	case ReconcileResultSuccess:
		n = max(n, c.findings.close(FindingKindTerminal, key, now))
	}
	if ks.running {
		ks.running = false
		delete(c.running, key)
		ks.runningListed = false
		n = max(n, c.findings.close(FindingKindSlowReconcile, key, now))
	}
	// provenance: the trigger the result leaves
	switch {
	case retried:
		ks.triggers.add(trigger{kind: TriggerKindRetry, ts: now, result: result, delay: ks.rateLimited,
			hasDelay: ks.hasRateLimited})
	case result == ReconcileResultRequeueAfter:
		ks.triggers.add(trigger{kind: TriggerKindRequeueAfter, ts: now, delay: requeueAfter, hasDelay: true})
	}
	c.gcLocked(key, ks)
	return n
}

func (c *ControllerTopic) reportFailing(key string, ks *keyState, now float64) next {
	if ks.failCount < c.detect().FailingAfter {
		return nextNothing
	}
	d := newFields().float("since_first_failure_s", (ks.failLast-ks.failFirst)/1000).optStr("last_error", ks.failError)
	if ks.hasFailDelay {
		d.float("next_delay", ks.failDelay)
	} else {
		d.optFloat("next_delay", nil)
	}
	d.optFloat("max_delay", rateLimiterMax(c.limiter))
	detail := d.object()
	d.release()
	message := "failed " + strconv.Itoa(ks.failCount) + " times in a row"
	if ks.failError != "" {
		message += ": " + ks.failError
	}
	return c.findings.report(FindingKindFailing, key, now, ks.failFirst, ks.failCount, detail, message)
}

// queueOpLocked: a record of the queue named like the controller (after it): the waiting rule, a
// retry's delay for failing and for the retry trigger.
func (c *ControllerTopic) queueOpLocked(op QueueOp, key string, now float64, delay *float64) next {
	if op == QueueOpShutdown {
		for k, ks := range c.keys {
			if ks.queued {
				ks.queued, ks.hasReadySince, ks.processing = false, false, false
				c.gcLocked(k, ks)
			}
		}
		return nextNothing
	}
	n := nextNothing
	switch op {
	case QueueOpAdd, QueueOpRequeue, QueueOpAddAfter, QueueOpAddRateLimited:
		ks := c.keyLocked(key)
		at := now
		if op == QueueOpAddAfter || op == QueueOpAddRateLimited {
			if delay != nil {
				at = now + *delay*1000
			}
		}
		ks.queued = true
		if !ks.hasReadySince || at < ks.readySince {
			c.readySinceLocked(key, ks, at)
		}
		if op == QueueOpAddRateLimited {
			ks.failures = true
			ks.failDelay, ks.hasFailDelay = 0, delay != nil
			if delay != nil {
				ks.failDelay = *delay
			}
			if c.findings.get(FindingKindFailing, key) != nil {
				n = c.reportFailing(key, ks, now)
			}
			// provenance: the delay of the retry it answers (before or after the attempt's result)
			ks.rateLimited, ks.hasRateLimited = ks.failDelay, ks.hasFailDelay
			for i := len(ks.triggers.list) - 1; i >= 0; i-- {
				if tr := &ks.triggers.list[i]; tr.kind == TriggerKindRetry {
					if !tr.hasDelay {
						tr.delay, tr.hasDelay = ks.rateLimited, ks.hasRateLimited
					}
					break
				}
			}
		}
	case QueueOpGet:
		ks := c.keyLocked(key)
		ks.queued, ks.hasReadySince, ks.processing = true, false, true
		n = c.findings.close(FindingKindWaiting, key, now)
	case QueueOpDone:
		ks := c.keys[key]
		if ks == nil || !ks.queued {
			return nextNothing
		}
		ks.processing = false
		switch {
		case !ks.hasReadySince:
			ks.queued = false
			c.gcLocked(key, ks)
		case ks.readySince < now:
			c.readySinceLocked(key, ks, now) // not waiting while it was being processed
		}
	}
	return n
}

func (c *ControllerTopic) readySinceLocked(key string, ks *keyState, at float64) {
	ks.readySince, ks.hasReadySince = at, true
	c.due.push(dueEntry{deadline: at + c.detect().WaitingAfter*1000, since: at, key: key})
	if len(c.due) > 2*len(c.keys)+64 { // mostly stale entries (keys taken since): keep the live ones
		live := c.due[:0]
		for _, e := range c.due {
			if ks := c.keys[e.key]; ks != nil && ks.hasReadySince && ks.readySince == e.since {
				live = append(live, e)
			}
		}
		c.due = live
		heap.Init(&c.due)
	}
}

// evaluateLocked runs the controller's time rules and held changes at now, in FindingKind order
// and, within a kind, by key.
func (c *ControllerTopic) evaluateLocked(now float64) next {
	cfg := c.detect()
	n := c.releaseParkedLocked(now, "") // the parked events whose limit has passed
	var quiet []string
	for key, ks := range c.streaking {
		if now-ks.streakLast >= cfg.HotLoopQuiet*1000 {
			quiet = append(quiet, key)
		}
	}
	slices.Sort(quiet)
	for _, key := range quiet {
		ks := c.keys[key]
		n = max(n, c.breakStreak(key, ks, now))
		c.gcLocked(key, ks)
	}
	n = max(n, c.findings.flushHeld(FindingKindHotLoop, now), c.findings.flushHeld(FindingKindFailing, now),
		c.findings.flushHeld(FindingKindTerminal, now))
	if len(c.running) > 0 {
		slow := make([]string, 0, len(c.running))
		for key, ks := range c.running {
			if now-ks.started >= cfg.SlowAfter*1000 && c.findings.get(FindingKindSlowReconcile, key) == nil {
				slow = append(slow, key)
			}
		}
		slices.Sort(slow)
		for _, key := range slow {
			ks := c.running[key]
			d := newFields().int("worker", ks.worker).optStr("handler", "")
			detail := d.object()
			d.release()
			n = max(n, c.findings.report(FindingKindSlowReconcile, key, now, ks.started, 1, detail,
				"reconciling for more than "+messageNumber(cfg.SlowAfter)+" s"))
		}
	}
	n = max(n, c.findings.flushHeld(FindingKindSlowReconcile, now))
	var due []dueEntry
	for len(c.due) > 0 && c.due[0].deadline <= now {
		e := c.due.pop()
		if ks := c.keys[e.key]; ks != nil && !ks.processing && ks.hasReadySince && ks.readySince == e.since {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b dueEntry) int {
		if d := strings.Compare(a.key, b.key); d != 0 {
			return d
		}
		return cmpFloat(a.since, b.since)
	})
	for _, e := range due {
		d := newFields().str("queue", c.name)
		detail := d.object()
		d.release()
		n = max(n, c.findings.report(FindingKindWaiting, e.key, now, e.since, 1, detail,
			"queued for more than "+messageNumber(cfg.WaitingAfter)+" s without a worker taking it"))
	}
	return max(n, c.findings.flushHeld(FindingKindWaiting, now))
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rateLimiterMax is the longest delay spec reaches for one key however often it fails: max of an
// exponential, slow of a fast_slow, the longest of a max_of's parts that say; nil when none says.
func rateLimiterMax(spec RateLimiterSpec) *float64 {
	if spec == nil {
		return nil
	}
	num := func(v any) *float64 {
		if f, ok := jsonNumber(v); ok {
			return &f
		}
		return nil
	}
	switch spec["type"] {
	case string(RateLimiterTypeExponential):
		return num(spec["max"])
	case string(RateLimiterTypeFastSlow):
		return num(spec["slow"])
	case string(RateLimiterTypeMaxOf):
		var longest *float64
		var parts []RateLimiterSpec
		switch of := spec["of"].(type) {
		case []RateLimiterSpec:
			parts = of
		case []any:
			for _, p := range of {
				switch m := p.(type) {
				case RateLimiterSpec:
					parts = append(parts, m)
				case map[string]any:
					parts = append(parts, m)
				}
			}
		}
		for _, p := range parts {
			if d := rateLimiterMax(p); d != nil && (longest == nil || *d > *longest) {
				longest = d
			}
		}
		return longest
	}
	return nil
}

// -- informer rules -------------------------------------------------------------------------------

// informerRules is what an informer keeps for its rules (InformerTopic.mu).
type informerRules struct {
	started, active       float64
	hasStarted            bool
	synced, stopped       bool
	lists, failedLists    int
	listError, lastEnd    string
	hasListErr, hasLastEn bool
	relists               []float64 // the relists' times within the window, oldest first
	watching              bool
	rv                    string
}

// informerStartedLocked: an informer call; its open findings close and its rules start again.
func (it *InformerTopic) informerStartedLocked(now float64) next {
	n := max(it.findings.close(FindingKindNotSynced, it.name, now), it.findings.close(FindingKindWatchSilent, it.name, now),
		it.findings.close(FindingKindRelistStorm, it.name, now))
	it.rules = informerRules{started: now, hasStarted: true}
	return n
}

func (it *InformerTopic) listedLocked(now float64, errText string) next {
	r := &it.rules
	r.lists++
	n := nextNothing
	if errText != "" {
		r.failedLists++
		r.listError, r.hasListErr = errText, true
		if it.findings.get(FindingKindNotSynced, it.name) != nil {
			n = it.reportNotSynced(now)
		}
	}
	if r.lists > 1 {
		r.relists = append(r.relists, now)
		n = max(n, it.relistsLocked(now))
	}
	return n
}

func (it *InformerTopic) reportNotSynced(now float64) next {
	r := &it.rules
	message := "not synced " + messageNumber(it.tel.detect.SyncTimeout) + " s after it started"
	d := newFields()
	if r.hasListErr {
		message += "; last LIST error: " + r.listError
		d.str("last_error", r.listError)
	} else {
		d.optStr("last_error", "")
	}
	detail := d.object()
	d.release()
	since := now
	if r.hasStarted {
		since = r.started
	}
	return it.findings.report(FindingKindNotSynced, it.name, now, since, r.failedLists, detail, message)
}

// relistsLocked slides the relist window to now, and opens, updates or closes the storm.
func (it *InformerTopic) relistsLocked(now float64) next {
	r := &it.rules
	cfg := it.tel.detect
	start := now - cfg.RelistWindow*1000
	drop := 0
	for drop < len(r.relists) && r.relists[drop] < start {
		drop++
	}
	r.relists = r.relists[drop:]
	count := len(r.relists)
	if count < cfg.RelistCount {
		return it.findings.close(FindingKindRelistStorm, it.name, now)
	}
	d := newFields()
	if r.hasLastEn {
		d.str("last_end", r.lastEnd)
	} else {
		d.optStr("last_end", "")
	}
	detail := d.object()
	d.release()
	return it.findings.report(FindingKindRelistStorm, it.name, now, r.relists[0], count, detail,
		strconv.Itoa(count)+" relists within "+messageNumber(cfg.RelistWindow)+" s")
}

func (it *InformerTopic) watchStartedLocked(now float64, rv string) next {
	it.rules.watching, it.rules.active, it.rules.rv = true, now, rv
	return it.findings.close(FindingKindWatchSilent, it.name, now)
}

// watchAliveLocked: a watch event or a bookmark: the watch is not silent.
func (it *InformerTopic) watchAliveLocked(now float64, rv string) next {
	it.rules.active, it.rules.rv = now, rv
	if len(it.findings.open) == 0 {
		return nextNothing
	}
	return it.findings.close(FindingKindWatchSilent, it.name, now)
}

func (it *InformerTopic) watchEndedLocked(now float64, reason WatchEndReason) next {
	it.rules.watching, it.rules.lastEnd, it.rules.hasLastEn = false, string(reason), true
	return it.findings.close(FindingKindWatchSilent, it.name, now)
}

func (it *InformerTopic) reflectorStateLocked(now float64, state ReflectorState) next {
	switch state {
	case ReflectorStateSynced:
		it.rules.synced = true
	case ReflectorStateStopped:
		it.rules.stopped = true
	default:
		return nextNothing
	}
	return it.findings.close(FindingKindNotSynced, it.name, now)
}

// evaluateLocked runs the informer's time rules and held changes at now, in FindingKind order.
func (it *InformerTopic) evaluateLocked(now float64) next {
	r, cfg := &it.rules, it.tel.detect
	n := nextNothing
	if r.hasStarted && !r.synced && !r.stopped && now-r.started >= cfg.SyncTimeout*1000 &&
		it.findings.get(FindingKindNotSynced, it.name) == nil {
		n = it.reportNotSynced(now)
	}
	n = max(n, it.findings.flushHeld(FindingKindNotSynced, now))
	if r.watching && now-r.active >= cfg.SilentAfter*1000 && it.findings.get(FindingKindWatchSilent, it.name) == nil {
		d := newFields().str("rv", r.rv)
		detail := d.object()
		d.release()
		n = max(n, it.findings.report(FindingKindWatchSilent, it.name, now, r.active, 1, detail,
			"watch silent for more than "+messageNumber(cfg.SilentAfter)+" s: no event, bookmark or end"))
	}
	n = max(n, it.findings.flushHeld(FindingKindWatchSilent, now))
	if len(r.relists) > 0 {
		n = max(n, it.relistsLocked(now))
	}
	return max(n, it.findings.flushHeld(FindingKindRelistStorm, now))
}

// evaluate runs every controller's and informer's time rules and held changes, with the clock's
// time: the publisher calls it before building a flush's frames.
func (t *Telemetry) evaluate() {
	if t.detect == nil {
		return
	}
	t.mu.Lock()
	ctrls := make([]*ControllerTopic, 0, len(t.ctrlTopics))
	for _, c := range t.ctrlTopics {
		ctrls = append(ctrls, c)
	}
	infs := make([]*InformerTopic, 0, len(t.infTopics))
	for _, it := range t.infTopics {
		infs = append(infs, it)
	}
	t.mu.Unlock()
	now := t.now()
	for _, c := range ctrls {
		c.mu.Lock()
		c.evaluateLocked(now)
		c.mu.Unlock()
	}
	for _, it := range infs {
		it.mu.Lock()
		it.evaluateLocked(now)
		it.mu.Unlock()
	}
}
