package clientgo

// Test fixtures for the informer and transport tests: a Telemetry on a real Redis (the testRedis
// pattern of ../redis_test.go) and a small API server for Deployments over httptest, which speaks
// what client-go's reflector uses: LIST (optionally paginated), WATCH from a resourceVersion with
// newline-delimited JSON events, WatchList (sendInitialEvents=true, ending with the
// initial-events-end bookmark), 410 for a watch from a compacted resourceVersion, and POST.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/ctrlscope/ctrlscope/go/internal/testtel"
)

// telFixture: a Telemetry (worker "w") publishing under a private prefix; the publisher is not
// started, tests flush it themselves.
type telFixture struct{ *testtel.Harness }

func newTelFixture(t *testing.T, clk clock.PassiveClock) *telFixture {
	t.Helper()
	return &telFixture{testtel.New(t, testtel.Options{Worker: "w", Clock: clk})}
}

// topic flushes and reads one topic back as a reader does: its records in order (without ts)
// and the state its snapshot holds.
func (f *telFixture) topic(t *testing.T, topic string) ([]map[string]any, map[string]any) {
	t.Helper()
	f.Flush(t)
	recs, state := f.Read(t, topic)
	for _, r := range recs {
		delete(r, "ts")
	}
	return recs, state
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// -- the API server -------------------------------------------------------------------------------

type apiEvent struct {
	typ string
	obj *appsv1.Deployment
}

type apiServer struct {
	*httptest.Server
	watchList bool // serve sendInitialEvents (else 400, as a server without WatchList)
	pageSize  int  // paginate LISTs with this many items (0: never)

	mu        sync.Mutex
	rv        int
	objs      map[string]*appsv1.Deployment
	history   []apiEvent // every event, in rv order
	compacted int        // watches from an rv below this get 410
	changed   chan struct{}
	expire    chan struct{} // closed: every open watch ends with an ERROR 410
	requests  []string
}

func newAPIServer(t *testing.T, watchList bool) *apiServer {
	s := &apiServer{watchList: watchList, objs: map[string]*appsv1.Deployment{}, changed: make(chan struct{}),
		expire: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) config() *rest.Config {
	return &rest.Config{Host: s.URL, Username: "admin", Password: "secret"}
}

func (s *apiServer) bump() { close(s.changed); s.changed = make(chan struct{}) } // s.mu held

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas}}
}

// apply stores d (nil: deletes key) at a new resourceVersion; silent changes make no watch event,
// as changes a watch missed while it was down (only a relist sees them).
func (s *apiServer) apply(key string, d *appsv1.Deployment, silent bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	rv := strconv.Itoa(s.rv)
	old := s.objs[key]
	typ := "MODIFIED"
	switch {
	case d == nil:
		if old == nil {
			return rv
		}
		delete(s.objs, key)
		d = old.DeepCopy()
		typ = "DELETED"
	case old == nil:
		typ = "ADDED"
	}
	d = d.DeepCopy()
	d.ResourceVersion = rv
	if typ != "DELETED" {
		s.objs[key] = d
	}
	if !silent {
		s.history = append(s.history, apiEvent{typ, d})
	} else {
		s.compacted = s.rv
	}
	s.bump()
	return rv
}

// expireWatches ends every open watch with an ERROR 410 and forgets the history: the informer
// must relist.
func (s *apiServer) expireWatches() {
	s.mu.Lock()
	s.compacted = s.rv
	close(s.expire)
	s.expire = make(chan struct{})
	s.mu.Unlock()
}

func (s *apiServer) requestLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func status(code int, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure",
		Code: int32(code), Reason: reason, Message: msg}
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	s.mu.Unlock()
	gvr, ns, ok := collection(r.URL.Path)
	if !ok || gvr.Resource != "deployments" {
		writeJSON(w, 404, status(404, metav1.StatusReasonNotFound, "not found"))
		return
	}
	switch {
	case r.Method == http.MethodPost:
		var d appsv1.Deployment
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
			writeJSON(w, 400, status(400, metav1.StatusReasonBadRequest, err.Error()))
			return
		}
		d.Namespace = ns
		s.apply(ns+"/"+d.Name, &d, false)
		s.mu.Lock()
		out := s.objs[ns+"/"+d.Name].DeepCopy()
		s.mu.Unlock()
		writeJSON(w, 201, out)
	case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
		s.watch(w, r)
	default:
		s.list(w, r)
	}
}

func (s *apiServer) sorted() []*appsv1.Deployment { // s.mu held
	keys := make([]string, 0, len(s.objs))
	for k := range s.objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*appsv1.Deployment, len(keys))
	for i, k := range keys {
		out[i] = s.objs[k]
	}
	return out
}

func (s *apiServer) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	items := s.sorted()
	rv := strconv.Itoa(s.rv)
	s.mu.Unlock()
	list := appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{Kind: "DeploymentList", APIVersion: "apps/v1"}}
	list.ResourceVersion = rv
	start := 0
	if c := q.Get("continue"); c != "" {
		parts := strings.SplitN(c, ":", 2) // "{offset}:{rv}": every page at the first page's rv
		start, _ = strconv.Atoi(parts[0])
		list.ResourceVersion = parts[1]
	}
	end := len(items)
	if limit, _ := strconv.Atoi(q.Get("limit")); s.pageSize > 0 && limit > 0 && start+s.pageSize < end {
		end = start + s.pageSize
		list.Continue = fmt.Sprintf("%d:%s", end, list.ResourceVersion)
	}
	for _, d := range items[start:end] {
		list.Items = append(list.Items, *d)
	}
	writeJSON(w, 200, list)
}

func (s *apiServer) watch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	initial := q.Get("sendInitialEvents") == "true"
	if initial && !s.watchList {
		writeJSON(w, 400, status(400, metav1.StatusReasonBadRequest, "sendInitialEvents is not supported"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	flusher := w.(http.Flusher)
	enc := json.NewEncoder(w) // one event per line, as the API server writes them
	send := func(typ string, obj any) {
		_ = enc.Encode(struct {
			Type   string `json:"type"`
			Object any    `json:"object"`
		}{typ, obj})
	}
	s.mu.Lock()
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	if initial {
		for _, d := range s.sorted() {
			send("ADDED", d)
		}
		from = s.rv
		send("BOOKMARK", map[string]any{"kind": "Deployment", "apiVersion": "apps/v1", "metadata": map[string]any{
			"resourceVersion": strconv.Itoa(s.rv), "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	} else if from == 0 {
		from = s.rv
	} else if from < s.compacted {
		s.mu.Unlock()
		send("ERROR", status(410, metav1.StatusReasonExpired, "too old resource version"))
		return
	}
	expire := s.expire
	s.mu.Unlock()
	flusher.Flush()
	for {
		s.mu.Lock()
		var pending []apiEvent
		for _, e := range s.history {
			if n, _ := strconv.Atoi(e.obj.ResourceVersion); n > from {
				pending = append(pending, e)
				from = n
			}
		}
		changed := s.changed
		s.mu.Unlock()
		for _, e := range pending {
			send(e.typ, e.obj)
		}
		flusher.Flush()
		select {
		case <-changed:
		case <-expire:
			send("ERROR", status(410, metav1.StatusReasonExpired, "too old resource version"))
			flusher.Flush()
			return
		case <-r.Context().Done():
			return
		}
	}
}
