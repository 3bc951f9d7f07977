package ctrlruntime

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

// Options configure Instrument; zero values take the defaults in brackets.
type Options struct {
	// LeaderElectionID and LeaderElectionNamespace name the manager's Lease (the same values as
	// in manager.Options; the manager does not tell them). Empty ID: leader election is not
	// reported. The namespace defaults to "default".
	LeaderElectionID, LeaderElectionNamespace string
	// Identity is this replica's leader-election identity as far as it is known before the
	// election is won [the hostname]. controller-runtime makes it hostname_<uuid> and does not
	// tell it; once elected, the Lease's holder is the identity.
	Identity string
	// LeasePoll is how often the Lease holder is read while not leading [2s, the retry period].
	LeasePoll time.Duration
	// ClusterName names the cluster component [the API server's host].
	ClusterName string
	// Gatherer is sampled into the metrics topic [controller-runtime's metrics.Registry].
	Gatherer prometheus.Gatherer
	// NoMetrics turns the metrics sampler off.
	NoMetrics bool
	// MetricsInterval is the sampling interval [1s].
	MetricsInterval time.Duration
	// Clock drives the queues' delayed-add mirror and the sampler [real].
	Clock clock.WithTicker
}

// Instrumentation is one manager's observation: build it with Instrument, then use its helpers
// while setting up controllers.
type Instrumentation struct {
	mgr  manager.Manager
	tel  *ctrlscope.Telemetry
	opts Options

	mu        sync.Mutex
	ctrls     map[string]*controllerInfo
	informers map[string]toolscache.SharedIndexInformer // informer name -> the cache's informer
	observers []*clientgo.Informer

	informerNames sync.Map // reflect.Type of a watched object -> its informer's name (see informerOf)
}

type controllerInfo struct {
	watches []string
	workers int
	started bool
	slots   []bool // worker slots in use (see Reconciler)
}

// Instrument observes mgr through tel: it adds a runnable (on every replica, leader or not) that
// samples controller-runtime's metrics into the worker's metrics topic, reports leader election and
// asks the API server's version, and announces the cluster (host only) at once.
//
// Pass the manager's rest config through clientgo.WrapConfig before ctrl.NewManager, so that API
// writes made from a Reconcile's context are published (the transport cannot be added later).
func Instrument(mgr manager.Manager, tel *ctrlscope.Telemetry, opts Options) (*Instrumentation, error) {
	if mgr == nil || tel == nil {
		return nil, fmt.Errorf("ctrlruntime: Instrument needs a manager and a Telemetry")
	}
	if opts.LeaderElectionNamespace == "" {
		opts.LeaderElectionNamespace = "default"
	}
	if opts.Identity == "" {
		opts.Identity, _ = os.Hostname()
	}
	if opts.LeasePoll <= 0 {
		opts.LeasePoll = 2 * time.Second
	}
	if opts.Gatherer == nil {
		opts.Gatherer = crmetrics.Registry
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	i := &Instrumentation{mgr: mgr, tel: tel, opts: opts, ctrls: map[string]*controllerInfo{},
		informers: map[string]toolscache.SharedIndexInformer{}}
	server := serverURL(mgr.GetConfig().Host)
	if opts.ClusterName == "" {
		if u, err := url.Parse(server); err == nil && u.Host != "" {
			opts.ClusterName = u.Host
		} else {
			opts.ClusterName = server
		}
		i.opts.ClusterName = opts.ClusterName
	}
	tel.DescribeCluster(opts.ClusterName, server, "")
	if err := mgr.Add(&runnable{i: i}); err != nil {
		return nil, err
	}
	return i, nil
}

// Telemetry is the encoder the instrumentation publishes through.
func (i *Instrumentation) Telemetry() *ctrlscope.Telemetry { return i.tel }

// serverURL is the API server's scheme://host[:port][/path], never user info.
func serverURL(host string) string {
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return ""
	}
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	return u.String() // as clientgo.WrapConfig describes it: one cluster component, not two
}

// runnable runs on every replica (NeedLeaderElection false): metrics and leader election are
// worth seeing on a replica that waits for the Lease too.
type runnable struct{ i *Instrumentation }

func (r *runnable) NeedLeaderElection() bool { return false }

