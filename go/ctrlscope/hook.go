package ctrlscope

// Hook: an observer beside the publisher. The calls that become a controller's records (its
// events, attempts, writes and its queue's rate-limited adds) are also handed to a Hook, with
// what the provenance derived from them, so that another sink -- the OpenTelemetry spans of
// package ctrlscope/otel -- sees exactly what the records say: the triggers an attempt hands its
// hook are the reconcile_start record's triggers, its count and self_triggered the record's.
//
// Links: what a Hook returns from Event (and from ReconcileEnd) is kept with the trigger that call
// leaves for the key's next attempt, and given back in that attempt's Triggers, so that a span can
// link to the span of each event it absorbed, and a retry to the attempt that left it. The values
// are the hook's; ctrlscope only carries them (with the trigger: the last TriggersMax per key).
//
// Event, ReconcileStart and ReconcileEnd are called under the controller topic's lock, in the
// order of the records, so a Hook must not call back into the Telemetry and should only note
// things in memory (the OpenTelemetry sink creates or ends spans; its batch processor exports them
// on its own goroutine). With detection off (TelemetryOptions.NoDetect) there is no provenance:
// attempts come with no triggers and events are never self.

import (
	"context"
	"time"
)

// Hook receives a controller's calls as they become records (see the file comment).
type Hook interface {
	// Event: a controller event that enqueued requests (called only then), with what its record
	// says of it. The result is carried by the triggers it leaves.
	Event(controller string, e EventCall, d EventDerived) (link any)
	// ReconcileStart: key's attempt started, with the triggers it absorbed. The context returned is
	// the one the attempt runs with (Request gets it back for the writes made with it).
	ReconcileStart(ctx context.Context, controller, key string, worker int, a Attempt) context.Context
	// ReconcileEnd: key's attempt returned with result. The result is carried by the retry or
	// requeue_after trigger the attempt leaves, if any.
	ReconcileEnd(controller, key string, result ReconcileResult, requeueAfter time.Duration, errText string) (link any)
	// RateLimited: the queue named like controller added key rate limited, with the delay its rate
	// limiter chose (nil: unknown). client-go's loop does so after the attempt's ReconcileEnd.
	RateLimited(controller, key string, delay *float64)
	// Request: an API write (any method but GET) made with an attempt's context finished (code 0:
	// no response); rv is the object's resourceVersion the API server answered with ("" when none).
	Request(ctx context.Context, controller, method, path string, code int, duration time.Duration, rv string)
	// WriteRefused: the worker refused a write made with an attempt's context itself (read-only).
	WriteRefused(ctx context.Context, controller, method, path string, reason WriteRefusal)
}

// EventDerived is what an event record says beyond the EventCall: the objects' resourceVersions,
// an update's changed field paths (Diff, DiffMore; none for a resync, whose rv did not change) and
// whether it is the controller's own write coming back. With detection off only RV is set.
type EventDerived struct {
	RV, OldRV string
	Diff      []string
	DiffMore  int
	Self      bool
}

// Attempt is what a reconcile_start record says about why the attempt ran: its Triggers (the last
// TriggersMax, oldest first), how many were pending in all, and whether every one was a self event.
type Attempt struct {
	Triggers      []Trigger
	Count         int
	SelfTriggered bool
}

// Trigger is one trigger of an attempt, as the record lists it, with the Link a Hook's Event or
// ReconcileEnd returned for it.
type Trigger struct {
	Kind TriggerKind
	// event and resync
	Type   ControllerEvent
	Key    string // the object's key
	Source string // the handler that mapped it
	RV     string
	Self   bool
	// retry (Result, and Delay when known) and requeue_after (Delay)
	Result   ReconcileResult
	Delay    float64
	HasDelay bool

	Link any
}

// hookTriggers is pt's listed triggers for a Hook.
func hookTriggers(pt *pendingTriggers) Attempt {
	a := Attempt{Count: pt.count, SelfTriggered: pt.count > 0 && pt.allSelf, Triggers: make([]Trigger, len(pt.list))}
	for i := range pt.list {
		tr := &pt.list[i]
		a.Triggers[i] = Trigger{Kind: tr.kind, Type: tr.event, Key: tr.key, Source: tr.source, RV: tr.rv, Self: tr.self,
			Result: tr.result, Delay: tr.delay, HasDelay: tr.hasDelay, Link: tr.link}
	}
	return a
}

// linkLastTrigger gives link to the trigger key's attempt just left (its retry or requeue_after),
// when it left one: count is the key's pending count before the attempt ended.
func (c *ControllerTopic) linkLastTrigger(key string, count int, link any) { // c.mu held
	ks := c.keys[key]
	if ks == nil || ks.triggers.count <= count || len(ks.triggers.list) == 0 {
		return
	}
	ks.triggers.list[len(ks.triggers.list)-1].link = link
}
