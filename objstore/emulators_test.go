package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loaderproject/loader/internal/azuritetest"
	"github.com/loaderproject/loader/internal/gcstest"
	"github.com/loaderproject/loader/internal/proctest"
	"github.com/loaderproject/loader/internal/tcpproxy"
	"github.com/loaderproject/loader/objstore"
)

// startFakeGCS runs fake-gcs-server with bucket "data" holding files (gcstest).
func startFakeGCS(t *testing.T, files map[string][]byte) { gcstest.Start(t, files) }

func TestGCSEmulator(t *testing.T) {
	data := pattern(200 << 10)
	startFakeGCS(t, map[string][]byte{"t/a.bin": data, "t/_SUCCESS": nil, "t/year=2024/b.bin": []byte("bee")})
	st := objstore.New()
	defer func() { _ = st.Close() }()
	ctx := context.Background()
	var keys []string
	err := st.Walk(ctx, mustParse(t, "gs://data/t/"), nil, func(o objstore.Object) error {
		keys = append(keys, o.Loc.Key)
		if o.ETag == "" {
			t.Errorf("%s listed without a generation", o.URL())
		}
		return nil
	})
	if err != nil || strings.Join(keys, " ") != "t/_SUCCESS t/a.bin t/year=2024/b.bin" {
		t.Fatalf("walk: %v, %v", keys, err)
	}
	obj, err := st.Stat(ctx, mustParse(t, "gs://data/t/a.bin"))
	if err != nil || obj.Size != int64(len(data)) || !strings.HasPrefix(obj.ETag, "g") {
		t.Fatalf("stat: %+v, %v", obj, err)
	}
	r, _ := st.Open(ctx, obj)
	tail, err := r.ReadTail(ctx, 100)
	if err != nil || !bytes.Equal(tail, data[len(data)-100:]) {
		t.Errorf("tail: %v", err)
	}
	pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 10, Len: 1000}, {Off: 1010, Len: 10}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1010)
	if _, err := pf.ReadAt(got, 10); err != nil || !bytes.Equal(got, data[10:1020]) {
		t.Errorf("prefetched read: %v", err)
	}
	if _, err := st.Stat(ctx, mustParse(t, "gs://data/t/missing")); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("missing object: %v; want ErrNotFound", err)
	}
	// Conditional writes (generation match), and a read of the old generation after a rewrite.
	if _, err := st.Create(ctx, obj.Loc, []byte("x")); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Create over an object: %v; want ErrPrecondition", err)
	}
	if _, err := st.Update(ctx, obj.Loc, []byte("new"), obj.ETag); err != nil {
		t.Fatalf("Update with the current generation: %v", err)
	}
	if _, err := st.Update(ctx, obj.Loc, []byte("newer"), obj.ETag); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Update with a stale generation: %v; want ErrPrecondition", err)
	}
	if _, err := r.ReadAt(make([]byte, 10), 0); !errors.Is(err, objstore.ErrChanged) {
		t.Errorf("reading the old generation: %v; want ErrChanged", err)
	}
}