func (r *runnable) Start(ctx context.Context) error {
	i := r.i
	go i.describeVersion()
	if i.opts.LeaderElectionID != "" {
		go i.watchLeader(ctx)
	}
	defer func() { // the cache stops with the manager's context
		i.mu.Lock()
		observers := append([]*clientgo.Informer(nil), i.observers...)
		i.mu.Unlock()
		for _, o := range observers {
			o.Stopped()
		}
	}()
	if i.opts.NoMetrics {
		<-ctx.Done()
		return nil
	}
	s, err := ctrlscope.NewMetricsSampler(i.opts.Gatherer, i.tel.Publisher(), i.tel.MetricsTopic,
		ctrlscope.MetricsSamplerOptions{Stages: i.tel.Stages, Interval: i.opts.MetricsInterval, Clock: i.opts.Clock,
			SumLabels: map[string][]string{"workqueue_depth": {"priority"}}})
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// describeVersion asks the API server's version (one GET /version) for the cluster component.
func (i *Instrumentation) describeVersion() {
	dc, err := discovery.NewDiscoveryClientForConfig(i.mgr.GetConfig())
	if err != nil {
		return
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return
	}
	i.tel.DescribeCluster(i.opts.ClusterName, serverURL(i.mgr.GetConfig().Host), v.GitVersion)
}

// watchLeader reports the Lease: its holder, read every LeasePoll while this replica waits (one
// GET through the uncached reader, changes only), and this replica's leadership when the
// manager's Elected channel closes. controller-runtime ends the process when leadership is lost,
// so there is nothing to report after.
func (i *Instrumentation) watchLeader(ctx context.Context) {
	lock := i.opts.LeaderElectionID
	identity := i.opts.Identity
	last := "\x00"
	readHolder := func() (string, bool) {
		var lease coordinationv1.Lease
		key := types.NamespacedName{Namespace: i.opts.LeaderElectionNamespace, Name: lock}
		if err := i.mgr.GetAPIReader().Get(ctx, key, &lease); err != nil {
			return "", client.IgnoreNotFound(err) == nil
		}
		if lease.Spec.HolderIdentity == nil {
			return "", true
		}
		return *lease.Spec.HolderIdentity, true
	}
	t := time.NewTicker(i.opts.LeasePoll)
	defer t.Stop()
	for {
		if holder, ok := readHolder(); ok && holder != last {
			last = holder
			i.tel.Leader(lock, identity, false, holder)
		}
		select {
		case <-ctx.Done():
			return
		case <-i.mgr.Elected():
			// The Lease now names us: controller-runtime's identity (hostname_uuid) is its holder.
			if holder, ok := readHolder(); ok && holder != "" {
				identity = holder
			}
			i.tel.Leader(lock, identity, true, identity)
			return
		case <-t.C:
		}
	}
}

// -- controllers and their informers -------------------------------------------------------------

func (i *Instrumentation) controller(name string) *controllerInfo { // i.mu held
	c := i.ctrls[name]
	if c == nil {
		c = &controllerInfo{watches: []string{}, workers: 1}
		i.ctrls[name] = c
	}
	return c
}

func (i *Instrumentation) publishController(name string) {
	i.mu.Lock()
	c := i.controller(name)
	watches := append([]string(nil), c.watches...)
	workers, started := c.workers, c.started
	i.mu.Unlock()
	i.tel.Controller(name, watches, workers, started)
}

// Watch says that controller watches the types of objs: their informers in the manager's cache
// are observed (created now if need be, so the observation sees the first LIST) and listed as the
// controller's watches. For and Owns call it; call it yourself for types you pass to the builder's
// For, Owns or Watches directly.
func (i *Instrumentation) Watch(controller string, objs ...client.Object) error {
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, i.mgr.GetScheme())
		if err != nil {
			i.tel.SetupError(controller, err.Error())
			return err
		}
		name := clientgo.InformerName(gvk)
		if err := i.observeInformer(name, obj); err != nil {
			i.tel.SetupError(controller, err.Error())
			return err
		}
		i.mu.Lock()
		c := i.controller(controller)
		if !contains(c.watches, name) {
			c.watches = append(c.watches, name)
			sort.Strings(c.watches)
		}
		i.mu.Unlock()
	}
	i.publishController(controller)
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// observeInformer observes the manager cache's informer for obj's type once. controller-runtime's
// cache.Informer is a client-go SharedIndexInformer underneath (the informer map creates one per
// GVK and hands it out as is), so the client-go observation applies unchanged.
func (i *Instrumentation) observeInformer(name string, obj client.Object) error {
	i.mu.Lock()
	_, done := i.informers[name]
	i.mu.Unlock()
	if done {
		return nil
	}
	inf, err := i.mgr.GetCache().GetInformer(context.Background(), obj)
	if err != nil {
		return fmt.Errorf("informer for %s: %w", name, err)
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return fmt.Errorf("informer for %s is a %T, not a client-go SharedIndexInformer", name, inf)
	}
	i.mu.Lock()
	if _, done := i.informers[name]; done {
		i.mu.Unlock()
		return nil
	}
	i.informers[name] = sii
	i.mu.Unlock()
	o, err := observeInformer(i.tel, name, sii)
	if err != nil {
		return err
	}
	i.mu.Lock()
	i.observers = append(i.observers, o)
	i.mu.Unlock()
	return nil
}

// synced says whether every informer controller watches has synced.
func (i *Instrumentation) synced(controller string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, w := range i.controller(controller).watches {
		if inf := i.informers[w]; inf != nil && !inf.HasSynced() {
			return false
		}
	}
	return true
}
