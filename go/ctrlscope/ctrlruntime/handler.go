package ctrlruntime

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

// Handler wraps h, an event handler of controller, so that each event it gets is published as an
// event record: create/update/delete/generic, the object's key and the requests h enqueued.
//
// Which requests: h maps an event to requests only by adding them to the queue it is handed, so
// it is handed a recording queue that notes every item added (Add, AddAfter, AddRateLimited,
// AddWithOpts) and passes it on to the controller's queue. When that queue is a priority queue,
// the recording queue is one too, so handlers that lower the priority of unchanged objects
// (handler.WithLowPriorityWhenUnchanged, EnqueueRequestForObject's initial list) keep doing so.
//
// Its informer handler calls are named "controller/{controller} (Watches)": wrap the handlers you
// pass to the builder's Watches with it; For and Owns name theirs "(For)" and "(Owns)".
func (i *Instrumentation) Handler(controller string, h handler.EventHandler) handler.EventHandler {
	return i.handler(controller, RoleWatches, h)
}

// Role is the builder method that installed an event handler: one controller may have a handler of
// each on one informer (a ConfigMap mirror is For ConfigMaps and Owns ConfigMaps), and the
// dashboard tells their calls apart by it.
type Role string

// The builder's three ways to watch.
const (
	RoleFor     Role = "For"
	RoleOwns    Role = "Owns"
	RoleWatches Role = "Watches"
)

// HandlerName is the name an informer handler call of controller's handler installed by role is
// published under: "controller/{controller} ({role})", as the Python runtime names its controllers'.
func HandlerName(controller string, role Role) string {
	return "controller/" + controller + " (" + string(role) + ")"
}

func (i *Instrumentation) handler(controller string, role Role, h handler.EventHandler) handler.EventHandler {
	return &observedHandler{i: i, controller: controller, name: HandlerName(controller, role), inner: h,
		topic: i.tel.ControllerTopic(controller)}
}

type observedHandler struct {
	i          *Instrumentation
	controller string
	name       string // its informer handler calls' (HandlerName), and its events' source
	inner      handler.EventHandler
	topic      *ctrlscope.ControllerTopic
}

// objectKey is clientgo.ObjectKey, "" for a nil object (an event may carry a typed nil).
func objectKey(obj client.Object) string {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return ""
	}
	return clientgo.ObjectKey(obj)
}

// publish publishes the event with the requests h mapped it to, its source and its objects (v1.7:
// their resourceVersions, an update's changed fields, whether it is the controller's own write).
func (h *observedHandler) publish(event ctrlscope.ControllerEvent, old, obj client.Object, r *recorder) {
	h.topic.Event(ctrlscope.EventCall{Event: event, Key: objectKey(obj), Requests: r.requests(), Source: h.name,
		Old: old, New: obj})
}

// handlerEvents: which informer handler method delivered a controller event (controller-runtime's
// source registers one ResourceEventHandler per watch on the informer; it runs the predicates and
// then this handler). Generic events come from channels, not informers.
var handlerEvents = map[ctrlscope.ControllerEvent]ctrlscope.HandlerEvent{
	ctrlscope.ControllerEventCreate: ctrlscope.HandlerEventAdd,
	ctrlscope.ControllerEventUpdate: ctrlscope.HandlerEventUpdate,
	ctrlscope.ControllerEventDelete: ctrlscope.HandlerEventDelete,
}

// informerHandler says on which informer's topic an event is published as the informer handler
// call that delivered it, as the Python runtime's controllers do (the handler's HandlerName: the
// pipeline's handler stage counts them); ok is false for generic events and objects of types the
// scheme does not know.
func (i *Instrumentation) informerHandler(ev ctrlscope.ControllerEvent, obj client.Object) (
	informer string, hev ctrlscope.HandlerEvent, ok bool) {
	hev, ok = handlerEvents[ev]
	if informer = i.informerOf(obj); !ok || informer == "" {
		return "", "", false
	}
	return informer, hev, true
}

// informerOf names the informer obj's events come from ("group/version/Kind"), "" if the scheme
// does not know its type. Looked up once per Go type (unstructured objects carry their kind).
func (i *Instrumentation) informerOf(obj client.Object) string {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return ""
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return clientgo.InformerName(u.GroupVersionKind())
	}
	t := reflect.TypeOf(obj)
	if name, ok := i.informerNames.Load(t); ok {
		return name.(string)
	}
	name := ""
	if gvk, err := apiutil.GVKForObject(obj, i.mgr.GetScheme()); err == nil {
		name = clientgo.InformerName(gvk)
	}
	i.informerNames.Store(t, name)
	return name
}