// TestAzureEmulator runs the Store against Azurite (`make test-emulators` installs it): paged and
// hierarchical listing with ETags, ranged and suffix reads, conditional writes (create once, update
// with the current ETag only), reads of a rewritten blob, and a missing container or blob named as
// such.
func TestAzureEmulator(t *testing.T) {
	srv := azuritetest.Start(t)
	srv.Env(t)
	srv.CreateContainer(t, "data")
	data := pattern(300 << 10)
	for _, k := range []string{"t/a.bin", "t/b.bin", "t/c.bin", "t/_SUCCESS", "t/year=2024/d.bin", "t/.hidden/e.bin", "u/f.bin"} {
		srv.Put(t, "data", k, data[:len(k)])
	}
	srv.Put(t, "data", "t/big.bin", data)
	// Each URL names the emulator: gocloud's azureblob reads the environment (which has the
	// credentials) once per process, and a repeated run of this test (-count) has an emulator of its own.
	az := func(u string) objstore.Location { return mustParse(t, u+"?domain="+srv.Host) }
	st := objstore.New(objstore.WithListPageSize(2), objstore.WithRangeBytes(64<<10))
	defer func() { _ = st.Close() }()
	ctx := context.Background()

	// Listing: lexical order, paged, hidden prefixes not descended into, every blob with its ETag.
	req0, _ := st.Stats()
	var keys []string
	err := st.Walk(ctx, az("azblob://data/t/"), func(dir string) bool { return !strings.Contains(dir, "/.") },
		func(o objstore.Object) error {
			keys = append(keys, o.Loc.Key)
			if o.ETag == "" || o.Size <= 0 && !strings.HasSuffix(o.Loc.Key, "_SUCCESS") {
				t.Errorf("%s listed with ETag %q, size %d", o.URL(), o.ETag, o.Size)
			}
			return nil
		})
	if err != nil || strings.Join(keys, " ") != "t/_SUCCESS t/a.bin t/b.bin t/big.bin t/c.bin t/year=2024/d.bin" {
		t.Fatalf("walk: %v, %v", keys, err)
	}
	if req, _ := st.Stats(); req-req0 < 4 {
		t.Errorf("walk made %d list requests in pages of 2; want at least 4", req-req0)
	}
	obj, err := st.Stat(ctx, az("azblob://data/t/big.bin"))
	if err != nil || obj.Size != int64(len(data)) || obj.ETag != srv.ETag(t, "data", "t/big.bin") {
		t.Fatalf("stat: %+v, %v; want size %d and ETag %s", obj, err, len(data), srv.ETag(t, "data", "t/big.bin"))
	}

	// Reads: the tail in one request, ranges merged and split at the range size, a stream.
	r, err := st.Open(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	req0, bytes0 := st.Stats()
	tail, err := r.ReadTail(ctx, 1000)
	if err != nil || !bytes.Equal(tail, data[len(data)-1000:]) {
		t.Fatalf("tail: %v", err)
	}
	pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 10, Len: 100 << 10}, {Off: 10 + 100<<10, Len: 10}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100<<10+10)
	if _, err := pf.ReadAt(got, 10); err != nil || !bytes.Equal(got, data[10:10+len(got)]) {
		t.Errorf("prefetched read: %v", err)
	}
	if req, byt := st.Stats(); req-req0 != 3 || byt-bytes0 != 1000+int64(len(got)) {
		t.Errorf("a tail and a prefetch of 100 KiB in 64 KiB parts: %d requests, %d bytes; want 3 and %d", req-req0, byt-bytes0, 1000+len(got))
	}
	rd, err := r.Stream(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(rd)
	_ = rd.Close()
	if err != nil || !bytes.Equal(all, data[5:]) {
		t.Errorf("stream: %d bytes, %v", len(all), err)
	}

	// Missing blob, missing container.
	if _, err := st.Stat(ctx, az("azblob://data/t/missing")); !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), "azblob://data/t/missing") {
		t.Errorf("missing blob: %v; want ErrNotFound naming it", err)
	}
	if _, err := r.ReadAt(make([]byte, 1), 0); err != nil {
		t.Errorf("read of the listed version: %v", err)
	}
	gone, _ := st.Open(ctx, objstore.Object{Loc: az("azblob://data/t/gone.bin"), Size: 10, ETag: obj.ETag})
	if _, err := gone.ReadAt(make([]byte, 5), 0); !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), "BlobNotFound") {
		t.Errorf("reading a missing blob: %v; want ErrNotFound and BlobNotFound", err)
	}
	err = st.Walk(ctx, az("azblob://nocontainer/x/"), nil, func(objstore.Object) error { return nil })
	if !errors.Is(err, objstore.ErrNoSuchBucket) || !strings.Contains(err.Error(), "ContainerNotFound") {
		t.Errorf("listing a missing container: %v; want ErrNoSuchBucket and ContainerNotFound", err)
	}
	if _, err := st.Stat(ctx, az("azblob://nocontainer/x")); !errors.Is(err, objstore.ErrNoSuchBucket) {
		t.Errorf("stat in a missing container: %v; want ErrNoSuchBucket", err)
	}

	// Conditional writes, as the bucket manifest uses them.
	loc := az("azblob://data/m/lock")
	etag, err := st.Create(ctx, loc, []byte("one"))
	if err != nil || etag == "" {
		t.Fatalf("Create: %q, %v", etag, err)
	}
	if _, err := st.Create(ctx, loc, []byte("two")); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Create over a blob: %v; want ErrPrecondition", err)
	}
	etag2, err := st.Update(ctx, loc, []byte("three"), etag)
	if err != nil || etag2 == etag {
		t.Fatalf("Update with the current ETag: %q, %v", etag2, err)
	}
	if _, err := st.Update(ctx, loc, []byte("four"), etag); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Update with a stale ETag: %v; want ErrPrecondition", err)
	}
	cur, err := st.Stat(ctx, loc)
	if err != nil || cur.ETag != etag2 {
		t.Errorf("after the lost update: ETag %q, %v; want %q", cur.ETag, err, etag2)
	}

	// A blob rewritten after it was listed fails its reads, never mixing versions.
	srv.Put(t, "data", "t/big.bin", []byte("rewritten"))
	if _, err := r.ReadAt(make([]byte, 10), 100); !errors.Is(err, objstore.ErrChanged) {
		t.Errorf("reading the old version: %v; want ErrChanged", err)
	}
	if _, err := r.Stream(ctx, 0); !errors.Is(err, objstore.ErrChanged) {
		t.Errorf("streaming the old version: %v; want ErrChanged", err)
	}
}

