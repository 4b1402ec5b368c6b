package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/loaderproject/loader/sink/internal/wal"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

// Server is the embedded sink. Create it with New, run it with Serve, stop it with Shutdown.
type Server struct {
	wh   *warehouse.Warehouse
	cfg  config
	log  *slog.Logger
	grpc *grpc.Server
	sql  flight.FlightServer // the Flight SQL router, for everything that is not ours
	sqlq *sqlServer          // what sql routes to

	faults faultState

	// ctx lives from New to the end of Shutdown: recovery, committers and final commits use it.
	ctx    context.Context
	cancel context.CancelFunc

	ready     chan struct{} // closed when recovery is done and calls are accepted
	recovered chan struct{} // closed when Serve's recovery ends, with or without success
	closing   chan struct{} // closed when Shutdown starts: streams wind down

	mu       sync.Mutex
	serving  bool
	shutdown bool
	tables   map[tableschema.TableName]*tableEntry
	closed   bool // tables may no longer be opened

	wg sync.WaitGroup // stream goroutines

	// The HTTP side (http.go), when OAuth or TLS is configured.
	oauth *oauthState
	mux   cmux.CMux
	http  *http.Server
}

// Option configures a Server.
type Option func(*config)

type config struct {
	tokens         []string
	commitInterval time.Duration
	discard        bool
	log            *slog.Logger
	faults         Faults
	testFaults     bool
	noUnitIDs      bool
	mem            memory.Allocator
	segmentBytes   int64
	streamRate     int64       // bytes per second per DoPut; 0: unlimited
	oauth          *OAuth      // WithOAuth
	tls            *tls.Config // WithTLS
	events         Events
}

// WithTokens limits access to callers presenting one of these bearer tokens ("authorization: Bearer
// T"). With none, every caller is accepted. Empty tokens are ignored.
func WithTokens(tokens ...string) Option {
	return func(c *config) {
		for _, t := range tokens {
			if t != "" {
				c.tokens = append(c.tokens, t)
			}
		}
	}
}

// WithCommitInterval sets how often acknowledged rows are committed to Delta. Default 1s; values
// below 10ms are raised to 10ms.
func WithCommitInterval(d time.Duration) Option {
	return func(c *config) { c.commitInterval = max(d, 10*time.Millisecond) }
}

// WithDiscard makes the server acknowledge data without storing it, for client benchmarks, in every
// dialect (Flight SQL ingest counts rows and creates no table). It checks what framing and schema
// require (schema match, offsets, well-formed IPC RecordBatch messages whose arrays are structurally
// sound) and counts rows, but skips the work whose only product would be discarded: the value
// checks (UTF-8 of strings, DECIMAL text, NOT NULL) and Flight SQL ingest's casts. The server logs a
// warning when it starts in this mode. Default false.
func WithDiscard(discard bool) Option {
	return func(c *config) { c.discard = discard }
}

// WithLogger sets the logger. Default: discard; nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// WithFaults installs a fault set from the start. Default: none (the zero Faults).
func WithFaults(f Faults) Option {
	return func(c *config) { c.faults = f }
}

// WithTestFaults serves the loader.faults action, which lets any client that passes authentication
// inject faults. Default false: the action answers PermissionDenied. Only for tests.
func WithTestFaults(on bool) Option {
	return func(c *config) { c.testFaults = on }
}

// WithUnitIDs says whether the sink offers deduplication by unit id (loader.unit-ids). Default true;
// false makes it an at-least-once target like Zerobus, for measuring what deduplication saves.
func WithUnitIDs(on bool) Option {
	return func(c *config) { c.noUnitIDs = !on }
}

// WithAllocator sets the allocator for decoding frames, casting Flight SQL batches and reading tables
// back. Default memory.DefaultAllocator; nil keeps the default. Tests pass a checked allocator.
func WithAllocator(mem memory.Allocator) Option {
	return func(c *config) {
		if mem != nil {
			c.mem = mem
		}
	}
}

