package clientgo

// Observing an unmodified client-go SharedIndexInformer (a factory-made one included) from the
// outside. client-go gives no hook into its reflector or FIFO, so each part of the protocol's
// informer topic comes from the one place that sees it:
//
//   - The cache (the topic's state) and the watch events come from an event handler of our own,
//     registered on the informer before the user's. client-go calls every handler after the
//     change reached the indexer, with the object the indexer now holds (or, for a delete, the last
//     one it held), and delivers each handler's notifications in order. Replaying them into
//     StoreUpsert/StoreDelete therefore converges to the indexer's contents, whichever way a change
//     arrived (watch event, initial list, relist, resync).
//   - LIST and WATCH requests, their resourceVersions, item counts and how a watch ended come from
//     the REST transport (WrapConfig, transport.go), matched to the informer by the resource's URL
//     path. Without WrapConfig the informer is still observed, with less precision (see
//     ObserveInformer).
//   - Errors that end a ListAndWatch cycle come from the informer's watch error handler, which we
//     set (chaining to client-go's default, so its logging stays as upstream).
//   - Synced comes from the informer's HasSyncedChecker channel (no polling).
//
// Which notification is which: a handler only sees OnAdd/OnUpdate/OnDelete, so the observer
// classifies them. OnAdd during the initial list (isInInitialList) belongs to the list record. An
// OnUpdate with old == new (the same object) is a resync, with the same resourceVersion but another
// object a relist that found the object unchanged: neither is a watch event; both are published as
// a fifo record (Sync or Replaced). A DeletedFinalStateUnknown tombstone is a relist's delete. After
// a relist (the transport reports its resourceVersion R), notifications for objects at or below R
// are the relist's replacements, not watch events, until the first object newer than R. Everything
// else is one watch event (ADDED/MODIFIED/DELETED).

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// FifoModel names the queue client-go puts between an informer's reflector and its indexer.
// client-go 0.37 always builds a RealFIFO (every notification in order, a relist as one
// ReplacedAll): the InOrderInformers gate is GA and locked on since 1.36. The DeltaFIFO (deltas
// per key, deduplicated keys) is what earlier versions used with the gate off.
func FifoModel() string {
	if clientfeatures.FeatureGates().Enabled(clientfeatures.InOrderInformers) {
		return "RealFIFO"
	}
	return "DeltaFIFO"
}

// InformerName is the dashboard's name for an informer of gvk: "group/version/Kind", or
// "version/Kind" for the core group ("apps/v1/Deployment", "v1/Pod").
func InformerName(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + "/" + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + "/" + gvk.Kind
}

// InformerNameFor is InformerName of obj's kind: its TypeMeta when set (unstructured objects),
// else client-go's scheme (the built-in types, e.g. &appsv1.Deployment{}).
func InformerNameFor(obj runtime.Object) (string, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return InformerName(gvk), nil
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return "", err
	}
	return InformerName(gvks[0]), nil
}

// ParseInformerName reads a "group/version/Kind" or "version/Kind" name back.
func ParseInformerName(name string) (schema.GroupVersionKind, bool) {
	parts := strings.Split(name, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}, true
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}, true
	}
	return schema.GroupVersionKind{}, false
}

// InformerOption configures ObserveInformer.
type InformerOption func(*Informer)

// WithResource says which resource the informer lists and watches, for matching its requests in
// the transport. The default is derived from the informer's name ("apps/v1/Deployment" →
// apps/v1 deployments, by the API machinery's usual kind-to-resource guess); pass it for kinds
// whose plural is irregular.
func WithResource(gvr schema.GroupVersionResource) InformerOption {
	return func(o *Informer) { o.gvr, o.hasGVR = gvr, true }
}

// WithNamespace says the informer watches one namespace (a factory made with
// informers.WithNamespace). Without it an informer matches requests of any namespace when it is
// the only observed informer of its resource.
func WithNamespace(namespace string) InformerOption {
	return func(o *Informer) { o.namespace, o.namespaceSet = namespace, true }
}

// WithSelectors says the informer's LIST and WATCH carry these label and field selectors (a factory
// made with informers.WithTweakListOptions, or a ListWatch built with them): shown on its pipeline
// card. client-go does not expose an informer's list options, so pass what you tweaked.
func WithSelectors(labelSelector, fieldSelector string) InformerOption {
	return func(o *Informer) { o.scope.LabelSelector, o.scope.FieldSelector = labelSelector, fieldSelector }
}

