package remote

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/objstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var file = manifest.FileID{Path: "s3://data/a.parquet", Size: 100, ETag: "e1", Schema: "s"}

func newStore(t *testing.T) (*s3test.Server, *objstore.Store, objstore.Location) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "state")
	st := objstore.New()
	t.Cleanup(func() { st.Close() })
	loc, err := objstore.Parse("s3://state/manifests")
	if err != nil {
		t.Fatal(err)
	}
	return srv, st, loc
}

func fast() Options {
	return Options{Heartbeat: 50 * time.Millisecond, StaleAfter: 400 * time.Millisecond}
}

// abandon stops the heartbeat and leaves the lock and the objects as a kill -9 would.
func (m *Manifest) abandon() {
	m.r.mu.Lock()
	m.r.released = true
	m.r.mu.Unlock()
	close(m.r.done)
	m.r.stopped.Wait()
}

func keys(t *testing.T, st *objstore.Store, loc objstore.Location) []string {
	t.Helper()
	var out []string
	err := st.Walk(context.Background(), loc, func(string) bool { return true }, func(o objstore.Object) error {
		out = append(out, strings.TrimPrefix(o.Loc.Key, loc.Key))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Records synced in one run are there in the next; the bucket then holds one base and no lock.
func TestRoundTrip(t *testing.T) {
	_, st, loc := newStore(t)
	ctx := context.Background()
	m, err := Open(ctx, st, loc, "t.jsonl", fast())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		r := manifest.Range{From: int64(i * 20), To: int64(i*20 + 20)}
		if err := m.Intent(file, 0, r); err != nil {
			t.Fatal(err)
		}
		if err := m.Sync(); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if err := m.Ack(file, 0, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m, err = Open(ctx, st, loc, "t.jsonl", fast())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Acked(file, 0); len(got) != 1 || got[0] != (manifest.Range{From: 0, To: 80}) {
		t.Errorf("acked after reopen = %v; want [0,80)", got)
	}
	if got := m.Pending(file, 0); len(got) != 1 || got[0] != (manifest.Range{From: 80, To: 100}) {
		t.Errorf("pending after reopen = %v; want [80,100): sent, never acknowledged", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	got := keys(t, st, loc)
	if len(got) != 1 || !strings.HasPrefix(got[0], "/t.jsonl/0") {
		t.Errorf("objects after a clean close = %v; want one base, no segments and no lock", got)
	}
	data, err := Fetch(ctx, st, loc, "t.jsonl")
	if err != nil || len(data) == 0 {
		t.Fatalf("Fetch = %d bytes, %v", len(data), err)
	}
}

// A second loader on a live manifest fails on the lock; after the holder dies (no heartbeat), the
// next run takes the lock over and finds every synced record; the dead holder's next Sync fails.
func TestLockLiveDeadAndFenced(t *testing.T) {
	_, st, loc := newStore(t)
	ctx := context.Background()
	a, err := Open(ctx, st, loc, "t.jsonl", fast())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ack(file, 0, manifest.Range{From: 0, To: 10}); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, st, loc, "t.jsonl", fast()); !errors.Is(err, manifest.ErrLocked) {
		t.Fatalf("second Open on a live manifest = %v; want ErrLocked", err)
	}

	a.abandon() // as if killed: the lock stays, no heartbeat
	b, err := Open(ctx, st, loc, "t.jsonl", fast())
	if err != nil {
		t.Fatalf("Open after the holder died = %v; want the lock taken over", err)
	}
	defer b.Close()
	if got := b.Acked(file, 0); len(got) != 1 || got[0] != (manifest.Range{From: 0, To: 10}) {
		t.Errorf("acked seen by the new holder = %v; want [0,10)", got)
	}
	// The old holder, still running somehow, cannot extend the manifest beside the new one.
	if err := a.Ack(file, 0, manifest.Range{From: 10, To: 20}); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); !errors.Is(err, manifest.ErrLocked) {
		t.Fatalf("the old holder's Sync = %v; want ErrLocked", err)
	}
	a.Manifest.Close()
}

// A missing segment is corruption, named, never a silently shorter manifest.
func TestGapIsCorrupt(t *testing.T) {
	_, st, loc := newStore(t)
	ctx := context.Background()
	m, err := Open(ctx, st, loc, "t.jsonl", fast())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := m.Ack(file, 0, manifest.Range{From: int64(i), To: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
		if err := m.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	m.abandon()
	m.Manifest.Close()
	var seg string
	for _, k := range keys(t, st, loc) {
		if !strings.HasSuffix(k, "lock") && !strings.HasSuffix(k, "0001") {
			seg = k // the last; delete the first instead below
			break
		}
	}
	if seg == "" {
		t.Fatal("no segment written")
	}
	if err := st.Delete(ctx, loc.Child(loc.Key+seg)); err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(ctx, st, loc, "t.jsonl")
	if !errors.Is(err, manifest.ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Fetch with a segment gone = %v; want ErrCorrupt naming the missing object", err)
	}
}

// A cancelled context fails Open at once.
func TestOpenCancelled(t *testing.T) {
	_, st, loc := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, st, loc, "t.jsonl", fast()); err == nil {
		t.Fatal("Open with a cancelled context succeeded")
	}
}

// loseAnswers forwards requests to the store, but answers the first PUT of each object whose name
// match accepts with 500 after forwarding it (the object is written, the loader does not know),
// and the next `more` PUTs of it with 500 without forwarding them.
type loseAnswers struct {
	proxy *httputil.ReverseProxy
	match func(name string) bool
	armed atomic.Bool
	more  int
	mu    sync.Mutex
	seen  map[string]int
}

func isSegment(name string) bool { return strings.Trim(name, "0123456789") == "" }

func (h *loseAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	base := path.Base(r.URL.Path)
	if r.Method != http.MethodPut || !h.armed.Load() || !h.match(base) {
		h.proxy.ServeHTTP(w, r)
		return
	}
	h.mu.Lock()
	n := h.seen[base]
	h.seen[base]++
	h.mu.Unlock()
	switch {
	case n == 0:
		rec := httptest.NewRecorder()
		h.proxy.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			w.WriteHeader(rec.Code) // the store refused it: pass that on
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	case n <= h.more:
		w.WriteHeader(http.StatusInternalServerError)
	default:
		h.proxy.ServeHTTP(w, r)
	}
}

// A segment whose PUT landed but whose answer was lost is the loader's own, not another loader's:
// whether the SDK's retry then meets the If-None-Match (412) or every retry fails too (500), Sync
// succeeds once the object holds exactly its bytes, and the next Open finds the records.
func TestLostAnswerOfALandedWrite(t *testing.T) {
	for _, c := range []struct {
		name string
		more int
	}{{"the retry meets the condition", 0}, {"every retry fails", 10}} {
		t.Run(c.name, func(t *testing.T) {
			srv, _, loc := newStore(t)
			target, err := url.Parse(srv.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			h := &loseAnswers{match: isSegment, more: c.more, seen: map[string]int{}, proxy: proxyTo(target)}
			hs := httptest.NewServer(h)
			defer hs.Close()
			t.Setenv("AWS_ENDPOINT_URL_S3", hs.URL)
			st := objstore.New(objstore.WithMaxBackoff(time.Millisecond))
			defer st.Close()
			ctx := context.Background()
			m, err := Open(ctx, st, loc, "t.jsonl", fast())
			if err != nil {
				t.Fatal(err)
			}
			h.armed.Store(true)
			r := manifest.Range{From: 0, To: 50}
			if err := m.Intent(file, 0, r); err != nil {
				t.Fatal(err)
			}
			if err := m.Sync(); err != nil {
				t.Fatalf("Sync whose segment landed with its answer lost: %v", err)
			}
			if err := m.Ack(file, 0, r); err != nil {
				t.Fatal(err)
			}
			if err := m.Sync(); err != nil {
				t.Fatal(err)
			}
			h.armed.Store(false)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			lost := len(h.seen)
			h.mu.Unlock()
			if lost < 2 {
				t.Errorf("%d segments had their answers lost; want both Syncs'", lost)
			}
			m, err = Open(ctx, st, loc, "t.jsonl", fast())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.Acked(file, 0); len(got) != 1 || got[0] != r {
				t.Errorf("acked after reopen = %v; want %v", got, r)
			}
		})
	}
}

func proxyTo(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // signed for the proxy's host
	}}
}

// A lock whose create landed but whose answer was lost (the SDK's retry then meets the lock,
// If-None-Match) is the loader's own: Open takes it at once, rather than waiting StaleAfter to see
// whether "another" loader is alive.
func TestLostAnswerOfTheLock(t *testing.T) {
	srv, _, loc := newStore(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	h := &loseAnswers{match: func(name string) bool { return name == lockName }, seen: map[string]int{}, proxy: proxyTo(target)}
	h.armed.Store(true)
	hs := httptest.NewServer(h)
	defer hs.Close()
	t.Setenv("AWS_ENDPOINT_URL_S3", hs.URL)
	st := objstore.New(objstore.WithMaxBackoff(time.Millisecond))
	defer st.Close()
	o := fast()
	o.StaleAfter = time.Minute // a wait for "another" holder would outlast the test's check
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := Open(ctx, st, loc, "t.jsonl", o)
	if err != nil {
		t.Fatalf("Open whose lock create landed with its answer lost: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Open took %s: it waited on its own lock", d)
	}
	h.armed.Store(false)
	h.mu.Lock()
	puts := h.seen[lockName]
	h.mu.Unlock()
	if puts < 1 {
		t.Errorf("no PUT of the lock went through the proxy; want its create's answer lost")
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