// WithWALSegmentBytes sets the size at which a table's write-ahead log starts a new segment file.
// Default 64 MiB; values below 4 KiB are raised to 4 KiB. Small segments let tests observe cleanup.
func WithWALSegmentBytes(n int64) Option {
	return func(c *config) { c.segmentBytes = max(n, 4<<10) }
}

// WithStreamRateLimit paces every DoPut (each dialect) to at most bytesPerSec bytes of FlightData per
// second, as a service that caps each stream does; with an ack delay fault it models a remote service
// for benchmarks. Default 0: unlimited; values below 0 count as 0.
func WithStreamRateLimit(bytesPerSec int64) Option {
	return func(c *config) { c.streamRate = max(bytesPerSec, 0) }
}

func newConfig(opts []Option) config {
	c := config{
		commitInterval: time.Second,
		log:            slog.New(slog.DiscardHandler),
		mem:            memory.DefaultAllocator,
		segmentBytes:   wal.DefaultSegmentBytes,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Faults are test hooks; the zero value injects nothing. They apply to Zerobus and plain Flight DoPuts
// (UnavailableCalls to every DoPut, Flight SQL included, as it acts before the call is read). A DoPut
// uses the fault set installed when it started, so a running stream is not affected by SetFaults.
// In JSON, durations are nanoseconds (or, when read, Go duration strings such as "150ms").
type Faults struct {
	// DropAfterFrames ends each DoPut with Unavailable after it has received this many data frames,
	// without acknowledging the frames not yet acknowledged. 0 disables. The sink makes the outcome
	// deterministic: frames 1..N-1 are stored and acknowledged before the call ends, and frame N
	// is received but neither stored nor acknowledged.
	DropAfterFrames int `json:"drop_after_frames,omitempty"`
	// DropCalls limits DropAfterFrames to the next this-many DoPuts (0: every DoPut). A DoPut takes
	// its turn when its setup succeeds (READY).
	DropCalls int `json:"drop_calls,omitempty"`
	// AckDelay holds every ack back this long.
	AckDelay time.Duration `json:"ack_delay,omitempty"`
	// RotateAfterFrames sends close_stream_duration_ms (RotateGrace) with the ack that follows this
	// many data frames on each DoPut. 0 disables.
	RotateAfterFrames int           `json:"rotate_after_frames,omitempty"`
	RotateGrace       time.Duration `json:"rotate_grace,omitempty"`
	// UnavailableCalls refuses the next this-many DoPut calls with Unavailable before reading them.
	UnavailableCalls int `json:"unavailable_calls,omitempty"`
	// SilentCalls makes the next this-many DoPuts store their frames but never acknowledge them (the
	// client's ack timeout must notice). A DoPut takes its turn when its setup succeeds (READY).
	SilentCalls int `json:"silent_calls,omitempty"`
}

// New returns a server over the warehouse. It does no I/O.
func New(wh *warehouse.Warehouse, opts ...Option) *Server {
	cfg := newConfig(opts)
	s := &Server{
		wh:        wh,
		cfg:       cfg,
		log:       cfg.log,
		ready:     make(chan struct{}),
		recovered: make(chan struct{}),
		closing:   make(chan struct{}),
		tables:    map[tableschema.TableName]*tableEntry{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.faults.set(cfg.faults)
	if s.httpEnabled() {
		s.oauth = newOAuthState(cfg.oauth)
	}
	s.sqlq = newSQLServer(s)
	s.sql = flightsql.NewFlightServerWithAllocator(s.sqlq, cfg.mem)
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(zerobus.MaxMessageBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		// Frames are megabytes: a 1 MiB read buffer per connection takes far fewer reads from the
		// socket than gRPC's 32 KiB.
		grpc.ReadBufferSize(1<<20),
		// FlightData is unmarshalled with one copy instead of two (codec.go).
		grpc.ForceServerCodecV2(serverCodec),
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.streamInterceptor),
		grpc.WaitForHandlers(true),
		// Clients keep long DoPut streams open and may ping to keep NATs and proxies awake; gRPC's
		// default policy would cut them off for pinging more than every five minutes.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	flight.RegisterFlightServiceServer(s.grpc, &service{s: s})
	return s
}

// Serve recovers every table's write-ahead log (committing acknowledged rows not yet in Delta), then
// serves Arrow Flight on lis until Shutdown. It returns nil after a Shutdown. If recovery fails (a log
// is locked by another process, or damaged before its tail), Serve closes lis and returns the error
// without serving, and Ready is never closed.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.serving {
		s.mu.Unlock()
		return errors.New("sink: Serve called twice")
	}
	if s.shutdown {
		s.mu.Unlock()
		lis.Close()
		return nil
	}
	s.serving = true
	s.mu.Unlock()

	if s.cfg.discard {
		s.log.Warn("DISCARD MODE: the sink validates and acknowledges data but stores NOTHING; use it only to benchmark clients")
	}
	err := s.recoverAll(s.ctx)
	close(s.recovered)
	if err != nil {
		lis.Close()
		return fmt.Errorf("sink: recovery: %w", err)
	}
	close(s.ready)
	s.log.Info("sink serving", "addr", lis.Addr().String(), "warehouse", s.wh.Dir(), "discard", s.cfg.discard)
	if s.httpEnabled() {
		return s.serveSplit(lis)
	}
	if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("sink: serve: %w", err)
	}
	return nil
}

// Ready is closed once Serve has finished recovery and accepts calls.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Shutdown stops accepting calls, lets in-flight calls end cleanly, commits every acknowledged row and
// closes the logs. If ctx ends first, remaining calls are cut off; acknowledged rows stay durable in
// the log either way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return errors.New("sink: Shutdown called twice")
	}
	s.shutdown = true
	serving := s.serving
	s.mu.Unlock()
	if serving {
		<-s.recovered
	}
	close(s.closing)

	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.log.Warn("sink: shutdown deadline reached; cutting off remaining calls")
		s.grpc.Stop()
		<-stopped
	}
	s.stopHTTP()
	s.wg.Wait()
	s.sqlq.abortTransactions() // what no EndTransaction committed is dropped

	s.mu.Lock()
	s.closed = true
	entries := make([]*tableEntry, 0, len(s.tables))
	for _, e := range s.tables {
		entries = append(entries, e)
	}
	s.mu.Unlock()
	var errs []error
	for _, e := range entries {
		<-e.ready
		if e.ts != nil {
			errs = append(errs, e.ts.close(ctx))
		}
	}
	s.cancel()
	return errors.Join(errs...)
}

