package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/googleapis/gax-go/v2"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers azblob:// on blob.DefaultURLMux
	"gocloud.dev/blob/gcsblob"     // registers gs:// on blob.DefaultURLMux
	"gocloud.dev/blob/s3blob"

	gcaws "gocloud.dev/aws"
	"gocloud.dev/gcp"

	"github.com/loaderproject/loader/internal/bufpool"
)

// The defaults of WithMaxAttempts and WithStallTimeout.
const (
	DefaultMaxAttempts  = 5
	DefaultStallTimeout = 60 * time.Second
)

// Option configures a Store.
type Option func(*options)

type options struct {
	maxAttempts int
	maxBackoff  time.Duration
	stall       time.Duration
	parallel    int
	rangeBytes  int64
	listPage    int
	logger      *slog.Logger
}

// WithMaxAttempts sets how many times the SDK's retryer tries a request that fails transiently (5xx,
// throttling, a reset connection) before giving up. Default 5; values below 1 mean the default.
// (The GCS client would otherwise retry until the context ends; the Azure SDK takes it per call,
// see sdkCtx.) It is also how many times in a row a read (any store) fetches on after the
// response's body broke off without a byte more.
func WithMaxAttempts(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxAttempts = n
		}
	}
}

// WithMaxBackoff caps the SDK retryer's backoff between attempts and between fetches on after a
// body broke off. Default 5s; values below 1 mean the default.
func WithMaxBackoff(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.maxBackoff = d
		}
	}
}

// WithStallTimeout sets how long a request waits for a response's headers or for the next bytes of
// its body before it gives the connection up, so a hung server or a dead path costs a retry, not a
// hung load. A read is then tried again (S3: by the SDK's retryer; GCS and Azure: by the Reader and
// the Stream), and a body fetched on from where it stopped, as after a cut connection; a stat, list
// or delete is tried again; a write, which may have landed, fails once it has taken the timeout
// plus a second per MiB. Default 60s; values below 1 mean the default.
func WithStallTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.stall = d
		}
	}
}

// WithParallelism sets how many ranged GETs one Prefetch runs at once. Default 8; values below 1
// mean the default.
func WithParallelism(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.parallel = n
		}
	}
}

// WithRangeBytes sets the largest range one GET of Prefetch asks for: longer ranges are split so
// their parts download in parallel. Default 8 MiB; values below 64 KiB are raised to 64 KiB.
func WithRangeBytes(n int64) Option {
	return func(o *options) { o.rangeBytes = max(n, 64<<10) }
}

// WithListPageSize sets how many entries one list request asks for. Default 1000 (the most S3
// returns); values below 1 mean the default.
func WithListPageSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.listPage = n
		}
	}
}

// WithLogger sets where the Store tells what it does on its own, such as following a bucket to its
// region. Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// Store opens buckets by URL and counts the requests and bytes of everything read through it. The
// zero value is not usable; use New. Close closes the buckets it opened.
type Store struct {
	opts options

	mu      sync.Mutex
	buckets map[string]*bucketEntry

	requests atomic.Int64
	bytes    atomic.Int64
	retries  atomic.Int64 // GETs re-sent after a body broke off or a response stalled

	// transport carries the S3 buckets' requests; Close closes its idle connections.
	transport *http.Transport

	// reads holds the buffers of released Prefetches and of read or closed Streams, for the next
	// ones. It does not zero them: a GET fills every byte of a Prefetch's buffer or the Prefetch
	// fails, and a Stream hands out only the bytes it read. Reusing them spares a load from Arrow
	// IPC objects most of its page faults (with a fresh buffer per range, reading the objects took a
	// third of the client's CPU, mostly faulting in new memory, and half its peak RSS).
	reads *bufpool.Pool
}

type bucketEntry struct {
	once sync.Once
	err  error

	// guarded by the Store's mu once open: an S3 bucket that turns out to live in another region is
	// reopened there (follow), and the buckets it replaced are closed with the Store
	b     *blob.Bucket
	query url.Values // the query of the URL that opened it
	old   []*blob.Bucket
}