// emulator starts an emulator holding data as object "k" of bucket "data" behind a proxy, and
// returns the proxy and the object's URL through it.
type emulator struct {
	name  string
	start func(t *testing.T) (*tcpproxy.Proxy, string)
}

// proxiedEmulators are fake-gcs-server and Azurite, each behind a proxy, holding data.
func proxiedEmulators(data []byte) []emulator {
	return []emulator{
		{"gcs", func(t *testing.T) (*tcpproxy.Proxy, string) {
			// fake-gcs-server routes by the host a client uses: start it knowing the proxy's
			port := proctest.FreePort(t)
			p := newProxy(t, fmt.Sprintf("127.0.0.1:%d", port))
			gcstest.StartOn(t, map[string][]byte{"k": data}, port, p.Addr())
			return p, "gs://data/k"
		}},
		{"azure", func(t *testing.T) (*tcpproxy.Proxy, string) {
			srv := azuritetest.Start(t)
			srv.Env(t)
			srv.CreateContainer(t, "data")
			srv.Put(t, "data", "k", data)
			p := newProxy(t, srv.Host)
			// gocloud reads the AZURE_STORAGE_* variables once per process (TestAzureEmulator's
			// emulator, by now): name the proxy in the URL instead
			return p, "azblob://data/k?domain=" + p.Addr()
		}},
	}
}

// A body cut in the middle of a download from GCS or Azure is fetched on too (through a proxy in
// front of each emulator): a Prefetch and a Stream return the whole object.
func TestEmulatorBodyCut(t *testing.T) {
	data := pattern(2 << 20)
	for _, c := range proxiedEmulators(data) {
		t.Run(c.name, func(t *testing.T) {
			p, u := c.start(t)
			st := objstore.New(objstore.WithRangeBytes(8<<20), objstore.WithMaxBackoff(time.Millisecond))
			defer func() { _ = st.Close() }()
			ctx := context.Background()
			obj, err := st.Stat(ctx, mustParse(t, u))
			if err != nil {
				t.Fatal(err)
			}
			r, _ := st.Open(ctx, obj)
			p.CutBackAfter(300 << 10)
			prefetchWhole(t, ctx, r, data, "its body cut")
			p.CutBackAfter(700 << 10)
			streamWhole(t, ctx, r, 0, data, "its body cut")
			if p.Cuts() != 2 {
				t.Errorf("%d cuts; want 2", p.Cuts())
			}
			t.Logf("%d GETs fetched on (the SDK's own retries not counted)", st.Retries())
		})
	}
}