// WithMetadataOnly says the informer caches PartialObjectMetadata (a metadatainformer factory's).
func WithMetadataOnly() InformerOption {
	return func(o *Informer) { o.scope.MetadataOnly = true }
}

// WithTransform names the informer's transform (SetTransform, informers.WithTransform) for the
// dashboard, e.g. "strip managedFields".
func WithTransform(description string) InformerOption {
	return func(o *Informer) { o.scope.Transform = description }
}

// WithResyncPeriod is the informer's resync period, as published on the dashboard (client-go
// does not expose a factory informer's; pass the factory's defaultResync).
func WithResyncPeriod(d time.Duration) InformerOption {
	return func(o *Informer) { o.resync = d }
}

// WithWatchErrorHandler chains handler after the observer's instead of client-go's default
// handler. An informer has one watch error handler (the last set wins), so one set before
// ObserveInformer would be replaced: pass it here.
func WithWatchErrorHandler(handler cache.WatchErrorHandlerWithContext) InformerOption {
	return func(o *Informer) { o.next = handler }
}

// Informer observes one SharedIndexInformer; see ObserveInformer.
type Informer struct {
	tel          *ctrlscope.Telemetry
	name         string
	it           *ctrlscope.InformerTopic
	inf          cache.SharedIndexInformer
	gvr          schema.GroupVersionResource
	hasGVR       bool
	namespace    string
	namespaceSet bool
	resync       time.Duration
	scope        ctrlscope.InformerScope // published with the informer record (namespace from WithNamespace)
	next         cache.WatchErrorHandlerWithContext
	started      time.Time
	order        *causalOrder // the user's handler records after the watch records (order.go)

	mu              sync.Mutex
	lists           int       // list phases completed (LIST or WatchList)
	listStart       time.Time // when the current list phase began
	listRV          string    // the current paginated LIST's resourceVersion (its first page's)
	listItems       int       // items of the pages read so far
	listing         bool      // a list phase is under way
	listed          bool      // the transport published a list record
	inRelist        bool      // notifications at or below relistRV are the relist's
	relistRV        uint64    //
	failureReported bool      // the transport published the failure the error handler gets next
	lastBackoff     time.Time
	backoff         time.Duration

	stop     chan struct{}
	stopOnce sync.Once
}

// ObserveInformer observes inf, an informer named name ("group/version/Kind", see InformerName)
// that has not started yet, and returns the observer. It publishes the informer record, registers
// an observing event handler (the cache as the topic's state, watch records, resyncs), sets the
// watch error handler and waits for the informer to sync on a goroutine (ended by Stopped).
//
// Requests made through a config from WrapConfig(tel, ...) are matched to the informer by its
// resource (WithResource, or derived from name) and namespace (WithNamespace): they give exact
// list records (rv, items, duration), watch_start, why each watch ended, and the reflector's
// listing / relisting / watching / backing-off states. Without WrapConfig, the initial list
// record is published at sync (rv and cache size then) and relisted changes are indistinguishable
// from watch events.
func ObserveInformer(tel *ctrlscope.Telemetry, name string, inf cache.SharedIndexInformer, opts ...InformerOption) (*Informer, error) {
	it := tel.InformerTopic(name)
	o := &Informer{tel: tel, name: name, it: it, inf: inf, stop: make(chan struct{}),
		started: tel.Clock().Now(), order: newCausalOrder(it, tel.Clock())}
	for _, opt := range opts {
		opt(o)
	}
	if !o.hasGVR {
		if gvk, ok := ParseInformerName(name); ok {
			o.gvr, _ = meta.UnsafeGuessKindToResource(gvk)
			o.hasGVR = true
		}
	}
	// Setting the handler fails once the informer runs: the one check that it has not started.
	if err := inf.SetWatchErrorHandlerWithContext(o.onWatchError); err != nil {
		return nil, err
	}
	// The informer's default resync period: the observer sees exactly the resyncs a handler
	// added with AddEventHandler sees, and its registration never shortens the informer's.
	if _, err := inf.AddEventHandler(observingHandler{o}); err != nil {
		return nil, err
	}
	o.scope.Namespace = o.namespace
	tel.InformerWithScope(name, FifoModel(), o.resync, o.scope)
	registryFor(tel).add(o)
	go o.waitSynced()
	return o, nil
}

