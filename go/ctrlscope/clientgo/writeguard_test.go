package clientgo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// recordingServer answers /version with gitCommit and every other request with an empty object,
// and records what reached it.
type recordingServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func newRecordingServer(t *testing.T, gitCommit string) *recordingServer {
	s := &recordingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/version" {
			_, _ = w.Write([]byte(`{"major":"1","minor":"31","gitVersion":"v1.31.0","gitCommit":"` + gitCommit + `"}`))
			return
		}
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"a"}}`))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *recordingServer) writes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.requests {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

func createConfigMap(t *testing.T, cfg *rest.Config) error {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps("a").Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	return err
}

func TestWritesToARealClusterAreRefusedBeforeTheyAreSent(t *testing.T) {
	h := newHarness(t)
	s := newRecordingServer(t, "0123456789abcdef0123456789abcdef01234567")
	lease := "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
	cfg, err := GuardWrites(h.Tel, &rest.Config{Host: s.URL}, false, lease)
	if err != nil {
		t.Fatal(err)
	}
	cfg = WrapConfig(h.Tel, cfg)
	err = createConfigMap(t, cfg)
	var ro *ReadOnlyError
	if !errors.As(err, &ro) || ro.Method != "POST" || ro.Path != "/api/v1/namespaces/a/configmaps" {
		t.Fatalf("want a ReadOnlyError for the POST, got %v", err)
	}
	if !strings.Contains(err.Error(), "is not the simulated cluster") || !strings.Contains(err.Error(), "--allow-writes") {
		t.Fatalf("the error does not say why and what to do: %v", err)
	}
	if w := s.writes(); len(w) != 0 {
		t.Fatalf("writes reached the server: %v", w)
	}
	// The worker's own Lease is exempt.
	cs, _ := kubernetes.NewForConfig(cfg)
	_, err = cs.CoordinationV1().Leases("ns").Create(context.Background(),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}, metav1.CreateOptions{})
	if err != nil && errors.As(err, &ro) {
		t.Fatalf("the Lease write was refused: %v", err)
	}
	if w := s.writes(); len(w) != 1 || w[0] != "POST "+lease {
		t.Fatalf("want only the Lease create, got %v", w)
	}
	h.Flush(t)
	_, state := h.Read(t, "w/test/components")
	entry, _ := state["cluster/"+strings.TrimPrefix(s.URL, "http://")].(map[string]any)
	if entry["writes"] != "read-only" || entry["simulated"] != false {
		t.Fatalf("the cluster entry says %v", entry)
	}
}

func TestARefusedWriteIsPublishedAsRefusedNotAsAFailedWrite(t *testing.T) {
	h := newHarness(t)
	s := newRecordingServer(t, "0123456789abcdef0123456789abcdef01234567")
	cfg, err := GuardWrites(h.Tel, &rest.Config{Host: s.URL}, false)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(WrapConfig(h.Tel, cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := h.Tel.ReconcileStart(context.Background(), "summary", "a/c", 0)
	_, err = cs.CoreV1().ConfigMaps("a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
		metav1.CreateOptions{})
	var ro *ReadOnlyError
	if !errors.As(err, &ro) {
		t.Fatalf("want a ReadOnlyError, got %v", err)
	}
	h.Flush(t)
	recs, _ := h.Read(t, "w/test/controller/summary")
	var writes []map[string]any
	for _, r := range recs {
		if r["k"] == "write" {
			writes = append(writes, r)
		}
	}
	if len(writes) != 1 || writes[0]["refused"] != "read-only" || writes[0]["code"] != 0.0 ||
		writes[0]["method"] != "POST" || writes[0]["path"] != "/api/v1/namespaces/a/configmaps" {
		t.Fatalf("want one refused POST, got %v", writes)
	}
	raw, _ := json.Marshal(h.Tel.Stages()["controllers"])
	var counts map[string]map[string]any
	if err := json.Unmarshal(raw, &counts); err != nil {
		t.Fatal(err)
	}
	if c := counts["summary"]; c["writes"] != 0.0 || c["write_errors"] != 0.0 || c["writes_refused"] != 1.0 {
		t.Fatalf("a refused write counts as refused only: %v", c)
	}
}

func TestTheSimulatorAndAllowWritesLetWritesThrough(t *testing.T) {
	for _, tc := range []struct {
		commit string
		allow  bool
	}{{SimulatorGitCommit, false}, {"0123456789abcdef0123456789abcdef01234567", true}} {
		h := newHarness(t)
		s := newRecordingServer(t, tc.commit)
		cfg, err := GuardWrites(h.Tel, &rest.Config{Host: s.URL}, tc.allow)
		if err != nil {
			t.Fatal(err)
		}
		if err := createConfigMap(t, WrapConfig(h.Tel, cfg)); err != nil {
			t.Fatalf("commit %s, allow %v: %v", tc.commit, tc.allow, err)
		}
		if w := s.writes(); len(w) != 1 {
			t.Fatalf("want the POST to reach the server, got %v", w)
		}
		h.Flush(t)
		_, state := h.Read(t, "w/test/components")
		entry, _ := state["cluster/"+strings.TrimPrefix(s.URL, "http://")].(map[string]any)
		if entry["writes"] != "allowed" || entry["simulated"] != (tc.commit == SimulatorGitCommit) {
			t.Fatalf("the cluster entry says %v", entry)
		}
	}
}

func TestAnUnansweredServerIsAskedAgainOnTheFirstWrite(t *testing.T) {
	answers := []*bool{nil, ptr(true)}
	g := &writeGuard{server: "https://x", probe: func() *bool { a := answers[0]; answers = answers[1:]; return a }}
	if err := g.check("PATCH", "/api/v1/nodes/n"); err == nil || !strings.Contains(err.Error(), "did not say") {
		t.Fatalf("want a refusal while the server is unknown, got %v", err)
	}
	if err := g.check("PATCH", "/api/v1/nodes/n"); err != nil {
		t.Fatalf("the server answered it is the simulator: %v", err)
	}
	if err := g.check("GET", "/api/v1/nodes"); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
