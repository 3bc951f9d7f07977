package clientgo

// Read-only by default against real clusters, the Go side of controllers/informers/write_guard.py.
//
// GuardWrites wraps a rest.Config so that every request that is not a read (GET/HEAD/OPTIONS)
// fails before it leaves the process with a *ReadOnlyError, unless the server is ctrlscope's
// simulated cluster (its /version says gitCommit "ctrlscope-sim", controllers/simulated.py) or the
// worker was started with --allow-writes. Wrap it inside WrapConfig (GuardWrites first): the
// telemetry transport then reports each refused write as refused (Telemetry.WriteRefused: never
// sent, so not a failed write), and the Reconcile that made it fails with the error's text --
// terminally, through ctrlruntime's Reconciler: retrying cannot make the worker writable. The cluster entry says "read-only" or
// "allowed" (Telemetry.DescribeWrites).
//
// The server is asked once, when the config is guarded; if it does not answer then, it is asked
// again on the first write, and until it answers every write is refused. Paths under an exempt
// prefix (the worker's leader-election Leases) may always be written.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// SimulatorGitCommit is what ctrlscope's simulated API server answers as /version's gitCommit.
const SimulatorGitCommit = "ctrlscope-sim"

// ReadOnlyError is a write the worker refused itself: nothing was sent to the API server.
type ReadOnlyError struct {
	Method, Path, Server, Why string
}

func (e *ReadOnlyError) Error() string {
	return fmt.Sprintf("read-only: %s %s was not sent: %s; start the worker with --allow-writes to let its "+
		"controllers change %s", e.Method, e.Path, e.Why, e.Server)
}

type writeGuard struct {
	tel         *ctrlscope.Telemetry
	name        string // the cluster entry's name, as WrapConfig gives it
	server      string
	allowWrites bool
	exempt      []string
	probe       func() *bool

	mu        sync.Mutex
	simulated *bool
}

// GuardWrites returns a copy of cfg whose requests pass the guard described above; exempt are
// path prefixes that may always be written (e.g. "/apis/coordination.k8s.io/v1/namespaces/ns/leases").
func GuardWrites(tel *ctrlscope.Telemetry, cfg *rest.Config, allowWrites bool, exempt ...string) (*rest.Config, error) {
	server := serverURL(cfg.Host)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	hc.Timeout = 5 * time.Second
	g := &writeGuard{tel: tel, name: clusterName(server), server: server, allowWrites: allowWrites, exempt: exempt,
		probe: func() *bool { return isSimulated(hc, server) }}
	g.simulated = g.probe()
	g.describe()
	c := rest.CopyConfig(cfg)
	c.WrapTransport = transport.Wrappers(c.WrapTransport, func(next http.RoundTripper) http.RoundTripper {
		return &guardTripper{g: g, next: next}
	})
	return c, nil
}

// isSimulated asks server's /version; nil when it did not answer.
func isSimulated(hc *http.Client, server string) *bool {
	resp, err := hc.Get(strings.TrimRight(server, "/") + "/version")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var info struct {
		GitCommit string `json:"gitCommit"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		return nil
	}
	simulated := info.GitCommit == SimulatorGitCommit
	return &simulated
}

func (g *writeGuard) allowed() bool { // g.mu held
	return g.allowWrites || (g.simulated != nil && *g.simulated)
}

func (g *writeGuard) describe() {
	g.mu.Lock()
	mode, simulated := ctrlscope.WriteModeReadOnly, g.simulated
	if g.allowed() {
		mode = ctrlscope.WriteModeAllowed
	}
	g.mu.Unlock()
	if g.tel != nil {
		g.tel.DescribeWrites(g.name, simulated, mode)
	}
}

func (g *writeGuard) check(method, path string) error {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	for _, p := range g.exempt {
		if strings.HasPrefix(path, p) {
			return nil
		}
	}
	g.mu.Lock()
	if !g.allowed() && g.simulated == nil {
		g.mu.Unlock()
		answer := g.probe() // outside the lock: a slow server must not block reads
		g.mu.Lock()
		if g.simulated == nil && answer != nil {
			g.simulated = answer
			defer g.describe()
		}
	}
	ok, known := g.allowed(), g.simulated != nil
	g.mu.Unlock()
	if ok {
		return nil
	}
	why := g.server + " is not the simulated cluster"
	if !known {
		why = g.server + " did not say whether it is the simulated cluster"
	}
	return &ReadOnlyError{Method: method, Path: path, Server: g.server, Why: why}
}

type guardTripper struct {
	g    *writeGuard
	next http.RoundTripper
}

func (rt *guardTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }

func (rt *guardTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := rt.g.check(req.Method, req.URL.Path); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper must close the body, even on error
		}
		return nil, err
	}
	return rt.next.RoundTrip(req)
}