// New returns a Store.
func New(opts ...Option) *Store {
	o := options{maxAttempts: DefaultMaxAttempts, maxBackoff: 5 * time.Second, stall: DefaultStallTimeout, parallel: 8, rangeBytes: 8 << 20, listPage: 1000,
		logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// parallel ranged GETs from several decoders: keep their connections for reuse
	tr.MaxIdleConnsPerHost = max(64, 4*o.parallel)
	tr.MaxIdleConns = max(tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
	tr.ResponseHeaderTimeout = o.stall
	return &Store{opts: o, buckets: map[string]*bucketEntry{}, transport: tr, reads: bufpool.NewUnzeroed()}
}

// Stats reports the requests made (one per GET, HEAD, list page or PUT; the SDK's retries not
// counted) and the object bytes read so far.
func (s *Store) Stats() (requests, bytes int64) { return s.requests.Load(), s.bytes.Load() }

// Retries reports how many GETs were sent again, for the rest of a range, after a response's body
// broke off or stalled, or (GCS, Azure) its headers stalled; they count in Stats' requests too.
func (s *Store) Retries() int64 { return s.retries.Load() }

// sdkCtx is ctx for one call into the SDK of a store of the scheme. On Azure, whose SDK takes its
// retry policy per call, it carries the store's: WithMaxAttempts tries, backoff capped at
// WithMaxBackoff, and for a call whose response is small (metadata: stat, list, delete) a timeout
// of each try at the stall timeout, so a stalled one is tried again instead of waited on. S3 and GCS
// have theirs from their clients.
func (s *Store) sdkCtx(ctx context.Context, scheme string, metadata bool) context.Context {
	if scheme != SchemeAzure {
		return ctx
	}
	o := policy.RetryOptions{MaxRetries: int32(s.opts.maxAttempts - 1), MaxRetryDelay: s.opts.maxBackoff}
	if o.MaxRetries == 0 {
		o.MaxRetries = -1 // the SDK's "one try"; 0 means its default
	}
	if metadata {
		o.TryTimeout = s.opts.stall
	}
	return policy.WithRetryOptions(ctx, o)
}

// errStalled is a request that waited longer than the stall timeout for its response or its next
// bytes (a write: longer than its limit in all).
var errStalled = errors.New("the response stalled")

// watchdog gives a GET up (cancels its context) when a read of its body waits longer than the stall
// timeout. It is armed only during a read, so a caller that holds off reading does not trip it.
type watchdog struct {
	d      time.Duration
	cancel context.CancelFunc
	timer  *time.Timer // nil until the first read
	fired  atomic.Bool
}

// headersWatched reports whether a watchdog must watch for a GET's headers on stores of the scheme:
// S3's transport has a ResponseHeaderTimeout, whose stalls the SDK's retryer sends again, while the
// GCS and Azure clients bring their own transports and would wait for headers forever.
func headersWatched(scheme string) bool { return scheme != SchemeS3 }

// watch returns the context for one GET and its watchdog; stop releases both.
func (s *Store) watch(ctx context.Context) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancel(ctx)
	return ctx, &watchdog{d: s.opts.stall, cancel: cancel}
}

// arm starts the watchdog's clock; stop it with w.timer.Stop.
func (w *watchdog) arm() {
	if w.timer == nil {
		w.timer = time.AfterFunc(w.d, func() {
			w.fired.Store(true)
			w.cancel()
		})
	} else {
		w.timer.Reset(w.d)
	}
}

// read is rd.Read(p), failing with errStalled when it waited longer than the stall timeout.
func (w *watchdog) read(rd io.Reader, p []byte) (int, error) {
	w.arm()
	n, err := rd.Read(p)
	w.timer.Stop()
	if err != nil && w.fired.Load() {
		err = fmt.Errorf("%w: no bytes for %s", errStalled, w.d)
	}
	return n, err
}

// open runs open, an SDK call that returns once a response's headers arrived, failing with
// errStalled when it waited longer than the stall timeout.
func (w *watchdog) open(open func() error) error {
	w.arm()
	err := open()
	w.timer.Stop()
	if err != nil && w.fired.Load() {
		err = fmt.Errorf("%w: no response for %s", errStalled, w.d)
	}
	return err
}

func (w *watchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cancel()
}

// retryBody reports whether a read whose body broke off (err a *bodyError) should fetch on, its
// fails-th failure in a row, after waiting the SDK's jittered exponential backoff (capped at
// WithMaxBackoff). It gives up after WithMaxAttempts failures in a row, or when ctx ends.
func (s *Store) retryBody(ctx context.Context, err error, fails int) bool {
	var be *bodyError
	if !errors.As(err, &be) || !s.backoff(ctx, err, fails) {
		return false
	}
	s.retries.Add(1)
	return true
}

// backoff waits before the next try after the fails-th failure in a row, err, the SDK's jittered
// exponential backoff (capped at WithMaxBackoff). It reports false, at once, after WithMaxAttempts
// failures in a row or when ctx ends.
func (s *Store) backoff(ctx context.Context, err error, fails int) bool {
	if fails >= s.opts.maxAttempts {
		return false
	}
	d, derr := retry.NewExponentialJitterBackoff(s.opts.maxBackoff).BackoffDelay(fails, err)
	if derr != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// metadata runs call, a stat, list or delete in a bucket of the scheme. Its response is small, so
// waiting the stall timeout for it means it stalled: on GCS, whose client would wait forever, the
// call is then given up and tried again, up to WithMaxAttempts times in a row. Azure tries it again
// itself (sdkCtx's per-try timeout), S3 too (its transport's ResponseHeaderTimeout).
func (s *Store) metadata(ctx context.Context, scheme string, call func(context.Context) error) error {
	ctx = s.sdkCtx(ctx, scheme, true)
	if scheme != SchemeGCS {
		return call(ctx)
	}
	for fails := 1; ; fails++ {
		gctx, w := s.watch(ctx)
		err := w.open(func() error { return call(gctx) })
		w.stop()
		if !errors.Is(err, errStalled) || ctx.Err() != nil || !s.backoff(ctx, err, fails) {
			return err
		}
	}
}

// Close closes every bucket the store opened.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, e := range s.buckets {
		for _, b := range append(e.old, e.b) {
			if b != nil {
				errs = append(errs, b.Close())
			}
		}
	}
	s.buckets = map[string]*bucketEntry{}
	s.transport.CloseIdleConnections()
	return errors.Join(errs...)
}