// call runs the inner handler as the informer handler call that delivered the event (timed; a
// panic is published, then raised again: clientgo.CallHandler).
func (h *observedHandler) call(ev ctrlscope.ControllerEvent, old, obj client.Object, run func()) {
	informer, hev, ok := h.i.informerHandler(ev, obj)
	if !ok {
		run()
		return
	}
	var oldObj any
	if old != nil && !reflect.ValueOf(old).IsNil() {
		oldObj = old
	}
	clientgo.CallHandler(h.i.tel, informer, h.name, hev, oldObj, obj, run)
}

// Create implements handler.EventHandler.
func (h *observedHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	r, rq := record(q)
	defer r.flush() // after the event's record (also when the handler panics)
	h.call(ctrlscope.ControllerEventCreate, nil, e.Object, func() { h.inner.Create(ctx, e, rq) })
	h.publish(ctrlscope.ControllerEventCreate, nil, e.Object, r)
}

// Update implements handler.EventHandler.
func (h *observedHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	r, rq := record(q)
	defer r.flush() // after the event's record (also when the handler panics)
	obj := e.ObjectNew
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		obj = e.ObjectOld
	}
	h.call(ctrlscope.ControllerEventUpdate, e.ObjectOld, obj, func() { h.inner.Update(ctx, e, rq) })
	h.publish(ctrlscope.ControllerEventUpdate, e.ObjectOld, obj, r)
}

// Delete implements handler.EventHandler.
func (h *observedHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	r, rq := record(q)
	defer r.flush() // after the event's record (also when the handler panics)
	h.call(ctrlscope.ControllerEventDelete, nil, e.Object, func() { h.inner.Delete(ctx, e, rq) })
	h.publish(ctrlscope.ControllerEventDelete, nil, e.Object, r)
}

// Generic implements handler.EventHandler.
func (h *observedHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	r, rq := record(q)
	defer r.flush() // after the event's record (also when the handler panics)
	h.inner.Generic(ctx, e, rq)
	h.publish(ctrlscope.ControllerEventGeneric, nil, e.Object, r)
}

// recorder is the queue handed to one handler call: it notes the requests added and passes them on
// once the call's event is published (flush), so that the event record is always before the
// attempt it causes: a worker may take a key the moment it is added, and the attempt's
// reconcile_start takes the triggers pending then (an event published after it would be left for
// the attempt after). Adds after the flush (from a goroutine the handler started) go straight on.
type recorder struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	mu      sync.Mutex
	keys    []string
	held    []func() // the call's adds, in order, until flush
	flushed bool
}

// hold runs add at the flush, or now when the call's event is out already.
func (r *recorder) hold(add func()) {
	r.mu.Lock()
	if !r.flushed {
		r.held = append(r.held, add)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	add()
}

// flush makes the held adds, in order.
func (r *recorder) flush() {
	r.mu.Lock()
	held := r.held
	r.held, r.flushed = nil, true
	r.mu.Unlock()
	for _, add := range held {
		add()
	}
}

func (r *recorder) note(items ...reconcile.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, item := range items {
		k := Key(item)
		if !contains(r.keys, k) {
			r.keys = append(r.keys, k)
		}
	}
}

// requests are sorted: a handler may enqueue from a set (EnqueueRequestForOwner adds the old and
// the new owners of an update in map order), and a record should not depend on map order.
func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string{}, r.keys...)
	sort.Strings(out)
	return out
}

func (r *recorder) Add(item reconcile.Request) {
	r.note(item)
	r.hold(func() { r.TypedRateLimitingInterface.Add(item) })
}

func (r *recorder) AddAfter(item reconcile.Request, d time.Duration) {
	r.note(item)
	r.hold(func() { r.TypedRateLimitingInterface.AddAfter(item, d) })
}

func (r *recorder) AddRateLimited(item reconcile.Request) {
	r.note(item)
	r.hold(func() { r.TypedRateLimitingInterface.AddRateLimited(item) })
}

// priorityRecorder is a recorder for a priority queue, itself a priorityqueue.PriorityQueue.
type priorityRecorder struct {
	*recorder
	pq priorityqueue.PriorityQueue[reconcile.Request]
}

func (r *priorityRecorder) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	r.note(items...)
	r.hold(func() { r.pq.AddWithOpts(o, items...) })
}

func (r *priorityRecorder) GetWithPriority() (reconcile.Request, int, bool) {
	return r.pq.GetWithPriority()
}

func record(q workqueue.TypedRateLimitingInterface[reconcile.Request]) (*recorder, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	r := &recorder{TypedRateLimitingInterface: q}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return r, &priorityRecorder{recorder: r, pq: pq}
	}
	return r, r
}

// -- predicates --------------------------------------------------------------------------------

// Predicates wraps ps, predicates of controller's watch (or its builder.WithEventFilter), so that
// an event one of them drops is published as an event record with filtered_by: the predicate's
// type name ("GenerationChangedPredicate"). controller-runtime asks a watch's predicates in order
// and stops at the first that says no, so a dropped event is published once. The informer handler
// call it ended is named as Handler names it (Watches); For and Owns name theirs.
func (i *Instrumentation) Predicates(controller string, ps ...predicate.Predicate) []predicate.Predicate {
	return i.predicates(controller, RoleWatches, ps...)
}

