package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/proctest"
	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/internal/tcpproxy"
	"github.com/loaderproject/loader/objstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func mustParse(t *testing.T, u string) objstore.Location {
	t.Helper()
	l, err := objstore.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// newStore starts a server with bucket "data" and returns a store reaching it through the SDK's
// environment (AWS_ENDPOINT_URL_S3, a loopback IP: path-style by default).
func newStore(t *testing.T, opts ...objstore.Option) (*s3test.Server, *objstore.Store) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	st := objstore.New(opts...)
	t.Cleanup(func() { _ = st.Close() })
	return srv, st
}

func TestReadsCountRequestsAndMergeRanges(t *testing.T) {
	srv, st := newStore(t, objstore.WithRangeBytes(64<<10), objstore.WithParallelism(3))
	data := pattern(300 << 10)
	etag := srv.Put(t, "data", "dir/obj.bin", data)
	ctx := context.Background()

	obj, err := st.Stat(ctx, mustParse(t, "s3://data/dir/obj.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if obj.Size != int64(len(data)) || obj.ETag != etag {
		t.Fatalf("stat = %+v; want size %d, etag %s", obj, len(data), etag)
	}
	r, err := st.Open(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	req0, _ := st.Stats()
	tail, err := r.ReadTail(ctx, 1000)
	if err != nil || !bytes.Equal(tail, data[len(data)-1000:]) {
		t.Fatalf("ReadTail: %v, equal %v", err, bytes.Equal(tail, data[len(data)-1000:]))
	}
	// served from the tail: no request
	buf := make([]byte, 10)
	if _, err := r.ReadAt(buf, int64(len(data)-10)); err != nil || !bytes.Equal(buf, data[len(data)-10:]) {
		t.Fatalf("ReadAt in the tail: %v", err)
	}
	if req, _ := st.Stats(); req != req0+1 {
		t.Errorf("ReadTail + a read within it made %d requests; want 1", req-req0)
	}

	// Two adjacent ranges and one 100 KiB away: two merged ranges; the first spans 160 KiB, which
	// at 64 KiB a request is 3 GETs, the second 1.
	req0, bytes0 := st.Stats()
	pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 0, Len: 100 << 10}, {Off: 100 << 10, Len: 60 << 10}, {Off: 260 << 10, Len: 10}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	req, byt := st.Stats()
	if req-req0 != 4 || byt-bytes0 != 160<<10+10 {
		t.Errorf("prefetch made %d requests for %d bytes; want 4 for %d", req-req0, byt-bytes0, 160<<10+10)
	}
	for _, c := range []struct{ off, n int64 }{{0, 10}, {65530, 20}, {100 << 10, 60 << 10}, {260 << 10, 10}} {
		got := make([]byte, c.n)
		if _, err := pf.ReadAt(got, c.off); err != nil || !bytes.Equal(got, data[c.off:c.off+c.n]) {
			t.Errorf("prefetched ReadAt(%d, %d): %v, equal %v", c.off, c.n, err, bytes.Equal(got, data[c.off:c.off+c.n]))
		}
	}
	if req2, _ := st.Stats(); req2 != req {
		t.Errorf("reads within the prefetch made %d requests", req2-req)
	}
	// a read outside it is fetched
	got := make([]byte, 100)
	if _, err := pf.ReadAt(got, 200<<10); err != nil || !bytes.Equal(got, data[200<<10:200<<10+100]) {
		t.Errorf("ReadAt outside the prefetch: %v", err)
	}

	// Stream reads it all, in order, with one request.
	req0, _ = st.Stats()
	rd, err := r.Stream(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(rd)
	rd.Close()
	if err != nil || !bytes.Equal(all, data[1000:]) {
		t.Errorf("Stream: %v, %d bytes", err, len(all))
	}
	if req, _ := st.Stats(); req != req0+1 {
		t.Errorf("Stream made %d requests", req-req0)
	}
	// A stream closed early stops its read-ahead (goleak checks the goroutine is gone).
	rd, err = r.Stream(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	rd.Close()
}

// openObj puts data at key in bucket "data" and opens it.
func openObj(t *testing.T, srv *s3test.Server, st *objstore.Store, key string, data []byte) *objstore.Reader {
	t.Helper()
	srv.Put(t, "data", key, data)
	ctx := context.Background()
	obj, err := st.Stat(ctx, mustParse(t, "s3://data/"+key))
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Open(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Released prefetches and consumed streams give their buffers to later reads: a released
// Prefetched must not serve what its buffers hold next, and a stream must not give up a buffer
// before its bytes are read.
func TestReusedReadBuffers(t *testing.T) {
	srv, st := newStore(t, objstore.WithRangeBytes(16<<10), objstore.WithParallelism(2))
	const size = 64 << 10
	a := pattern(size)
	b := bytes.Repeat([]byte{0xEE}, size)
	ra := openObj(t, srv, st, "a", a)
	rb := openObj(t, srv, st, "b", b)
	ctx := context.Background()
	whole := []objstore.Range{{Off: 0, Len: size}}

	t.Run("released prefetch", func(t *testing.T) {
		pa, err := ra.Prefetch(ctx, whole, 0)
		if err != nil {
			t.Fatal(err)
		}
		pa.Release()
		pa.Release() // idempotent
		var others []*objstore.Prefetched
		for range 4 { // take the released buffers back (sync.Pool may drop some)
			pb, err := rb.Prefetch(ctx, whole, 0)
			if err != nil {
				t.Fatal(err)
			}
			others = append(others, pb)
		}
		req0, _ := st.Stats()
		got := make([]byte, 100)
		if _, err := pa.ReadAt(got, 1000); err != nil || !bytes.Equal(got, a[1000:1100]) {
			t.Errorf("ReadAt after Release: %v, got % x...; want the object's bytes", err, got[:8])
		}
		if req, _ := st.Stats(); req != req0+1 {
			t.Errorf("ReadAt after Release made %d requests; want 1 (the released bytes are not served)", req-req0)
		}
		for _, pb := range others {
			if _, err := pb.ReadAt(got, 1000); err != nil || !bytes.Equal(got, b[1000:1100]) {
				t.Errorf("a prefetch of b reads % x...: %v", got[:8], err)
			}
			pb.Release()
		}
	})

	t.Run("release during reads", func(t *testing.T) {
		// Readers of a prefetch of b race its Release and new prefetches of a that reuse its
		// buffers: every read must still see b's bytes (served from memory, or fetched).
		pb, err := rb.Prefetch(ctx, whole, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := range 4 {
			wg.Go(func() {
				got := make([]byte, 4<<10)
				for i := range 16 {
					off := int64((g*16 + i) * 997 % (size - len(got)))
					if _, err := pb.ReadAt(got, off); err != nil || !bytes.Equal(got, b[off:off+int64(len(got))]) {
						errs <- fmt.Sprintf("ReadAt(%d): %v, equal %v", off, err, bytes.Equal(got, b[off:off+int64(len(got))]))
						return
					}
				}
			})
		}
		wg.Go(func() {
			pb.Release()
			for range 4 {
				pa, err := ra.Prefetch(ctx, whole, 0)
				if err != nil {
					errs <- err.Error()
					return
				}
				pa.Release()
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("interleaved streams", func(t *testing.T) {
		// 100 bytes of a, then all of b (whose chunks may reuse a's consumed ones), then the rest
		// of a: a's bytes must be intact.
		sa, err := ra.Stream(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer sa.Close()
		head := make([]byte, 100)
		if _, err := io.ReadFull(sa, head); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			sb, err := rb.Stream(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			all, err := io.ReadAll(sb)
			sb.Close()
			if err != nil || !bytes.Equal(all, b) {
				t.Fatalf("stream of b: %v, equal %v", err, bytes.Equal(all, b))
			}
		}
		rest, err := io.ReadAll(sa)
		if err != nil || !bytes.Equal(append(head, rest...), a) {
			t.Errorf("stream of a read around one of b: %v, equal %v", err, bytes.Equal(append(head, rest...), a))
		}
		if _, err := sa.Read(head); err == nil {
			t.Error("Read at the end returned no error")
		}
	})

	t.Run("close during read", func(t *testing.T) {
		sa, err := ra.Stream(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, sa)
			done <- err
		}()
		sa.Close()
		<-done // io.Copy ends: at the object's end (nil), or with the closed stream's error
		if _, err := sa.Read(make([]byte, 10)); err == nil {
			t.Error("Read after Close returned no error")
		}
	})
}

// cutStore starts an S3 server with bucket "data" behind a TCP proxy, and a store reaching it
// through the proxy.
func cutStore(t *testing.T, opts ...objstore.Option) (*s3test.Server, *tcpproxy.Proxy, *objstore.Store) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	p, err := tcpproxy.New(strings.TrimPrefix(srv.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://"+p.Addr())
	st := objstore.New(opts...)
	t.Cleanup(func() { _ = st.Close() })
	return srv, p, st
}

// prefetchWhole prefetches all of r's object, which holds data, and checks the bytes (what names the
// fault the read met, for the messages).
func prefetchWhole(t *testing.T, ctx context.Context, r *objstore.Reader, data []byte, what string) {
	t.Helper()
	pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 0, Len: int64(len(data))}}, 0)
	if err != nil {
		t.Fatalf("Prefetch with %s: %v", what, err)
	}
	defer pf.Release()
	got := make([]byte, len(data))
	if _, err := pf.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Errorf("prefetched bytes with %s: %v, equal %v", what, err, bytes.Equal(got, data))
	}
}

// streamWhole streams r's object from off to its end, which should be want, and checks the bytes.
func streamWhole(t *testing.T, ctx context.Context, r *objstore.Reader, off int64, want []byte, what string) {
	t.Helper()
	rd, err := r.Stream(ctx, off)
	if err != nil {
		t.Fatalf("Stream with %s: %v", what, err)
	}
	all, err := io.ReadAll(rd)
	rd.Close()
	if err != nil || !bytes.Equal(all, want) {
		t.Errorf("stream with %s: %v, %d bytes, equal %v", what, err, len(all), bytes.Equal(all, want))
	}
}

// A response whose body breaks off (the connection is cut in the middle of it) is fetched on from
// where it stopped: a Prefetch and a Stream return the whole object, with one more GET each.
func TestBodyCutIsFetchedOn(t *testing.T) {
	srv, p, st := cutStore(t, objstore.WithRangeBytes(8<<20), objstore.WithParallelism(1), objstore.WithMaxBackoff(time.Millisecond))
	data := pattern(2 << 20)
	r := openObj(t, srv, st, "k", data)
	ctx := context.Background()

	req0, _ := st.Stats()
	p.CutBackAfter(300 << 10)
	prefetchWhole(t, ctx, r, data, "its body cut")
	req, _ := st.Stats()
	if p.Cuts() != 1 || st.Retries() != 1 || req-req0 != 2 {
		t.Errorf("%d cuts, %d retries, %d requests; want 1 cut, fetched on with 1 more GET (2 in all)", p.Cuts(), st.Retries(), req-req0)
	}

	p.CutBackAfter(700 << 10)
	streamWhole(t, ctx, r, 1000, data[1000:], "its body cut")
	if p.Cuts() != 2 || st.Retries() != 2 {
		t.Errorf("%d cuts, %d retries; want 2 and 2", p.Cuts(), st.Retries())
	}
}

// A response that stalls (the connection stays open and delivers nothing) is given up after the
// stall timeout: a stalled body is fetched on from where it stopped, stalled headers are retried
// by the SDK. A reader that holds off reading a stream longer than the timeout trips nothing.
func TestStalledResponses(t *testing.T) {
	srv, p, st := cutStore(t, objstore.WithRangeBytes(8<<20), objstore.WithParallelism(1),
		objstore.WithMaxBackoff(time.Millisecond), objstore.WithStallTimeout(500*time.Millisecond))
	data := pattern(2 << 20)
	r := openObj(t, srv, st, "k", data)
	// without the stall timeout, the reads below would wait forever: fail them instead
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	p.StallBackAfter(300 << 10)
	prefetchWhole(t, ctx, r, data, "its body stalled")
	if p.Stalls() != 1 || st.Retries() != 1 {
		t.Errorf("%d stalls, %d GETs fetched on; want 1 and 1", p.Stalls(), st.Retries())
	}

	p.StallBackAfter(700 << 10)
	streamWhole(t, ctx, r, 0, data, "its body stalled")
	if p.Stalls() != 2 || st.Retries() != 2 {
		t.Errorf("%d stalls, %d GETs fetched on; want 2 and 2", p.Stalls(), st.Retries())
	}

	// headers: the SDK's retry, not a fetch on
	p.StallBackAfter(1)
	pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 0, Len: 1000}}, 0)
	if err != nil {
		t.Fatalf("Prefetch with its headers stalled: %v", err)
	}
	pf.Release()
	if p.Stalls() != 3 || st.Retries() != 2 {
		t.Errorf("%d stalls, %d GETs fetched on; want 3 and still 2", p.Stalls(), st.Retries())
	}

	// a slow reader
	rd, err := r.Stream(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(rd, head); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // three stall timeouts
	rest, err := io.ReadAll(rd)
	if err != nil || !bytes.Equal(append(head, rest...), data) || st.Retries() != 2 {
		t.Errorf("stream read slowly: %v, equal %v, %d GETs fetched on; want the object and no fetch on", err, bytes.Equal(append(head, rest...), data), st.Retries())
	}
}

// Fetching on is conditional on the ETag read so far: an object rewritten between the cut and the
// next GET fails the read with ErrChanged rather than mixing two versions.
func TestBodyCutThenRewrittenFailsAsChanged(t *testing.T) {
	// 1.5 s of backoff before fetching on, exact (under 2 s the SDK's first backoff is its cap, with
	// no jitter), for the rewrite to land in
	srv, p, st := cutStore(t, objstore.WithParallelism(1), objstore.WithMaxBackoff(1500*time.Millisecond))
	data := pattern(2 << 20)
	ctx := context.Background()
	for _, how := range []string{"prefetch", "stream"} {
		t.Run(how, func(t *testing.T) {
			r := openObj(t, srv, st, how, data)
			p.CutBackAfter(300 << 10)
			cuts := p.Cuts()
			done := make(chan error, 1)
			go func() {
				if how == "prefetch" {
					pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 0, Len: int64(len(data))}}, 0)
					if err == nil {
						pf.Release()
					}
					done <- err
					return
				}
				rd, err := r.Stream(ctx, 0)
				if err == nil {
					_, err = io.ReadAll(rd)
					rd.Close()
				}
				done <- err
			}()
			for i := 0; p.Cuts() == cuts && i < 2000; i++ {
				time.Sleep(time.Millisecond)
			}
			if p.Cuts() == cuts {
				t.Fatal("the proxy never cut the response")
			}
			srv.Put(t, "data", how, bytes.Repeat([]byte{1}, len(data)))
			if err := <-done; !errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), "s3://data/"+how) {
				t.Errorf("read cut, then the object rewritten: %v; want ErrChanged naming s3://data/%s", err, how)
			}
		})
	}
}

// slowDown is a reverse proxy to an S3 server that answers the next fail ranged GETs with 503
// SlowDown, as S3 does when throttling.
type slowDown struct {
	fail, served atomic.Int64
	proxy        *httputil.ReverseProxy
}

func (h *slowDown) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.Header.Get("Range") != "" && h.fail.Add(-1) >= 0 {
		h.served.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		return
	}
	h.proxy.ServeHTTP(w, r)
}

