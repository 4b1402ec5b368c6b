package flightclient

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/loaderproject/loader/partitioner"
)

// Option configures a Client.
type Option func(*config)

type config struct {
	connections   int
	token         func(context.Context) (string, error)
	maxFrameBytes int
	streamCap     int64
	logger        *slog.Logger
	tls           *tls.Config
	dialOpts      []grpc.DialOption

	readyTimeout time.Duration
	ackTimeout   time.Duration
	resendHook   func(partitioner.Span, int64)
	retries      int
	backoffBase  time.Duration
	backoffMax   time.Duration
	rotationWait time.Duration
	drainTimeout time.Duration
	callBytes    int64
	idleFlush    time.Duration
	rpcTimeout   time.Duration
	createTable  bool
	userAgent    string

	// capHook, when set (by tests), is called each time a stream stops taking frames because its
	// unacknowledged bytes reached the cap.
	capHook func(stream, frames int, bytes int64)
}

// Defaults, after the Zerobus SDKs (reference section 6) where they have one.
const (
	DefaultStreamCap    = 32 << 20
	DefaultReadyTimeout = 30 * time.Second
	DefaultAckTimeout   = 60 * time.Second
	DefaultRetries      = 4
	DefaultBackoffBase  = 2 * time.Second
	DefaultBackoffMax   = 30 * time.Second
	DefaultCallBytes    = 64 << 20
	DefaultIdleFlush    = 250 * time.Millisecond
	DefaultRPCTimeout   = 5 * time.Minute
	// DefaultRotationWait bounds how long a rotating stream waits for acknowledgements of what it sent
	// when the server's grace is longer (the SDKs' stream_paused_max_wait_time_ms has no default; we
	// choose one so a rotation cannot stall a stream for the ~15 minutes a server may grant).
	DefaultRotationWait = 30 * time.Second
	// DefaultDrainTimeout bounds the wait for the end of a call after the client half-closed with
	// nothing left unacknowledged (the SDK drains a rotated stream for 500 ms).
	DefaultDrainTimeout = 500 * time.Millisecond
	// DefaultUserAgent is the gRPC user agent without a version (gRPC appends its own).
	DefaultUserAgent = "loader"
)

// headroom is added to the frame limit for the FlightData envelope (descriptor, app_metadata,
// protobuf framing) when setting gRPC's send limit.
const headroom = 1 << 20