// bucket returns loc's bucket, opened on first use with loc's parameters; later locations in the
// same bucket share it (their parameters are not looked at again).
func (s *Store) bucket(ctx context.Context, loc Location) (*blob.Bucket, error) {
	s.mu.Lock()
	e, ok := s.buckets[loc.bucketID()]
	if !ok {
		e = &bucketEntry{}
		s.buckets[loc.bucketID()] = e
	}
	s.mu.Unlock()
	e.once.Do(func() {
		b, err := s.open(ctx, loc)
		if err != nil {
			e.err = &Error{URL: loc.bucketID(), Op: "open bucket", Err: err}
			return
		}
		s.mu.Lock()
		e.b, e.query = b, loc.Query
		s.mu.Unlock()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.err != nil {
		// a failed open is not cached: a later call (a new context) may succeed
		if s.buckets[loc.bucketID()] == e {
			delete(s.buckets, loc.bucketID())
		}
		return nil, e.err
	}
	return e.b, nil
}

func (s *Store) open(ctx context.Context, loc Location) (*blob.Bucket, error) {
	switch loc.Scheme {
	case SchemeS3:
		return s.openS3(ctx, loc)
	case SchemeGCS:
		b, err := openGCS(ctx, loc)
		if err != nil {
			return nil, err
		}
		// The GCS client retries a transient failure until the context ends unless told a number
		// of attempts: a store that answers 503 for good would hang the load.
		var c *storage.Client
		if b.As(&c) {
			c.SetRetry(storage.WithMaxAttempts(s.opts.maxAttempts),
				storage.WithBackoff(gax.Backoff{Initial: min(time.Second, s.opts.maxBackoff), Max: s.opts.maxBackoff, Multiplier: 2}))
		}
		return b, nil
	case SchemeAzure:
		b, err := blob.OpenBucket(ctx, bucketURL(loc).String())
		if err != nil && strings.Contains(err.Error(), "AccountName is required") {
			err = fmt.Errorf("no Azure storage account: set AZURE_STORAGE_ACCOUNT (with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or the default Azure credential chain), or put storage_account=NAME in the URL's query (%w)", err)
		}
		return b, err
	}
	return nil, fmt.Errorf("unknown scheme %q", loc.Scheme)
}

// openGCS opens a GCS bucket with gcsblob's default opener (credentials, or STORAGE_EMULATOR_HOST).
// When that opener finds no credentials it prints a warning on stdout (into --json output) and
// goes on with empty ones, and every request then fails talking of a private key: look for them
// first, and say what is missing. An unauthenticated URL (anonymous=true, access_id=-) gets an
// unauthenticated client without the opener looking.
func openGCS(ctx context.Context, loc Location) (*blob.Bucket, error) {
	u := bucketURL(loc)
	q := u.Query()
	anon, _ := strconv.ParseBool(q.Get("anonymous"))
	switch {
	case os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "":
	case anon || q.Get("access_id") == "-":
		return (&gcsblob.URLOpener{Client: gcp.NewAnonymousHTTPClient(gcp.DefaultTransport())}).OpenBucketURL(ctx, u)
	default:
		if _, err := gcp.DefaultCredentials(ctx); err != nil {
			return nil, fmt.Errorf("no usable Google credentials: set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, or run on Google Cloud (the metadata server); a public bucket takes anonymous=true in the URL's query (%w)", err)
		}
	}
	return blob.OpenBucket(ctx, u.String())
}

// openS3 builds the S3 client itself (rather than through s3blob's URL opener) to apply the
// endpoint environment, the path-style default and the retryer.
func (s *Store) openS3(ctx context.Context, loc Location) (*blob.Bucket, error) {
	q := cloneQuery(loc.Query)
	pathStyle, pathStyleSet := false, false
	for _, k := range []string{"use_path_style", "s3ForcePathStyle"} {
		if v := q.Get(k); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("invalid %s=%q", k, v)
			}
			pathStyle, pathStyleSet = b, true
			q.Del(k)
		}
	}
	disableHTTPS := false
	if v := q.Get("disable_https"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("invalid disable_https=%q", v)
		}
		disableHTTPS = b
		q.Del("disable_https")
	}
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if endpoint != "" && q.Get("region") == "" && firstEnv("AWS_REGION", "AWS_DEFAULT_REGION") == "" {
		q.Set("region", "us-east-1") // S3-compatible stores mostly ignore it; the signer needs one
	}
	custom := endpoint != ""
	if custom && q.Get("request_checksum_calculation") == "" {
		// third-party stores do not all take the SDK's default checksums
		q.Set("request_checksum_calculation", "when_required")
		if q.Get("response_checksum_validation") == "" {
			q.Set("response_checksum_validation", "when_required")
		}
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		// Neither the environment nor the profile names one (the SDK would fail every request with
		// "Invalid region: region was not a valid DNS name"): start where boto3 does, and let S3's
		// answer take the requests to the bucket's region (follow).
		cfg.Region = "us-east-1"
		s.opts.logger.Info("no AWS region configured: starting from us-east-1 and following the bucket to its region", "bucket", loc.bucketID())
	}
	cfg.HTTPClient = &http.Client{Transport: s.transport, CheckRedirect: s3Redirect}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = s.opts.maxAttempts
			o.MaxBackoff = s.opts.maxBackoff
		})
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if custom {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle || (!pathStyleSet && custom && pathStyleHost(endpoint))
		o.EndpointOptions.DisableHTTPS = disableHTTPS
	})
	return s3blob.OpenBucket(ctx, client, loc.Bucket, &s3blob.Options{RequestChecksumCalculation: cfg.RequestChecksumCalculation})
}

