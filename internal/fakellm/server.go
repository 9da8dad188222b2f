package fakellm

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Model is the model name the fake service says it served, in every
// format. It differs from any model a test asks for, so a test can tell
// that a client reports the served model and not the requested one.
const Model = "served-model"

// Handler answers one request. n is the request's 1-based number on its
// Server, so a handler can script a conversation call by call. The request
// body can be read again: the Server has read it already to record it.
type Handler func(w http.ResponseWriter, r *http.Request, n int)

// Request is one request as the Server received it, kept for assertions.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Body is the decoded JSON body; nil when the request had none.
	Body map[string]any
	Raw  []byte
}

// Server is a fake model service on 127.0.0.1. It is safe for concurrent
// use: clients may send requests in parallel while a test reads Requests.
type Server struct {
	// URL is the root of the service, http://127.0.0.1:port without a
	// path: an OpenAI client takes URL+"/v1" as its base URL, an Anthropic
	// client URL itself.
	URL string

	srv     *httptest.Server
	handler Handler

	mu   sync.Mutex // protects reqs
	reqs []Request
}

// Start starts a Server answering with h and closes it when the test ends.
// A request whose body is not JSON gets 400 and never reaches h.
func Start(t testing.TB, h Handler) *Server {
	t.Helper()
	s := &Server{handler: h}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var body map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	n := len(s.reqs)
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(raw))
	s.handler(w, r, n)
}

// Client is an HTTP client for the Server (no proxy from the environment
// can come between them).
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close stops the Server: it drops the connections of requests still being
// answered (a handler holding a stream sees its request's context done) and
// waits for their handlers. Calling it again does nothing.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Count is how many requests the Server received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Request returns the n-th request (1-based) and fails the test when
// there were fewer.
func (s *Server) Request(t testing.TB, n int) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) < n {
		t.Fatalf("service received %d requests, want at least %d", len(reqs), n)
	}
	return reqs[n-1]
}

// Only returns the one request the Server must have received and fails the
// test when there were more or none.
func (s *Server) Only(t testing.TB) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("service received %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

// Get walks a decoded JSON value, such as a Request's Body: a string step
// is an object key, an int step an array index. It fails the test when a
// step does not exist, so an assertion on the result never reads a zero
// value by mistake.
func Get(t testing.TB, v any, path ...any) any {
	t.Helper()
	cur := v
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("path %v: element %d is %T, not an object", path, i, cur)
			}
			if cur, ok = m[k]; !ok {
				t.Fatalf("path %v: no key %q in %v", path, k, m)
			}
		case int:
			a, ok := cur.([]any)
			if !ok || k < 0 || k >= len(a) {
				t.Fatalf("path %v: element %d is %T, not an array with index %d", path, i, cur, k)
			}
			cur = a[k]
		default:
			t.Fatalf("path %v: step %d is %T, want string or int", path, i, p)
		}
	}
	return cur
}