// SetFaults replaces the fault set. DoPuts already running keep the set they started with.
func (s *Server) SetFaults(f Faults) { s.faults.set(f) }

// Flush commits every acknowledged row of the table to Delta now.
func (s *Server) Flush(ctx context.Context, name tableschema.TableName) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ts, err := s.openIfLogged(ctx, name)
	if err != nil {
		return err
	}
	if ts == nil {
		return nil // no log: nothing acknowledged that is not committed
	}
	return ts.commit(ctx)
}

// PendingRows returns how many rows of the table are durable in its write-ahead log but not yet
// committed, reading the log on disk without taking it over (for `loader table count --json` while no
// server, or another server, runs).
func PendingRows(ctx context.Context, t *warehouse.Table) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("sink: pending rows of %s: %w", t.Name(), err)
	}
	var rows int64
	err = wal.ReadDir(ctx, walDir(t.Dir()), uint64(max(snap.Txns[walAppID], 0)), func(_ uint64, payload []byte) error {
		r, err := recordRows(payload)
		if err != nil {
			return err
		}
		rows += r
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sink: pending rows of %s: %w", t.Name(), err)
	}
	return rows, nil
}

// walExists reports whether the table has a write-ahead log directory.
func walExists(tableDir string) bool {
	_, err := os.Stat(walDir(tableDir))
	return err == nil
}