// Name is the informer's name on the dashboard.
func (o *Informer) Name() string { return o.name }

// Stopped publishes that the informer stopped (call it after the informer or its factory shut
// down). It ends the observer's wait for sync; later calls do nothing.
func (o *Informer) Stopped() {
	o.stopOnce.Do(func() {
		close(o.stop)
		registryFor(o.tel).remove(o)
		o.order.flush()
		o.tel.ReflectorState(o.name, ctrlscope.ReflectorStateStopped)
	})
}

func (o *Informer) waitSynced() {
	select {
	case <-o.inf.HasSyncedChecker().Done():
	case <-o.stop:
		return
	}
	o.mu.Lock()
	listed := o.listed
	o.mu.Unlock()
	if !listed {
		// Nobody saw the list's response (no WrapConfig, or a body we could not read): the cache
		// right at sync is the best account of it.
		o.tel.List(o.name, o.inf.LastSyncResourceVersion(), len(o.inf.GetStore().ListKeys()),
			o.tel.Clock().Since(o.started), "")
	}
	o.tel.ReflectorState(o.name, ctrlscope.ReflectorStateSynced)
}

// -- the error handler ------------------------------------------------------------------------

// onWatchError runs when a ListAndWatch cycle failed (a LIST that failed, a watch that could not
// be opened); client-go then backs off and starts the cycle again. Watches that end with an error
// event do not come here (client-go 0.37 logs them and relists): the transport reports those.
func (o *Informer) onWatchError(ctx context.Context, r *cache.Reflector, err error) {
	o.mu.Lock()
	reported := o.failureReported
	o.failureReported = false
	o.mu.Unlock()
	if !reported {
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			o.tel.WatchEnd(o.name, ctrlscope.WatchEndReasonExpired, "")
		case strings.HasPrefix(err.Error(), "failed to list"):
			o.tel.List(o.name, "", 0, 0, err.Error())
		default:
			o.tel.WatchEnd(o.name, ctrlscope.WatchEndReasonError, err.Error())
		}
	}
	o.backingOff(err.Error())
	if o.next != nil {
		o.next(ctx, r, err)
	} else {
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
}

// backingOff publishes that the reflector waits before its next try. The delay is client-go's
// nominal one (800 ms doubling to 30 s, reset after 2 min without a backoff); the reflector's
// actual wait adds up to 100% jitter to it, which it does not expose.
func (o *Informer) backingOff(reason string) {
	now := o.tel.Clock().Now()
	o.mu.Lock()
	if o.backoff == 0 || now.Sub(o.lastBackoff) >= 2*time.Minute {
		o.backoff = 800 * time.Millisecond
	} else if o.backoff *= 2; o.backoff > 30*time.Second {
		o.backoff = 30 * time.Second
	}
	o.lastBackoff = now
	o.listing = false
	delay := o.backoff
	o.mu.Unlock()
	o.tel.ReflectorState(o.name, ctrlscope.ReflectorStateBackingOff)
	o.tel.Backoff(o.name, delay, reason)
}

// -- what the transport reports (transport.go) ------------------------------------------------

// listState is listing for the first list phase, relisting after.
func (o *Informer) listState() ctrlscope.ReflectorState { // o.mu held
	if o.lists == 0 {
		return ctrlscope.ReflectorStateListing
	}
	return ctrlscope.ReflectorStateRelisting
}

// listPageStarted: a LIST request (a page; firstPage for a list without continue token).
func (o *Informer) listPageStarted(firstPage bool) {
	if !firstPage {
		return
	}
	o.mu.Lock()
	already := o.listing // a LIST after a failed WatchList: the same list phase
	o.listing, o.listStart, o.listRV, o.listItems = true, o.tel.Clock().Now(), "", 0
	state := o.listState()
	o.mu.Unlock()
	if !already {
		o.tel.ReflectorState(o.name, state)
	}
}

// listPageDone: a LIST page's response was read. A 410 is not published: client-go retries the
// list at once (from the latest state, or as one unpaginated list when a continue token expired).
func (o *Informer) listPageDone(code int, rv string, items int, more bool, errText string) {
	if code == 410 {
		return
	}
	o.mu.Lock()
	dur := o.tel.Clock().Since(o.listStart)
	if errText != "" {
		o.listing = false
		o.failureReported = true
		o.mu.Unlock()
		o.tel.List(o.name, "", 0, dur, errText)
		return
	}
	if o.listRV == "" {
		o.listRV = rv
	}
	o.listItems += items
	if more {
		o.mu.Unlock()
		return
	}
	rv, items = o.listRV, o.listItems
	o.listDoneLocked(rv)
	o.mu.Unlock()
	o.tel.List(o.name, rv, items, dur, "")
}

