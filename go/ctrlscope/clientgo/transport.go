package clientgo

// The REST transport as an observation point. Every request a client made from the wrapped config
// sends passes here, so it reports:
//
//   - every request to Telemetry.RequestRV (method, path without query, status, time to the response
//     headers): the writes made with a Reconcile's context become that controller's write records;
//     a write GuardWrites refused (a *ReadOnlyError, never sent) goes to Telemetry.WriteRefused;
//   - for LIST and WATCH requests of an observed informer's resource (matched by URL path, see
//     registry.match), what client-go's reflector does not expose: each list phase's
//     resourceVersion, item count and duration, each watch's start and why it ended.
//
// What is read of bodies, and when:
//
//   - the answer to a write made with a Reconcile's context (2xx, JSON) is read before client-go
//     reads it, and scanned for the object's metadata.resourceVersion (MetadataResourceVersion:
//     no decode, it stops there): v1.7's write rv, which tells the write when its watch event comes
//     back. The bytes are handed on to client-go unchanged.
//   - LIST responses (and error responses) are copied as client-go reads them and decoded once at
//     their end, into only the list's metadata and a count of its items (JSON; protobuf through
//     client-go's scheme). Watch streams are never decoded.
//   - A watch stream's bytes are passed through. The last 4 KiB read are kept (one bounded copy per
//     read, not per event) so that, when the stream ends, an ERROR event there can say why (410 →
//     expired). Only during a WatchList's initial events (sendInitialEvents=true) are lines looked
//     at: the ADDED ones are counted by their prefix, and the one initial-events-end bookmark is
//     parsed for its resourceVersion; after it the stream costs nothing but that copy.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

// WrapConfig returns a copy of cfg whose transport reports to tel (see the file comment), and
// describes the cluster cfg talks to (its server URL, never a credential). Build clients (and
// informer factories) from the copy.
//
// Unless cfg chooses its content types, the copy asks for JSON responses: client-go's typed
// clients otherwise prefer protobuf, whose watch streams give the transport no readable end (a 410
// would look like the client stopping) and no initial-events-end bookmark (a WatchList's list
// phase would be unseen). JSON costs client-go more CPU per object than protobuf; set
// cfg.AcceptContentTypes to keep protobuf, at the cost of that precision (lists stay exact: their
// protobuf bodies are decoded).
func WrapConfig(tel *ctrlscope.Telemetry, cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.ContentType == "" && c.AcceptContentTypes == "" {
		c.AcceptContentTypes = "application/json"
	}
	reg := registryFor(tel)
	c.WrapTransport = transport.Wrappers(c.WrapTransport, func(next http.RoundTripper) http.RoundTripper {
		return &roundTripper{tel: tel, reg: reg, next: next}
	})
	if server := serverURL(cfg.Host); server != "" {
		tel.DescribeCluster(clusterName(server), server, "")
	}
	return c
}

// clusterName is the cluster entry's name for server: its host[:port], else the URL itself.
func clusterName(server string) string {
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		return u.Host
	}
	return server
}

