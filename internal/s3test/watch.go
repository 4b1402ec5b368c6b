package s3test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Watch is a reverse proxy in front of an S3 endpoint that holds every request for a delay (a
// store's round trip) and records what it passes: each listing's prefix, and how many listings and
// object reads were in flight at once, at most.
type Watch struct {
	URL string // the proxy's endpoint, http://127.0.0.1:port

	mu           sync.Mutex
	lists, gets  int // in flight
	maxLists     int
	maxGets      int
	listPrefixes []string
}

// Watch starts a Watch in front of the server until the test ends, and points the SDK's
// environment at it with the root account's keys (EnvFor).
func (s *Server) Watch(t *testing.T, delay time.Duration) *Watch {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	w := &Watch{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		list := r.Method == http.MethodGet && r.URL.Query().Has("list-type")
		read := r.Method == http.MethodGet && !list
		w.enter(list, read, r.URL.Query().Get("prefix"))
		defer w.leave(list, read)
		time.Sleep(delay)
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(hs.Close)
	w.URL = hs.URL
	EnvFor(t, w.URL, AccessKey, SecretKey)
	return w
}

func (w *Watch) enter(list, read bool, prefix string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case list:
		w.lists++
		w.maxLists = max(w.maxLists, w.lists)
		w.listPrefixes = append(w.listPrefixes, prefix)
	case read:
		w.gets++
		w.maxGets = max(w.maxGets, w.gets)
	}
}

func (w *Watch) leave(list, read bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case list:
		w.lists--
	case read:
		w.gets--
	}
}

// MaxConcurrent returns the most listings, and the most object reads (GETs), that were in flight at
// once.
func (w *Watch) MaxConcurrent() (lists, reads int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxLists, w.maxGets
}

// ListPrefixes returns the prefix of every listing passed, in the order they arrived.
func (w *Watch) ListPrefixes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.listPrefixes...)
}

// Reset forgets what was recorded.
func (w *Watch) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.maxLists, w.maxGets, w.listPrefixes = 0, 0, nil
}

// Answering is an HTTP endpoint on loopback that gives every request the same answer and counts
// them: a store that throttles for good, or that says the bucket is elsewhere.
type Answering struct {
	URL      string
	Requests atomic.Int64
}

// Answer starts an Answering endpoint until the test ends: status, with header's fields, and body
// (none to a HEAD).
func Answer(t testing.TB, status int, header http.Header, body string) *Answering {
	t.Helper()
	a := &Answering{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Requests.Add(1)
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, body)
		}
	}))
	t.Cleanup(hs.Close)
	a.URL = hs.URL
	return a
}

// ErrorXML is the body of an S3 error answer.
func ErrorXML(code, message string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>` + message + `</Message></Error>`
}