// Throttling (503 SlowDown) is retried by the SDK's retryer, as configured: a read throttled fewer
// times than WithMaxAttempts succeeds; one throttled as many times fails with the provider's code
// and the URL, after exactly that many attempts.
func TestThrottlingRetriedAsConfigured(t *testing.T) {
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	h := &slowDown{proxy: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the request was signed for the proxy's host
	}}}
	hs := httptest.NewServer(h)
	defer hs.Close()
	t.Setenv("AWS_ENDPOINT_URL_S3", hs.URL)
	st := objstore.New(objstore.WithMaxAttempts(4), objstore.WithMaxBackoff(time.Millisecond))
	defer st.Close()
	data := pattern(100 << 10)
	r := openObj(t, srv, st, "k", data)

	// 4 attempts, not the SDK's default of 3
	h.fail.Store(3)
	got := make([]byte, 1000)
	if _, err := r.ReadAt(got, 5000); err != nil || !bytes.Equal(got, data[5000:6000]) {
		t.Errorf("ReadAt throttled 3 times of 4 attempts: %v, equal %v", err, bytes.Equal(got, data[5000:6000]))
	}
	if n := h.served.Load(); n != 3 {
		t.Errorf("served %d SlowDowns; want 3", n)
	}

	h.served.Store(0)
	h.fail.Store(10)
	_, err = r.ReadAt(got, 5000)
	var oe *objstore.Error
	if !errors.As(err, &oe) || oe.Code != "SlowDown" || !strings.Contains(err.Error(), "s3://data/k") {
		t.Errorf("ReadAt throttled every time: %v; want an *objstore.Error with code SlowDown naming s3://data/k", err)
	}
	if n := h.served.Load(); n != 4 {
		t.Errorf("throttled every time: %d attempts; want 4 (WithMaxAttempts)", n)
	}
}

