package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/objstore"
)

// regionStore starts versitygw in eu-west-3 with bucket "far" holding two objects, and sets the
// environment of a loader configured for us-east-1 that reaches it at endpoint (the server's own,
// or a proxy's in front of it).
func regionStore(t *testing.T, endpoint func(srv *s3test.Server) string) (srv *s3test.Server, data []byte, etag string) {
	t.Helper()
	srv = s3test.StartIn(t, "eu-west-3")
	srv.CreateBucket(t, "far")
	data = pattern(200 << 10)
	etag = srv.Put(t, "far", "in/a.bin", data)
	srv.Put(t, "far", "in/b.bin", []byte("bee"))
	s3test.EnvFor(t, endpoint(srv), s3test.AccessKey, s3test.SecretKey) // AWS_REGION=us-east-1
	return srv, data, etag
}

// A bucket in another region than the one configured is followed there, as boto3 does: an
// S3-compatible store with a region of its own refuses a request signed for another with a 400
// AuthorizationHeaderMalformed that names its region, and the Store sends it again there.
func TestS3FollowsTheBucketToItsRegion(t *testing.T) {
	_, data, etag := regionStore(t, func(srv *s3test.Server) string { return srv.Endpoint })
	st := objstore.New()
	defer st.Close()
	ctx := context.Background()
	var listed []objstore.Object
	if err := st.Walk(ctx, mustParse(t, "s3://far/in/"), nil, func(o objstore.Object) error {
		listed = append(listed, o)
		return nil
	}); err != nil {
		t.Fatalf("list s3://far/in/ from us-east-1: %v", err)
	}
	if len(listed) != 2 || listed[0].Size != int64(len(data)) || listed[0].ETag != etag {
		t.Fatalf("listed %+v; want in/a.bin (%d bytes, %s) and in/b.bin", listed, len(data), etag)
	}
	openAndRead(t, st, listed[0], data)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	loc := mustParse(t, "s3://far/out/m.json")
	if _, err := st.Create(ctx, loc, []byte(`{"v":1}`)); err != nil {
		t.Fatalf("create in the followed bucket: %v", err)
	}
	if err := st.Delete(ctx, loc); err != nil {
		t.Fatalf("delete in the followed bucket: %v", err)
	}

	// a HEAD first, which the store refuses with a bare 400: a listing of the key finds the region
	st2 := objstore.New()
	defer st2.Close()
	statFar(t, st2, data, etag)
	if _, err := st2.Stat(ctx, mustParse(t, "s3://far/in/none.bin")); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("stat of a missing key in the followed bucket: %v; want ErrNotFound", err)
	}
}

// S3 itself answers a request sent to another region than its bucket's with a 301 that names the
// bucket's region in X-Amz-Bucket-Region (a HEAD gets no body to say more). A proxy answers so, in
// front of versitygw in eu-west-3, to every request not signed for eu-west-3. The first request of
// each kind is followed; after it, no request goes to the wrong region.
func TestS3FollowsAMovedPermanently(t *testing.T) {
	var moved, passed atomic.Int64
	scope := regexp.MustCompile(`Credential=[^/]+/[0-9]+/([a-z0-9-]+)/s3/`)
	_, data, etag := regionStore(t, func(srv *s3test.Server) string {
		target, _ := url.Parse(srv.Endpoint)
		proxy := httputil.NewSingleHostReverseProxy(target)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m := scope.FindStringSubmatch(r.Header.Get("Authorization")); m == nil || m[1] != srv.Region {
				moved.Add(1)
				w.Header().Set("X-Amz-Bucket-Region", srv.Region)
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusMovedPermanently)
				if r.Method != http.MethodHead {
					_, _ = io.WriteString(w, s3test.ErrorXML("PermanentRedirect", "The bucket you are attempting to access must be addressed using the specified endpoint."))
				}
				return
			}
			passed.Add(1)
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		return hs.URL
	})
	ctx := context.Background()

	// a HEAD first: the 301 carries the region and no body
	st := objstore.New()
	defer st.Close()
	obj := statFar(t, st, data, etag)
	if moved.Load() != 1 {
		t.Errorf("%d requests went to the wrong region; want 1 (the first)", moved.Load())
	}
	openAndRead(t, st, obj, data)
	if err := st.Walk(ctx, mustParse(t, "s3://far/in/"), nil, func(objstore.Object) error { return nil }); err != nil {
		t.Fatalf("list after the move: %v", err)
	}
	if moved.Load() != 1 || passed.Load() < 3 {
		t.Errorf("%d requests went to the wrong region and %d to the right one; want 1, and the rest (3 or more) to the right one", moved.Load(), passed.Load())
	}

	// a read first, with an Object known beforehand (a shard plan's): ranges fetched in parallel,
	// each of the first ones refused, and every byte read back
	moved.Store(0)
	st2 := objstore.New(objstore.WithRangeBytes(64<<10), objstore.WithParallelism(4))
	defer st2.Close()
	r, err := st2.Open(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	readsBack(t, r, data)
	if n := moved.Load(); n < 1 || n > 4 {
		t.Errorf("%d reads went to the wrong region; want 1 to 4 (the first ones, in parallel)", n)
	}
	moved.Store(0)
	readsBack(t, r, data) // the same Reader: its GETs go to the bucket's region now
	if n := moved.Load(); n != 0 {
		t.Errorf("%d reads went to the wrong region after the move; want none", n)
	}

	// a write first
	st3 := objstore.New()
	defer st3.Close()
	if _, err := st3.Create(ctx, mustParse(t, "s3://far/out/m.json"), []byte(`{"v":1}`)); err != nil {
		t.Fatalf("create from us-east-1: %v", err)
	}
}

