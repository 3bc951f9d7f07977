package clientgo

// Event handler calls as handler records. The wrapper runs in the informer's per-handler
// goroutine, so it measures exactly what client-go runs: one call at a time per handler, in order.
//
// Order: a call's record is published after the observer's record of the event it answers when
// the informer is observed (ObserveInformer), though both handlers run on goroutines of their own
// (order.go).
//
// Panics: client-go does not swallow them. Its processorListener wraps each call in HandleCrash,
// which re-panics by default (utilruntime.ReallyCrash) and crashes the process. The wrapper
// therefore publishes the call as outcome error with the panic's text, flushes the publisher
// (bounded, so that the record outlives the process) and panics again with the same value:
// whatever client-go does with it next happens as without the wrapper.

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// PanicFlushTimeout bounds the flush before a handler's panic goes on.
var PanicFlushTimeout = 2 * time.Second

// Handlers wraps h so that every OnAdd / OnUpdate / OnDelete publishes a handler record (handler
// name, event, key, outcome, duration, resourceVersions, tombstone) on informer's topic.
// Register the result in place of h: inf.AddEventHandler(clientgo.Handlers(tel, name, "print", h)).
func Handlers(tel *ctrlscope.Telemetry, informer, handlerName string, h cache.ResourceEventHandler) cache.ResourceEventHandler {
	return &observedHandler{c: newHandlerCaller(tel, informer, handlerName), h: h}
}

// HandlerFuncs is Handlers for a ResourceEventHandlerFuncs: each function that is set is wrapped;
// one left nil stays nil, so an event without a function publishes nothing (nothing ran).
func HandlerFuncs(tel *ctrlscope.Telemetry, informer, handlerName string, f cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	c := newHandlerCaller(tel, informer, handlerName)
	out := cache.ResourceEventHandlerFuncs{}
	if add := f.AddFunc; add != nil {
		out.AddFunc = func(obj any) { c.call(ctrlscope.HandlerEventAdd, nil, obj, func() { add(obj) }) }
	}
	if update := f.UpdateFunc; update != nil {
		out.UpdateFunc = func(oldObj, newObj any) {
			c.call(ctrlscope.HandlerEventUpdate, oldObj, newObj, func() { update(oldObj, newObj) })
		}
	}
	if del := f.DeleteFunc; del != nil {
		out.DeleteFunc = func(obj any) { c.call(ctrlscope.HandlerEventDelete, nil, obj, func() { del(obj) }) }
	}
	return out
}

type observedHandler struct {
	c handlerCaller
	h cache.ResourceEventHandler
}

func (o *observedHandler) OnAdd(obj any, isInInitialList bool) {
	o.c.call(ctrlscope.HandlerEventAdd, nil, obj, func() { o.h.OnAdd(obj, isInInitialList) })
}

func (o *observedHandler) OnUpdate(oldObj, newObj any) {
	o.c.call(ctrlscope.HandlerEventUpdate, oldObj, newObj, func() { o.h.OnUpdate(oldObj, newObj) })
}

func (o *observedHandler) OnDelete(obj any) {
	o.c.call(ctrlscope.HandlerEventDelete, nil, obj, func() { o.h.OnDelete(obj) })
}

// CallHandler runs f as one call of handler handlerName for an event of informer's, published
// like a Handlers call: duration and outcome; a panic published as an error (the publisher flushed
// within PanicFlushTimeout), then raised again. For wrappers of other handler shapes
// (controller-runtime's event handlers); oldObj is nil but for updates.
func CallHandler(tel *ctrlscope.Telemetry, informer, handlerName string, event ctrlscope.HandlerEvent, oldObj, obj any,
	f func()) {
	newHandlerCaller(tel, informer, handlerName).call(event, oldObj, obj, f)
}

// PublishHandler publishes c, a call of one of informer's handlers that already returned (or one
// that a predicate ended), as Handlers does: after the record of the event it answers when the
// informer is observed.
func PublishHandler(tel *ctrlscope.Telemetry, informer string, c ctrlscope.HandlerCall) {
	newHandlerCaller(tel, informer, c.Handler).publish(c)
}

type handlerCaller struct {
	tel      *ctrlscope.Telemetry
	informer string
	it       *ctrlscope.InformerTopic
	handler  string
}

func newHandlerCaller(tel *ctrlscope.Telemetry, informer, handlerName string) handlerCaller {
	return handlerCaller{tel: tel, informer: informer, it: tel.InformerTopic(informer), handler: handlerName}
}

// publish publishes a call that returned, ordered after its event when the informer is observed
// (looked up per call: ObserveInformer may come after the handler was wrapped).
func (c handlerCaller) publish(rec ctrlscope.HandlerCall) {
	if o := registryFor(c.tel).named(c.informer); o != nil {
		o.order.handled(rec)
		return
	}
	c.it.Handler(rec)
}

func (c handlerCaller) call(event ctrlscope.HandlerEvent, oldObj, obj any, f func()) {
	clk := c.tel.Clock()
	start := clk.Now()
	_, tombstone := obj.(cache.DeletedFinalStateUnknown)
	rec := ctrlscope.HandlerCall{Handler: c.handler, Event: event, Key: ObjectKey(obj), Old: oldObj, New: obj,
		Tombstone: tombstone}
	returned := false
	defer func() {
		if returned {
			return
		}
		// recover is nil only for runtime.Goexit (Go ≥ 1.21 turns panic(nil) into a
		// *runtime.PanicNilError): record it and let the goroutine exit.
		r := recover()
		rec.Outcome, rec.Duration = ctrlscope.HandlerOutcomeError, clk.Since(start)
		if r == nil {
			rec.Error = "runtime.Goexit"
		} else {
			rec.Error = fmt.Sprintf("panic: %v", r)
		}
		c.it.Handler(rec) // at once, not parked behind its event: the process may end next

		ctx, cancel := context.WithTimeout(context.Background(), PanicFlushTimeout)
		_, _ = c.tel.Publisher().Flush(ctx)
		cancel()
		if r != nil {
			panic(r)
		}
	}()
	f()
	returned = true
	// One clock read for the duration and the record's time.
	end := clk.Now()
	rec.Outcome, rec.Duration, rec.At = ctrlscope.HandlerOutcomeOk, end.Sub(start), end
	c.publish(rec)
}