func newConfig(opts []Option) config {
	cfg := config{
		connections:   1,
		maxFrameBytes: partitioner.DefaultMaxFrameBytes,
		streamCap:     DefaultStreamCap,
		logger:        slog.New(slog.DiscardHandler),
		tls:           &tls.Config{MinVersion: tls.VersionTLS12},
		readyTimeout:  DefaultReadyTimeout,
		ackTimeout:    DefaultAckTimeout,
		retries:       DefaultRetries,
		backoffBase:   DefaultBackoffBase,
		backoffMax:    DefaultBackoffMax,
		rotationWait:  DefaultRotationWait,
		drainTimeout:  DefaultDrainTimeout,
		callBytes:     DefaultCallBytes,
		idleFlush:     DefaultIdleFlush,
		rpcTimeout:    DefaultRPCTimeout,
		userAgent:     DefaultUserAgent,
	}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// setPositive sets *dst to v when v is positive; otherwise the option keeps its default.
func setPositive[T ~int | ~int64](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

func (c *config) sendLimit() int { return c.maxFrameBytes + headroom }

// recvLimit fits PutResults, action results and the DoGet of Flight SQL metadata.
func (c *config) recvLimit() int { return max(c.maxFrameBytes+headroom, 16<<20) }

// WithConnections sets the number of gRPC connections streams are spread over. Default 1; clamped to
// at least 1.
func WithConnections(n int) Option {
	return func(c *config) { c.connections = max(n, 1) }
}

// WithToken sends "authorization: Bearer <token>" on every call. An empty token sends no header.
func WithToken(token string) Option {
	return WithTokenSource(func(context.Context) (string, error) { return token, nil })
}

// WithTokenSource calls fn for the bearer token each time a call is opened (every DoPut, including
// reconnections, and every action), so a source can refresh tokens before they expire. An error from
// fn fails that call like a transient connection error. Default: no token.
func WithTokenSource(fn func(ctx context.Context) (string, error)) Option {
	return func(c *config) { c.token = fn }
}

// WithMaxFrameBytes tells the client the largest frame it will send, so gRPC message limits are set to
// fit. Default partitioner.DefaultMaxFrameBytes; values below 1 keep the default.
func WithMaxFrameBytes(n int) Option {
	return func(c *config) { setPositive(&c.maxFrameBytes, n) }
}

// WithStreamCap bounds the unacknowledged bytes one stream may hold. Default 32 MiB. A stream always
// takes at least one frame, so a cap below the frame size means one frame at a time; values below 1
// keep the default.
func WithStreamCap(n int64) Option {
	return func(c *config) { setPositive(&c.streamCap, n) }
}

// WithLogger sets the logger. Default: discard. nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithTLSConfig sets the TLS configuration for grpc+tls:// and https:// endpoints (custom roots, client
// certificates). Default: the system roots, TLS 1.2 or later. The ServerName defaults to the
// endpoint's host. nil keeps the default.
func WithTLSConfig(tc *tls.Config) Option {
	return func(c *config) {
		if tc != nil {
			c.tls = tc
		}
	}
}

// WithDialOptions adds gRPC dial options (interceptors, a custom dialer, keepalive) to those New
// sets. They are applied last, so they may override the defaults.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithReadyTimeout bounds the wait for READY after the schema frame (Zerobus dialect). Default 30 s,
// the SDKs' connection_timeout_ms; values below 1 keep the default. A timeout is a transient failure.
func WithReadyTimeout(d time.Duration) Option {
	return func(c *config) { setPositive(&c.readyTimeout, d) }
}

// WithAckTimeout sets how long the oldest unacknowledged frame of a stream may wait for its
// acknowledgement before the DoPut counts as failed (transiently) and is replaced. Default 60 s, the
// SDKs' server_lack_of_ack_timeout_ms; values below 1 keep the default.
func WithAckTimeout(d time.Duration) Option {
	return func(c *config) { setPositive(&c.ackTimeout, d) }
}

// WithResendHook calls fn, from Load's goroutines, for every range of rows sent again on a new DoPut
// after the call that carried them ended without acknowledging them: span locates the first row and
// rows counts them. The target may hold these rows twice (unless it deduplicates by unit id).
func WithResendHook(fn func(span partitioner.Span, rows int64)) Option {
	return func(c *config) { c.resendHook = fn }
}

// WithRetry sets how many consecutive transient failures a stream survives (the count restarts when
// a DoPut makes progress) and the backoff before each new attempt: base·2^(n-1), at most max, with
// jitter (a random value between half and all of it). Defaults: 4 retries, 2 s base, 30 s max, as the
// SDKs' recovery_retries and recovery_backoff_ms. Negative retries are clamped to 0 (no retry);
// non-positive durations keep their default.
func WithRetry(retries int, base, max time.Duration) Option {
	return func(c *config) {
		c.retries = retries
		if retries < 0 {
			c.retries = 0
		}
		setPositive(&c.backoffBase, base)
		setPositive(&c.backoffMax, max)
	}
}

// WithRotationWait bounds how long a stream asked to rotate (close_stream_duration_ms) waits for the
// acknowledgement of what it sent before it closes the DoPut and replays the rest on a new one; the
// server's grace applies when shorter. Default DefaultRotationWait; values below 1 keep the default.
func WithRotationWait(d time.Duration) Option {
	return func(c *config) { setPositive(&c.rotationWait, d) }
}

// WithCallBytes bounds the bytes one call carries in the Flight and Flight SQL dialects, which
// acknowledge at the end of a call: each completed call is a resume point. Default 64 MiB; values
// below 1 keep the default. (Zerobus DoPuts are not bounded: they acknowledge as they go.)
func WithCallBytes(n int64) Option {
	return func(c *config) { setPositive(&c.callBytes, n) }
}

// WithIdleFlush ends a Flight SQL call (or a Flight call on a server that sends no acks) when no new
// frame arrived for d while frames wait for their acknowledgement. Default 250 ms; values below 1 keep
// the default.
func WithIdleFlush(d time.Duration) Option {
	return func(c *config) { setPositive(&c.idleFlush, d) }
}

// WithRPCTimeout bounds Count and Describe when ctx has no deadline. Default 5 minutes (a flush may
// commit a lot); values below 1 keep the default.
func WithRPCTimeout(d time.Duration) Option {
	return func(c *config) { setPositive(&c.rpcTimeout, d) }
}

// WithCreateTable makes every Flight SQL ingest call create the table when it does not exist
// (TABLE_NOT_EXIST_OPTION_CREATE, with TABLE_EXISTS_OPTION_APPEND: ADBC's create_append mode).
// Default false: a missing table fails the load. Other dialects ignore it: Zerobus never creates
// tables, and a plain Flight DoPut has no way to ask.
func WithCreateTable(create bool) Option {
	return func(c *config) { c.createTable = create }
}

// WithUserAgent sets the gRPC user agent, e.g. "loader/1.2.0" (gRPC appends "grpc-go/<version>").
// Default DefaultUserAgent; an empty string keeps the default.
func WithUserAgent(ua string) Option {
	return func(c *config) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}