// serverURL is host as a URL without user info, query or fragment.
func serverURL(host string) string {
	if host == "" {
		return ""
	}
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

type roundTripper struct {
	tel  *ctrlscope.Telemetry
	reg  *registry
	next http.RoundTripper
}

var _ utilnet.RoundTripperWrapper = &roundTripper{}

func (rt *roundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }

// collection parses a collection path (/api/v1/[namespaces/{ns}/]{resource} or
// /apis/{group}/{version}/[namespaces/{ns}/]{resource}, after any prefix of the server URL).
func collection(path string) (schema.GroupVersionResource, string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		var gvr schema.GroupVersionResource
		var rest []string
		switch {
		case s == "api" && i+1 < len(segs):
			gvr.Version, rest = segs[i+1], segs[i+2:]
		case s == "apis" && i+2 < len(segs):
			gvr.Group, gvr.Version, rest = segs[i+1], segs[i+2], segs[i+3:]
		default:
			continue
		}
		switch {
		case len(rest) == 1:
			gvr.Resource = rest[0]
			return gvr, "", true
		case len(rest) == 3 && rest[0] == "namespaces":
			gvr.Resource = rest[2]
			return gvr, rest[1], true
		}
		return gvr, "", false
	}
	return schema.GroupVersionResource{}, "", false
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	var inf *Informer
	var q url.Values
	watching, initialEvents := false, false
	if req.Method == http.MethodGet {
		if gvr, ns, ok := collection(req.URL.Path); ok {
			if inf = rt.reg.match(gvr, ns); inf != nil {
				q = req.URL.Query()
				watching = q.Get("watch") == "true" || q.Get("watch") == "1"
				initialEvents = watching && q.Get("sendInitialEvents") == "true"
				if watching {
					inf.watchStarted(initialEvents)
				} else {
					inf.listPageStarted(q.Get("continue") == "")
				}
			}
		}
	}
	clk := rt.tel.Clock()
	start := clk.Now()
	finished := rt.tel.WriteStarted(req.Context(), req.Method, req.URL.Path) // self: provenance.go
	defer finished()
	resp, err := rt.next.RoundTrip(req)
	var refused *ReadOnlyError
	if errors.As(err, &refused) {
		// GuardWrites (inside this wrapper) refused it: nothing was sent, so it is not a request
		// that got no response (code 0) but a refused write, counted apart from failed ones.
		rt.tel.WriteRefused(req.Context(), req.Method, req.URL.Path, ctrlscope.WriteRefusalReadOnly)
		return resp, err
	}
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	took := clk.Since(start)
	rv := ""
	if err == nil && code >= 200 && code < 300 && req.Method != http.MethodGet &&
		ctrlscope.ReconcilingController(req.Context()) != "" {
		rv = writtenResourceVersion(resp)
	}
	rt.tel.RequestRV(req.Context(), req.Method, req.URL.Path, code, took, rv)
	if inf == nil {
		return resp, err
	}
	switch {
	case err != nil && watching:
		inf.watchOpened(0, "", initialEvents, utilnet.IsConnectionRefused(err), err.Error())
	case err != nil:
		inf.listPageDone(0, "", 0, false, err.Error())
	case watching && code != http.StatusOK:
		resp.Body = &bodyCopy{ReadCloser: resp.Body, done: func(b []byte, _ error) {
			inf.watchOpened(code, "", initialEvents, code == http.StatusTooManyRequests, statusText(code, b))
		}}
	case watching:
		inf.watchOpened(code, q.Get("resourceVersion"), initialEvents, false, "")
		resp.Body = newWatchBody(resp.Body, req, inf, initialEvents, clk.Now(),
			strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"))
	default:
		contentType := resp.Header.Get("Content-Type")
		resp.Body = &bodyCopy{ReadCloser: resp.Body, done: func(b []byte, readErr error) {
			if code != http.StatusOK {
				inf.listPageDone(code, "", 0, false, statusText(code, b))
				return
			}
			if readErr != nil {
				inf.listPageDone(code, "", 0, false, "reading the list: "+readErr.Error())
				return
			}
			rv, items, more, derr := decodeListHead(contentType, b)
			if derr != nil {
				// Not readable here (an encoding we do not decode): the informer's sync publishes
				// the initial list from its cache instead.
				return
			}
			inf.listPageDone(code, rv, items, more, "")
		}}
	}
	return resp, err
}

// writtenResourceVersion is the metadata.resourceVersion of the object a write's JSON answer
// carries ("" when it is not JSON or has none). The body is read here, before client-go reads it:
// it is handed on as the bytes read (and the read's error, if any), closed when client-go closes it.
func writtenResourceVersion(resp *http.Response) string {
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return ""
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 && resp.ContentLength < 64<<20 {
		buf.Grow(int(resp.ContentLength))
	}
	_, readErr := buf.ReadFrom(resp.Body)
	resp.Body = &readBody{Reader: bytes.NewReader(buf.Bytes()), closer: resp.Body, err: readErr}
	rv, _ := MetadataResourceVersion(buf.Bytes())
	return rv
}

// readBody is a response body already read: its bytes, then the error the read ended with.
type readBody struct {
	*bytes.Reader
	closer io.Closer
	err    error
}

func (b *readBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *readBody) Close() error { return b.closer.Close() }

// statusText is an error response's message: the Status in its body, else the HTTP status.
func statusText(code int, body []byte) string {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	if code == 0 {
		return "no response"
	}
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}

// itemCount counts a JSON array's elements without building them.
type itemCount int

type skipItem struct{}

func (*skipItem) UnmarshalJSON([]byte) error { return nil }

func (c *itemCount) UnmarshalJSON(b []byte) error {
	var items []skipItem
	if err := json.Unmarshal(b, &items); err != nil {
		return err
	}
	*c = itemCount(len(items))
	return nil
}

// decodeListHead reads a list response's resourceVersion, item count and whether a continue token
// asks for more pages.
func decodeListHead(contentType string, body []byte) (rv string, items int, more bool, err error) {
	if strings.HasPrefix(contentType, "application/json") || contentType == "" {
		var head struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items itemCount `json:"items"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			return "", 0, false, err
		}
		return head.Metadata.ResourceVersion, int(head.Items), head.Metadata.Continue != "", nil
	}
	// Protobuf (or anything else client-go's scheme reads): the typed list, for built-in kinds.
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return "", 0, false, err
	}
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		return "", 0, false, err
	}
	return lm.GetResourceVersion(), meta.LenList(obj), lm.GetContinue() != "", nil
}

// bodyCopy keeps what the client reads of a (list or error) response and hands it to done once,
// at its end (EOF, a read error, or Close before either).
type bodyCopy struct {
	io.ReadCloser
	buf  bytes.Buffer
	once sync.Once
	done func(body []byte, readErr error)
}

func (b *bodyCopy) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	if err == io.EOF {
		b.once.Do(func() { b.done(b.buf.Bytes(), nil) })
	} else if err != nil {
		b.once.Do(func() { b.done(b.buf.Bytes(), err) })
	}
	return n, err
}

func (b *bodyCopy) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.done(b.buf.Bytes(), io.ErrUnexpectedEOF) })
	return err
}

// -- watch streams --------------------------------------------------------------------------------

const (
	watchTail   = 4 << 10 // bytes kept of a watch stream's end
	bookmarkMax = 1 << 10 // the longest line read as a possible bookmark during initial events
)

var (
	addedType    = []byte(`"type":"ADDED"`)
	bookmarkType = []byte(`"type":"BOOKMARK"`)
	errorType    = []byte(`"type":"ERROR"`)
	initialEnd   = []byte(`"` + metav1.InitialEventsAnnotationKey + `":"true"`)
)

// watchBody passes a watch stream through; see the file comment for what it looks at.
type watchBody struct {
	io.ReadCloser
	req    *http.Request
	inf    *Informer
	opened time.Time
	json   bool

	mu    sync.Mutex
	tail  []byte
	bytes int
	ended bool

	initial  bool   // before a WatchList's initial-events-end bookmark
	items    int    // ADDED lines during the initial events
	line     []byte // the current line, while it is short enough to be the bookmark
	lineLong bool   // the current line is longer: an object
}

func newWatchBody(body io.ReadCloser, req *http.Request, inf *Informer, initialEvents bool, opened time.Time,
	isJSON bool) *watchBody {
	return &watchBody{ReadCloser: body, req: req, inf: inf, opened: opened, json: isJSON,
		initial: initialEvents && isJSON}
}

func (w *watchBody) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if n > 0 {
		w.mu.Lock()
		w.bytes += n
		w.keep(p[:n])
		if w.initial {
			w.scanInitial(p[:n])
		}
		w.mu.Unlock()
	}
	if err != nil {
		w.end(err)
	}
	return n, err
}

func (w *watchBody) Close() error {
	err := w.ReadCloser.Close()
	w.end(nil)
	return err
}

// keep appends chunk to the tail, keeping at most the last watchTail bytes (amortised: the tail
// is compacted when it reaches twice that).
func (w *watchBody) keep(chunk []byte) {
	if len(chunk) >= watchTail {
		w.tail = append(w.tail[:0], chunk[len(chunk)-watchTail:]...)
		return
	}
	if len(w.tail)+len(chunk) > 2*watchTail {
		drop := len(w.tail) + len(chunk) - watchTail
		w.tail = append(w.tail[:0], w.tail[drop:]...)
	}
	w.tail = append(w.tail, chunk...)
}

// scanInitial looks at the initial events line by line (the API server ends each watch event with
// a newline). Only a line's first bookmarkMax bytes are kept: a longer line carries an object, so
// it is an ADDED event (the initial events are ADDED events and the final bookmark); a short one
// is looked at whole (its "type", or the initial-events-end bookmark, whose resourceVersion
// closes the list phase). Key order within a line does not matter.
func (w *watchBody) scanInitial(chunk []byte) {
	for len(chunk) > 0 && w.initial {
		i := bytes.IndexByte(chunk, '\n')
		part := chunk
		if i >= 0 {
			part = chunk[:i]
		}
		if !w.lineLong {
			if len(w.line)+len(part) > bookmarkMax {
				w.lineLong, w.line = true, w.line[:0]
			} else {
				w.line = append(w.line, part...)
			}
		}
		if i < 0 {
			return
		}
		w.lineDone()
		chunk = chunk[i+1:]
	}
}

func (w *watchBody) lineDone() {
	line, long := w.line, w.lineLong
	w.line, w.lineLong = w.line[:0], false
	switch {
	case long || bytes.Contains(line, addedType):
		w.items++
	case bytes.Contains(line, bookmarkType) && bytes.Contains(line, initialEnd):
		var ev struct {
			Object struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			} `json:"object"`
		}
		_ = json.Unmarshal(line, &ev)
		w.initial = false
		w.line = nil
		w.inf.initialEventsEnded(ev.Object.Metadata.ResourceVersion, w.items)
	}
}

// end classifies how the stream ended, once: readErr is the read's error (io.EOF: the server
// closed it), nil when the client closed the stream first.
func (w *watchBody) end(readErr error) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.ended = true
	reason, text := ctrlscope.WatchEndReasonClosed, ""
	if r, t, ok := w.errorEvent(); ok {
		reason, text = r, t
	} else {
		switch {
		case w.req.Context().Err() != nil:
			reason = ctrlscope.WatchEndReasonStopped
		case readErr == nil:
			// Closed by client-go without an error event: it is stopping this watch.
			reason = ctrlscope.WatchEndReasonStopped
		case readErr != io.EOF:
			reason, text = ctrlscope.WatchEndReasonError, readErr.Error()
		case w.initial:
			reason = ctrlscope.WatchEndReasonInitialEventsIncomplete
		case w.bytes == 0 && w.inf.tel.Clock().Since(w.opened) < time.Second:
			reason = ctrlscope.WatchEndReasonVeryShort
		}
	}
	initial := w.initial
	w.tail, w.line = nil, nil
	w.mu.Unlock()
	w.inf.watchEnded(reason, text, initial)
}

// errorEvent finds an ERROR event at the end of the stream (the last thing a server sends before it
// closes a failed watch) and says what it means.
func (w *watchBody) errorEvent() (ctrlscope.WatchEndReason, string, bool) {
	if !w.json {
		return "", "", false
	}
	i := bytes.LastIndex(w.tail, errorType)
	if i < 0 {
		return "", "", false
	}
	line := w.tail[bytes.LastIndexByte(w.tail[:i], '\n')+1:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	var ev struct {
		Object metav1.Status `json:"object"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return ctrlscope.WatchEndReasonError, "watch ERROR event", true
	}
	switch ev.Object.Code {
	case http.StatusGone:
		return ctrlscope.WatchEndReasonExpired, "", true
	case http.StatusTooManyRequests:
		return ctrlscope.WatchEndReasonTooManyRequests, ev.Object.Message, true
	}
	text := ev.Object.Message
	if text == "" {
		text = fmt.Sprintf("watch ERROR event: %d %s", ev.Object.Code, ev.Object.Reason)
	}
	return ctrlscope.WatchEndReasonError, text, true
}