// s3Redirect is the S3 client's redirect policy, the AWS SDK's own client's (which the Store's
// replaces, for its transport): only a 307 or 308 is followed, since they keep the method, and a
// session token is not sent on to another host (net/http drops only the Authorization header).
// Any other redirect is the answer, such as S3's 301 for a bucket in another region (follow).
func s3Redirect(r *http.Request, via []*http.Request) error {
	switch r.Response.StatusCode {
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if via[len(via)-1].URL.Host != r.URL.Host {
			r.Header.Del("X-Amz-Security-Token")
		}
		return nil
	}
	return http.ErrUseLastResponse
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// Object is one listed object: its location and the version it had when listed.
type Object struct {
	Loc     Location
	Size    int64
	ModTime time.Time
	// ETag is the object's entity tag (for GCS, "g" and its generation), "" when the store gave
	// none. Reads of the object are conditional on it.
	ETag string
}

// URL is the object's URL without the query.
func (o Object) URL() string { return o.Loc.String() }

// Stat returns the object at loc, or an *Error (ErrNotFound, ErrNoSuchBucket, ErrAccessDenied).
func (s *Store) Stat(ctx context.Context, loc Location) (Object, error) {
	var a *blob.Attributes
	err := s.onBucket(ctx, loc, func(b *blob.Bucket) error {
		s.requests.Add(1)
		err := s.metadata(ctx, loc.Scheme, func(ctx context.Context) (err error) {
			a, err = b.Attributes(ctx, loc.Key)
			return err
		})
		return s.classify(ctx, b, loc, "stat", err)
	})
	if err != nil {
		return Object{}, err
	}
	return Object{Loc: loc, Size: a.Size, ModTime: a.ModTime, ETag: attrsETag(a)}, nil
}

// classify is classify with NotFound told apart: a missing bucket or a missing key, asked of the
// store by one more request when the provider's error does not say.
func (s *Store) classify(ctx context.Context, b *blob.Bucket, loc Location, op string, err error) error {
	err = classify(loc, op, err)
	var e *Error
	if errors.As(err, &e) && errors.Is(e.Kind, ErrNotFound) && e.Code != "NoSuchKey" && e.Code != "BlobNotFound" && ctx.Err() == nil {
		s.requests.Add(1)
		if ok, xerr := b.IsAccessible(ctx); xerr == nil && !ok {
			e.Kind, e.Code = ErrNoSuchBucket, "NoSuchBucket"
		}
	}
	return err
}

// Create writes data to loc only if no object is there (If-None-Match: *), returning the new
// object's ETag. Another writer's object already there fails with ErrPrecondition.
func (s *Store) Create(ctx context.Context, loc Location, data []byte) (string, error) {
	return s.write(ctx, loc, data, &blob.WriterOptions{IfNotExist: true})
}

// Update replaces the object at loc only if its ETag is still etag (If-Match), returning the new
// ETag. Another version there fails with ErrPrecondition. (S3, GCS and Azure each carry the
// condition in their own request field.)
func (s *Store) Update(ctx context.Context, loc Location, data []byte, etag string) (string, error) {
	return s.write(ctx, loc, data, &blob.WriterOptions{BeforeWrite: ifMatchWrite(etag)})
}

func (s *Store) write(ctx context.Context, loc Location, data []byte, opts *blob.WriterOptions) (string, error) {
	opts.ContentType = "application/octet-stream"
	opts.BufferSize = max(len(data)+1, 5<<20) // one request: a multipart upload would drop the condition
	// Upload without ContentMD5, not WriteAll: gocloud's azureblob writer panics closing its pipe
	// after a failed (conditional) write fed through Write; the driver's Upload takes the bytes in
	// one call (and gocloud uses it only when it is not checking an MD5 itself).
	// A write whose connection stalls would wait forever on GCS and Azure (their own transports),
	// and on S3 while sending the body: give it the stall timeout plus a second per MiB to send.
	// A request refused for being sent to another region than the bucket's wrote nothing: it is
	// sent again in the bucket's region (onBucket).
	limit := s.opts.stall + time.Duration(len(data)>>20)*time.Second
	err := s.onBucket(ctx, loc, func(b *blob.Bucket) error {
		s.requests.Add(1)
		wctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		err := b.Upload(s.sdkCtx(wctx, loc.Scheme, false), loc.Key, bytes.NewReader(data), opts)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w: the write of %d bytes took longer than %s", errStalled, len(data), limit)
		}
		return s.classify(ctx, b, loc, "write", err)
	})
	if err != nil {
		return "", err
	}
	o, err := s.Stat(ctx, loc)
	if err != nil {
		return "", err
	}
	return o.ETag, nil
}

// Delete removes the object at loc.
func (s *Store) Delete(ctx context.Context, loc Location) error {
	return s.onBucket(ctx, loc, func(b *blob.Bucket) error {
		s.requests.Add(1)
		err := s.metadata(ctx, loc.Scheme, func(ctx context.Context) error { return b.Delete(ctx, loc.Key) })
		return s.classify(ctx, b, loc, "delete", err)
	})
}