// listDoneLocked: a list phase completed at rv; a relist's notifications follow.
func (o *Informer) listDoneLocked(rv string) {
	o.listing = false
	o.listed = true
	o.lists++
	if o.lists > 1 {
		if n, err := strconv.ParseUint(rv, 10, 64); err == nil {
			o.inRelist, o.relistRV = true, n
		}
	}
}

// watchStarted: a WATCH request was sent; initialEvents: a WatchList (the list phase streamed).
func (o *Informer) watchStarted(initialEvents bool) {
	if !initialEvents {
		return
	}
	o.mu.Lock()
	already := o.listing // a WatchList streaming again at once (after a 410 or an incomplete stream)
	o.listing, o.listStart = true, o.tel.Clock().Now()
	state := o.listState()
	o.mu.Unlock()
	if !already {
		o.tel.ReflectorState(o.name, state)
	}
}

// watchOpened: the WATCH request's response arrived (code 0: the request failed, errText says
// why). retriable: client-go backs off and opens the watch again (429, connection refused).
func (o *Informer) watchOpened(code int, rv string, initialEvents, retriable bool, errText string) {
	if code == 200 {
		o.tel.WatchStart(o.name, rv)
		if !initialEvents {
			o.tel.ReflectorState(o.name, ctrlscope.ReflectorStateWatching)
		}
		return
	}
	reason := ctrlscope.WatchEndReasonError
	switch code {
	case 410:
		reason, errText = ctrlscope.WatchEndReasonExpired, ""
	case 429:
		reason = ctrlscope.WatchEndReasonTooManyRequests
	}
	o.tel.WatchEnd(o.name, reason, errText)
	switch {
	case retriable:
		o.backingOff("watch failed: " + errText)
	case !initialEvents:
		// ListAndWatch returns this error to the error handler, which backs off.
		o.mu.Lock()
		o.failureReported = true
		o.mu.Unlock()
	}
	// A failed WatchList falls back to a LIST (or, after a 410, streams again from the latest
	// state) without backing off.
}

// initialEventsEnded: a WatchList's stream reached its initial-events-end bookmark at rv, after
// items ADDED events: the list phase is complete and the same stream goes on as the watch.
func (o *Informer) initialEventsEnded(rv string, items int) {
	o.mu.Lock()
	dur := o.tel.Clock().Since(o.listStart)
	o.listDoneLocked(rv)
	o.mu.Unlock()
	o.tel.List(o.name, rv, items, dur, "")
	o.tel.ReflectorState(o.name, ctrlscope.ReflectorStateWatching)
}

// watchEnded: an opened watch's stream ended. initialPhase: before a WatchList's end bookmark.
func (o *Informer) watchEnded(reason ctrlscope.WatchEndReason, errText string, initialPhase bool) {
	o.tel.WatchEnd(o.name, reason, errText)
	switch reason {
	case ctrlscope.WatchEndReasonClosed, ctrlscope.WatchEndReasonStopped,
		ctrlscope.WatchEndReasonInitialEventsIncomplete:
		// Watched again at once (a WatchList starts over), or stopping.
	case ctrlscope.WatchEndReasonTooManyRequests:
		o.backingOff("watch returned 429")
	default:
		// An expired, failed or very short watch ends the ListAndWatch cycle: client-go waits its
		// backoff and lists again. During a WatchList's initial events it streams again at once.
		if !initialPhase {
			o.backingOff("watch ended: " + string(reason))
		}
	}
}

// -- the observing handler ----------------------------------------------------------------------

type observingHandler struct{ o *Informer }

// relistItem says whether a notification for obj belongs to the last relist: while the relist's
// notifications last, objects are at or below its resourceVersion; the first newer one is a watch
// event and ends the window.
func (o *Informer) relistItem(obj any) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.inRelist {
		return false
	}
	if n, err := strconv.ParseUint(ctrlscope.ResourceVersion(obj), 10, 64); err == nil && n <= o.relistRV {
		return true
	}
	o.inRelist = false
	return false
}