// openAndRead opens obj and reads it back (readsBack).
func openAndRead(t *testing.T, st *objstore.Store, obj objstore.Object, want []byte) {
	t.Helper()
	r, err := st.Open(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	readsBack(t, r, want)
}

// statFar stats s3://far/in/a.bin (from us-east-1) and checks it holds data, version etag.
func statFar(t *testing.T, st *objstore.Store, data []byte, etag string) objstore.Object {
	t.Helper()
	obj, err := st.Stat(context.Background(), mustParse(t, "s3://far/in/a.bin"))
	if err != nil {
		t.Fatalf("stat from us-east-1: %v", err)
	}
	if obj.Size != int64(len(data)) || obj.ETag != etag {
		t.Fatalf("stat = %+v; want %d bytes, %s", obj, len(data), etag)
	}
	return obj
}

// readsBack reads r's object whole with one Prefetch (GETs of the Store's range size, in parallel)
// and compares it with want.
func readsBack(t *testing.T, r *objstore.Reader, want []byte) {
	t.Helper()
	ctx := context.Background()
	obj := r.Object()
	pf, err := r.Prefetch(ctx, []objstore.Range{{Off: 0, Len: obj.Size}}, 0)
	if err != nil {
		t.Fatalf("read %s: %v", obj.URL(), err)
	}
	defer pf.Release()
	got := make([]byte, obj.Size)
	if _, err := pf.ReadAt(got, 0); err != nil {
		t.Fatalf("read %s: %v", obj.URL(), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %s: the bytes differ from those written", obj.URL())
	}
}

// The S3 client follows a redirect only as the AWS SDK's own client does: a 307 or 308, never
// sending the session token on to another host (net/http drops only the Authorization header); a
// 301 or 302 with a Location is not followed.
func TestS3RedirectsKeepTheTokenHome(t *testing.T) {
	type seen struct{ requests, tokens, auths atomic.Int64 }
	var back seen
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		back.requests.Add(1)
		if r.Header.Get("X-Amz-Security-Token") != "" {
			back.tokens.Add(1)
		}
		if r.Header.Get("Authorization") != "" {
			back.auths.Add(1)
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer other.Close()
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusMovedPermanently, http.StatusFound} {
		back.requests.Store(0)
		back.tokens.Store(0)
		back.auths.Store(0)
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// another host name: net/http drops the Authorization header going there
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+r.URL.RequestURI(), code)
		}))
		s3test.EnvFor(t, front.URL, s3test.AccessKey, s3test.SecretKey)
		t.Setenv("AWS_SESSION_TOKEN", "a-session-token")
		st := objstore.New(objstore.WithMaxAttempts(1))
		_, err := st.Stat(context.Background(), mustParse(t, "s3://lake/x.parquet"))
		_ = st.Close()
		front.Close()
		if err == nil {
			t.Errorf("%d: stat succeeded; want an error", code)
		}
		followed := code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect
		switch {
		case followed && back.requests.Load() == 0:
			t.Errorf("%d: not followed; want it followed, as the AWS SDK's client does", code)
		case !followed && back.requests.Load() != 0:
			t.Errorf("%d: followed; want the answer taken as it is, as the AWS SDK's client does", code)
		}
		if back.tokens.Load() != 0 || back.auths.Load() != 0 {
			t.Errorf("%d: the other host got the session token %d times and the Authorization header %d times; want neither", code, back.tokens.Load(), back.auths.Load())
		}
	}
}

// A 400 that names the region the request went to is not a question of region: it is not sent
// again.
func TestS3BadRequestInItsOwnRegion(t *testing.T) {
	bad := s3test.Answer(t, http.StatusBadRequest, http.Header{"X-Amz-Bucket-Region": {"us-east-1"}}, "")
	s3test.EnvFor(t, bad.URL, s3test.AccessKey, s3test.SecretKey) // AWS_REGION=us-east-1
	st := objstore.New(objstore.WithMaxAttempts(1))
	defer st.Close()
	if _, err := st.Stat(context.Background(), mustParse(t, "s3://lake/x.parquet")); err == nil {
		t.Fatal("stat succeeded; want the 400")
	}
	if n := bad.Requests.Load(); n != 1 {
		t.Errorf("the store got %d requests; want 1 (nothing sent again, nothing asked)", n)
	}
}