// A GCS or Azure response that stalls before its headers (their clients bring their own transports,
// with no timeout of their own) is given up after the stall timeout and asked again: a Prefetch and
// a Stream return the whole object.
func TestEmulatorStalledHeaders(t *testing.T) {
	data := pattern(1 << 20)
	for _, c := range proxiedEmulators(data) {
		t.Run(c.name, func(t *testing.T) {
			p, u := c.start(t)
			st := objstore.New(objstore.WithMaxBackoff(time.Millisecond), objstore.WithStallTimeout(500*time.Millisecond))
			defer func() { _ = st.Close() }()
			// without the stall timeout the reads below would wait forever: fail them instead
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			obj, err := st.Stat(ctx, mustParse(t, u))
			if err != nil {
				t.Fatal(err)
			}
			r, _ := st.Open(ctx, obj)
			p.StallBackAfter(1)
			prefetchWhole(t, ctx, r, data, "its headers stalled")
			if p.Stalls() != 1 || st.Retries() != 1 {
				t.Errorf("%d stalls, %d GETs asked again; want 1 and 1", p.Stalls(), st.Retries())
			}
			p.StallBackAfter(1)
			streamWhole(t, ctx, r, 0, data, "its headers stalled")
			if p.Stalls() != 2 || st.Retries() != 2 {
				t.Errorf("%d stalls, %d GETs asked again; want 2 and 2", p.Stalls(), st.Retries())
			}
			// metadata: a stat and a listing
			p.StallBackAfter(1)
			if o, err := st.Stat(ctx, obj.Loc); err != nil || o.Size != obj.Size || p.Stalls() != 3 {
				t.Errorf("stat with its response stalled: %+v, %v, %d stalls; want the object after the 3rd", o, err, p.Stalls())
			}
			p.StallBackAfter(1)
			var keys []string
			err = st.Walk(ctx, mustParse(t, strings.Replace(u, "/k", "/", 1)), nil, func(o objstore.Object) error {
				keys = append(keys, o.Loc.Key)
				return nil
			})
			if err != nil || strings.Join(keys, " ") != "k" || p.Stalls() != 4 {
				t.Errorf("listing with its response stalled: %v, %v, %d stalls; want [k] after the 4th", keys, err, p.Stalls())
			}
			// a write is not asked again (it may have landed): it fails, naming the object, instead of waiting
			p.StallBackAfter(1)
			newLoc := mustParse(t, strings.Replace(u, "/k", "/new", 1))
			start := time.Now()
			_, err = st.Create(ctx, newLoc, []byte("x"))
			if err == nil || !strings.Contains(err.Error(), "stalled") || !strings.Contains(err.Error(), "data/new") || ctx.Err() != nil {
				t.Errorf("create with its response stalled: %v after %s; want a stall naming the object, well before the test's deadline", err, time.Since(start))
			}
		})
	}
}

// The Azure SDK takes the store's retry policy per call: WithMaxAttempts tries of a request
// answered 503 (its own default is 4), and a stat whose response stalls is tried again after the
// stall timeout rather than waited on.
func TestEmulatorAzureRetriesAsConfigured(t *testing.T) {
	srv := azuritetest.Start(t)
	srv.Env(t)
	srv.CreateContainer(t, "data")
	srv.Put(t, "data", "k", []byte("hello"))
	target, err := url.Parse("http://" + srv.Host)
	if err != nil {
		t.Fatal(err)
	}
	var fail, served atomic.Int64
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Add(-1) >= 0 {
			served.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := objstore.New(objstore.WithMaxAttempts(2), objstore.WithMaxBackoff(time.Millisecond))
	defer func() { _ = st.Close() }()
	loc := mustParse(t, "azblob://data/k?domain="+strings.TrimPrefix(hs.URL, "http://"))
	fail.Store(1)
	if o, err := st.Stat(ctx, loc); err != nil || o.Size != 5 || served.Load() != 1 {
		t.Errorf("stat answered 503 once of 2 tries: %+v, %v, %d 503s; want the object after one", o, err, served.Load())
	}
	served.Store(0)
	fail.Store(10)
	if _, err := st.Stat(ctx, loc); err == nil || !strings.Contains(err.Error(), "503") || served.Load() != 2 {
		t.Errorf("stat answered 503 every time: %v after %d tries; want a 503 after 2 (WithMaxAttempts, not the SDK's 4)", err, served.Load())
	}
	fail.Store(0)

	p := newProxy(t, srv.Host)
	st2 := objstore.New(objstore.WithMaxBackoff(time.Millisecond), objstore.WithStallTimeout(500*time.Millisecond))
	defer func() { _ = st2.Close() }()
	p.StallBackAfter(1)
	if o, err := st2.Stat(ctx, mustParse(t, "azblob://data/k?domain="+p.Addr())); err != nil || o.Size != 5 || p.Stalls() != 1 {
		t.Errorf("stat whose response stalled: %+v, %v, %d stalls; want the object after 1 stall", o, err, p.Stalls())
	}
}

func newProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