// A GCS endpoint that answers 503 for good fails a request after WithMaxAttempts attempts (the GCS
// client's own default is to retry until the context ends), with the URL and the status.
func TestGCSThrottlingBounded(t *testing.T) {
	slow := s3test.Answer(t, http.StatusServiceUnavailable, http.Header{"Content-Type": {"application/json"}},
		`{"error":{"code":503,"message":"Please reduce your request rate."}}`)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(slow.URL, "http://"))
	st := objstore.New(objstore.WithMaxAttempts(3), objstore.WithMaxBackoff(time.Millisecond))
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a mutation fails, not hangs
	defer cancel()
	_, err := st.Stat(ctx, mustParse(t, "gs://data/k"))
	if err == nil || !strings.Contains(err.Error(), "gs://data/k") || !strings.Contains(err.Error(), "503") || ctx.Err() != nil {
		t.Errorf("Stat against an endpoint that always answers 503: %v; want a 503 naming gs://data/k before the deadline", err)
	}
	if n := slow.Requests.Load(); n != 3 {
		t.Errorf("%d attempts; want 3 (WithMaxAttempts)", n)
	}
}

func TestPrefetchCancelled(t *testing.T) {
	srv, st := newStore(t)
	srv.Put(t, "data", "k", pattern(1000))
	ctx, cancel := context.WithCancel(context.Background())
	obj, err := st.Stat(ctx, mustParse(t, "s3://data/k"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := st.Open(ctx, obj)
	cancel()
	if _, err := r.Prefetch(ctx, []objstore.Range{{Off: 0, Len: 10}}, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Prefetch on a cancelled context: %v; want context.Canceled", err)
	}
}

func TestErrorsNameURLAndCause(t *testing.T) {
	srv, st := newStore(t)
	srv.Put(t, "data", "there", []byte("x"))
	ctx := context.Background()
	_, err := st.Stat(ctx, mustParse(t, "s3://data/missing.parquet"))
	var oe *objstore.Error
	if !errors.Is(err, objstore.ErrNotFound) || !errors.As(err, &oe) || oe.URL != "s3://data/missing.parquet" {
		t.Errorf("missing key: %v; want ErrNotFound naming s3://data/missing.parquet", err)
	}
	_, err = st.Stat(ctx, mustParse(t, "s3://nobucket/k"))
	if !errors.Is(err, objstore.ErrNoSuchBucket) || !strings.Contains(err.Error(), "NoSuchBucket") || !strings.Contains(err.Error(), "s3://nobucket/k") {
		t.Errorf("missing bucket: %v; want ErrNoSuchBucket naming the URL and NoSuchBucket", err)
	}
	err = st.Walk(ctx, mustParse(t, "s3://nobucket/"), nil, func(objstore.Object) error { return nil })
	if !errors.Is(err, objstore.ErrNoSuchBucket) {
		t.Errorf("listing a missing bucket: %v; want ErrNoSuchBucket", err)
	}

	// Another account: AccessDenied, and its secret never shows.
	srv.AddUser(t, "otheruser", "othersecretvalue")
	srv.Env(t, "otheruser", "othersecretvalue")
	other := objstore.New()
	defer func() { _ = other.Close() }()
	_, err = other.Stat(ctx, mustParse(t, "s3://data/there"))
	if !errors.Is(err, objstore.ErrAccessDenied) || !strings.Contains(err.Error(), "AccessDenied") || !strings.Contains(err.Error(), "s3://data/there") {
		t.Errorf("another account's bucket: %v; want ErrAccessDenied naming the URL and AccessDenied", err)
	}
	if err != nil && (strings.Contains(err.Error(), "othersecretvalue") || strings.Contains(err.Error(), "otheruser")) {
		t.Errorf("error shows a credential: %v", err)
	}
}

func TestObjectChangedAfterListing(t *testing.T) {
	srv, st := newStore(t)
	srv.Put(t, "data", "k", pattern(5000))
	ctx := context.Background()
	obj, err := st.Stat(ctx, mustParse(t, "s3://data/k"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := st.Open(ctx, obj)
	if _, err := r.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	srv.Put(t, "data", "k", bytes.Repeat([]byte("z"), 5000)) // same size, other bytes
	if _, err := r.ReadAt(make([]byte, 10), 100); !errors.Is(err, objstore.ErrChanged) {
		t.Errorf("ReadAt of a rewritten object: %v; want ErrChanged", err)
	}
	if _, err := r.Stream(ctx, 0); !errors.Is(err, objstore.ErrChanged) {
		t.Errorf("Stream of a rewritten object: %v; want ErrChanged", err)
	}
}

func TestTruncatedObject(t *testing.T) {
	srv, st := newStore(t)
	srv.Put(t, "data", "k", pattern(100))
	ctx := context.Background()
	obj, err := st.Stat(ctx, mustParse(t, "s3://data/k"))
	if err != nil {
		t.Fatal(err)
	}
	obj.Size, obj.ETag = 200, "" // a listing that claims more than the store serves
	r, _ := st.Open(ctx, obj)
	if _, err := r.ReadAt(make([]byte, 50), 80); !errors.Is(err, objstore.ErrTruncated) {
		t.Errorf("reading past the served bytes: %v; want ErrTruncated", err)
	}
	rd, err := r.Stream(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if _, err := io.ReadAll(rd); !errors.Is(err, objstore.ErrTruncated) {
		t.Errorf("streaming a short body: %v; want ErrTruncated", err)
	}
}

func TestWalkOrderAndHiddenPrefixes(t *testing.T) {
	srv, st := newStore(t)
	for _, k := range []string{"t/b.parquet", "t/a.parquet", "t/_delta_log/0.json", "t/year=2024/x.csv", "t/year=2023/y.csv", "t/_SUCCESS"} {
		srv.Put(t, "data", k, []byte(k))
	}
	var got []string
	var asked []string
	err := st.Walk(context.Background(), mustParse(t, "s3://data/t/"), func(dir string) bool {
		asked = append(asked, dir)
		return !strings.Contains(dir, "_delta_log")
	}, func(o objstore.Object) error {
		got = append(got, o.Loc.Key)
		if o.ETag == "" || o.Size != int64(len(o.Loc.Key)) {
			t.Errorf("listed %+v without its ETag or size", o)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "[t/_SUCCESS t/a.parquet t/b.parquet t/year=2023/y.csv t/year=2024/x.csv]"
	if s := strings.Join(got, " "); "["+s+"]" != want {
		t.Errorf("walk = [%s]; want %s", s, want)
	}
	if len(asked) != 3 {
		t.Errorf("descend asked about %v; want the three prefixes", asked)
	}
}

func TestConditionalWrites(t *testing.T) {
	_, st := newStore(t)
	ctx := context.Background()
	loc := mustParse(t, "s3://data/manifest.json")
	// Two writers race to create: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = st.Create(ctx, loc, []byte{byte('a' + i)})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, objstore.ErrPrecondition):
			t.Errorf("losing Create: %v; want ErrPrecondition", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d Creates won; want exactly 1 (%v)", won, errs)
	}
	obj, err := st.Stat(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	etag2, err := st.Update(ctx, loc, []byte("v2"), obj.ETag)
	if err != nil {
		t.Fatalf("Update with the current ETag: %v", err)
	}
	if _, err := st.Update(ctx, loc, []byte("v3"), obj.ETag); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Update with a stale ETag: %v; want ErrPrecondition", err)
	}
	if _, err := st.Update(ctx, loc, []byte("v3"), etag2); err != nil {
		t.Errorf("Update with the new ETag: %v", err)
	}
}

// TestNoCredentials: with no credentials anywhere the AWS SDK looks (no variables, no profile files,
// no instance metadata), a request fails with ErrNoCredentials, naming the URL, where the SDK looks
// and why it found none.
func TestNoCredentials(t *testing.T) {
	srv, _ := newStore(t)
	srv.Put(t, "data", "there", []byte("x"))
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	st := objstore.New()
	defer func() { _ = st.Close() }()
	_, err := st.Stat(context.Background(), mustParse(t, "s3://data/there"))
	if !errors.Is(err, objstore.ErrNoCredentials) {
		t.Fatalf("Stat without credentials = %v; want ErrNoCredentials", err)
	}
	for _, want := range []string{"s3://data/there", "no usable credentials", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "anonymous=true", "IMDS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "get identity") {
		t.Errorf("error %q repeats the SDK's call chain", err)
	}
	// As the hint says, ?anonymous=true sends the request unsigned: this bucket is not public. (A
	// store opens a bucket once, with the parameters of the first URL that names it.)
	anon := objstore.New()
	defer func() { _ = anon.Close() }()
	_, err = anon.Stat(context.Background(), mustParse(t, "s3://data/there?anonymous=true"))
	if !errors.Is(err, objstore.ErrAccessDenied) {
		t.Errorf("Stat anonymously = %v; want ErrAccessDenied (an unsigned request to a private bucket)", err)
	}
}

// Without a region (no AWS_REGION, no profile, no ?region=) the requests start from us-east-1, as
// boto3's do, to be followed to the bucket's region (TestS3FollowsAMovedPermanently), rather than
// failing with the SDK's "Invalid region: region was not a valid DNS name". (Without credentials
// either, the request then fails for want of them: the SDK checks the region first.)
func TestS3WithoutARegion(t *testing.T) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	var logged bytes.Buffer
	st := objstore.New(objstore.WithLogger(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	defer st.Close()
	_, err := st.Stat(context.Background(), mustParse(t, "s3://lake/x.parquet"))
	if !errors.Is(err, objstore.ErrNoCredentials) || strings.Contains(err.Error(), "region") {
		t.Errorf("stat without a region or credentials: %v; want it to fail for want of credentials only", err)
	}
	if !strings.Contains(logged.String(), "starting from us-east-1") || !strings.Contains(logged.String(), "bucket=s3://lake") {
		t.Errorf("logged %q; want a line saying the bucket's requests start from us-east-1", logged.String())
	}
}

// A bucket that S3 still says is in another region once its requests went there (here, every
// request gets S3's 301 PermanentRedirect naming eu-west-3) fails naming the region to set.
func TestS3WrongRegion(t *testing.T) {
	moved := s3test.Answer(t, http.StatusMovedPermanently,
		http.Header{"Content-Type": {"application/xml"}, "X-Amz-Bucket-Region": {"eu-west-3"}},
		s3test.ErrorXML("PermanentRedirect", "The bucket you are attempting to access must be addressed using the specified endpoint."))
	s3test.EnvFor(t, moved.URL, s3test.AccessKey, s3test.SecretKey)
	st := objstore.New(objstore.WithMaxBackoff(time.Millisecond))
	defer st.Close()
	ctx := context.Background()
	_, serr := st.Stat(ctx, mustParse(t, "s3://lake/x.parquet"))
	werr := st.Walk(ctx, mustParse(t, "s3://lake/events/"), nil, func(objstore.Object) error { return nil })
	for _, err := range []error{serr, werr} {
		if err == nil || !strings.Contains(err.Error(), "s3://lake") || !strings.Contains(err.Error(), "AWS_REGION=eu-west-3") {
			t.Errorf("a bucket in another region: %v; want an error naming the bucket and its region", err)
		}
	}
}

// A store that cannot be reached fails in one line that says so, with the attempts made and the
// connection's error, not the SDK's chain of wrappers; the chain is still there to unwrap.
func TestUnreachableStore(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)) // nothing listens there
	s3test.EnvFor(t, "http://"+addr, s3test.AccessKey, s3test.SecretKey)
	st := objstore.New(objstore.WithMaxAttempts(2), objstore.WithMaxBackoff(time.Millisecond))
	defer st.Close()
	_, err := st.Stat(context.Background(), mustParse(t, "s3://lake/x.parquet"))
	var ne *net.OpError
	if err == nil || !errors.As(err, &ne) {
		t.Fatalf("stat of an unreachable store: %v; want a *net.OpError in the chain", err)
	}
	want := "s3://lake/x.parquet: stat: cannot reach the store (2 attempts): dial tcp " + addr + ": connect: connection refused"
	if err.Error() != want {
		t.Errorf("stat of an unreachable store: %q; want %q", err, want)
	}
}