func (i *Instrumentation) predicates(controller string, role Role, ps ...predicate.Predicate) []predicate.Predicate {
	out := make([]predicate.Predicate, len(ps))
	for n, p := range ps {
		out[n] = &observedPredicate{i: i, controller: controller, handler: HandlerName(controller, role),
			name: PredicateName(p), inner: p, topic: i.tel.ControllerTopic(controller)}
	}
	return out
}

// PredicateName is p's type name without its package, type parameters and "Typed" prefix:
// predicate.GenerationChangedPredicate{} is "GenerationChangedPredicate" (as the Python runtime
// names predicates), predicate.Funcs "Funcs".
func PredicateName(p any) string {
	t := reflect.TypeOf(p)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "predicate"
	}
	name := t.Name()
	if n := strings.IndexByte(name, '['); n >= 0 {
		name = name[:n]
	}
	if trimmed := strings.TrimPrefix(name, "Typed"); trimmed != "" {
		name = trimmed
	}
	if name == "" {
		return t.String()
	}
	return name
}

type observedPredicate struct {
	i          *Instrumentation
	controller string
	handler    string // the informer handler whose calls it ends (HandlerName), and its events' source
	name       string
	inner      predicate.Predicate
	topic      *ctrlscope.ControllerTopic
}

func (p *observedPredicate) verdict(ok bool, ev ctrlscope.ControllerEvent, old, obj client.Object) bool {
	if !ok {
		p.topic.Event(ctrlscope.EventCall{Event: ev, Key: objectKey(obj), FilteredBy: p.name, Source: p.handler,
			Old: old, New: obj})
		if informer, hev, found := p.i.informerHandler(ev, obj); found {
			// the informer handler call ended at the predicate
			clientgo.PublishHandler(p.i.tel, informer, ctrlscope.HandlerCall{Handler: p.handler, Event: hev,
				Key: objectKey(obj), Outcome: ctrlscope.HandlerOutcomeOk, New: obj})
		}
	}
	return ok
}

func (p *observedPredicate) Create(e event.CreateEvent) bool {
	return p.verdict(p.inner.Create(e), ctrlscope.ControllerEventCreate, nil, e.Object)
}

func (p *observedPredicate) Delete(e event.DeleteEvent) bool {
	return p.verdict(p.inner.Delete(e), ctrlscope.ControllerEventDelete, nil, e.Object)
}

func (p *observedPredicate) Update(e event.UpdateEvent) bool {
	obj := e.ObjectNew
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		obj = e.ObjectOld
	}
	return p.verdict(p.inner.Update(e), ctrlscope.ControllerEventUpdate, e.ObjectOld, obj)
}

func (p *observedPredicate) Generic(e event.GenericEvent) bool {
	return p.verdict(p.inner.Generic(e), ctrlscope.ControllerEventGeneric, nil, e.Object)
}

// -- builder helpers ---------------------------------------------------------------------------

// For is what builder.For(obj, builder.WithPredicates(ps...)) installs, observed, as the three
// arguments of builder.Watches: obj, handler.EnqueueRequestForObject wrapped by Handler, and ps
// wrapped by Predicates. It also calls Watch(controller, obj). Use it with Named(controller):
//
//	ctrl.NewControllerManagedBy(mgr).Named("c").Watches(inst.For("c", &appsv1.Deployment{}))
func (i *Instrumentation) For(controller string, obj client.Object, ps ...predicate.Predicate) (client.Object,
	handler.EventHandler, builder.WatchesOption) {
	_ = i.Watch(controller, obj) // a failure is published as a setup error; the builder reports it too
	return obj, i.handler(controller, RoleFor, &handler.EnqueueRequestForObject{}),
		builder.WithPredicates(i.predicates(controller, RoleFor, ps...)...)
}

// Owns is what builder.Owns(obj, builder.WithPredicates(ps...)) installs for a controller of
// owner's type, observed: handler.EnqueueRequestForOwner(scheme, mapper, owner,
// handler.OnlyControllerOwner()) wrapped by Handler, as the three arguments of builder.Watches.
func (i *Instrumentation) Owns(controller string, owner, obj client.Object, ps ...predicate.Predicate) (client.Object,
	handler.EventHandler, builder.WatchesOption) {
	_ = i.Watch(controller, obj)
	h := handler.EnqueueRequestForOwner(i.mgr.GetScheme(), i.mgr.GetRESTMapper(), owner, handler.OnlyControllerOwner())
	return obj, i.handler(controller, RoleOwns, h), builder.WithPredicates(i.predicates(controller, RoleOwns, ps...)...)
}