func sameObject(a, b any) bool {
	ra, ok1 := a.(runtime.Object)
	rb, ok2 := b.(runtime.Object)
	return ok1 && ok2 && ra == rb
}

func (h observingHandler) OnAdd(obj any, isInInitialList bool) {
	o := h.o
	key := ObjectKey(obj)
	o.it.StoreUpsert(key, obj)
	o.order.observed(key, obj, false, func(firstCall time.Time) {
		switch {
		case isInInitialList:
		case o.relistItem(obj):
			o.it.Fifo(ctrlscope.FifoOpPopped, key, ctrlscope.DeltaTypeReplaced, 0)
		default:
			o.it.WatchEventAt(firstCall, ctrlscope.WatchEventTypeAdded, key, ctrlscope.ResourceVersion(obj))
		}
	})
}

func (h observingHandler) OnUpdate(oldObj, newObj any) {
	o := h.o
	key := ObjectKey(newObj)
	if sameObject(oldObj, newObj) {
		// A resync: the cached object handed out again; the cache did not change.
		o.order.observed(key, newObj, false, func(time.Time) {
			o.it.Fifo(ctrlscope.FifoOpPopped, key, ctrlscope.DeltaTypeSync, 0)
		})
		return
	}
	o.it.StoreUpsert(key, newObj)
	rv := ctrlscope.ResourceVersion(newObj)
	o.order.observed(key, newObj, false, func(firstCall time.Time) {
		if rv == ctrlscope.ResourceVersion(oldObj) || o.relistItem(newObj) {
			o.it.Fifo(ctrlscope.FifoOpPopped, key, ctrlscope.DeltaTypeReplaced, 0)
			return
		}
		o.it.WatchEventAt(firstCall, ctrlscope.WatchEventTypeModified, key, rv)
	})
}

func (h observingHandler) OnDelete(obj any) {
	o := h.o
	key := ObjectKey(obj)
	o.it.StoreDelete(key)
	o.order.observed(key, obj, true, func(firstCall time.Time) {
		if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			// Deleted while unseen: a relist no longer had it.
			o.it.Fifo(ctrlscope.FifoOpPopped, key, ctrlscope.DeltaTypeDeleted, 0)
			return
		}
		o.it.WatchEventAt(firstCall, ctrlscope.WatchEventTypeDeleted, key, ctrlscope.ResourceVersion(obj))
	})
}

// -- the registry the transport matches requests against -----------------------------------------

type registry struct {
	mu     sync.Mutex
	byGVR  map[schema.GroupVersionResource][]*Informer // informers whose resource is known
	byName map[string]*Informer                        // every observed informer, by its name
}

var registries sync.Map // *ctrlscope.Telemetry -> *registry

func registryFor(tel *ctrlscope.Telemetry) *registry {
	if r, ok := registries.Load(tel); ok {
		return r.(*registry)
	}
	r, _ := registries.LoadOrStore(tel, &registry{byGVR: map[schema.GroupVersionResource][]*Informer{},
		byName: map[string]*Informer{}})
	return r.(*registry)
}

func (r *registry) add(o *Informer) {
	r.mu.Lock()
	if o.hasGVR {
		r.byGVR[o.gvr] = append(r.byGVR[o.gvr], o)
	}
	r.byName[o.name] = o
	r.mu.Unlock()
}

// named is the observed informer called name, nil if none is.
func (r *registry) named(name string) *Informer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byName[name]
}

func (r *registry) remove(o *Informer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName[o.name] == o {
		delete(r.byName, o.name)
	}
	list := r.byGVR[o.gvr]
	for i, x := range list {
		if x == o {
			r.byGVR[o.gvr] = append(list[:i:i], list[i+1:]...)
			return
		}
	}
}

// match finds the observed informer that a LIST or WATCH of gvr in namespace ("" for all) is for:
// the one watching exactly that namespace, else the only one of the resource that did not say.
func (r *registry) match(gvr schema.GroupVersionResource, namespace string) *Informer {
	r.mu.Lock()
	defer r.mu.Unlock()
	var loose []*Informer
	for _, o := range r.byGVR[gvr] {
		if o.namespace == namespace && (o.namespaceSet || namespace == "") {
			return o
		}
		if !o.namespaceSet {
			loose = append(loose, o)
		}
	}
	if len(loose) == 1 {
		return loose[0]
	}
	return nil
}
