package flightclient_test

// A real in-process Flight server that follows the Zerobus protocol (and, when asked, the plain Flight
// dialect), with per-test behaviour, plus the fixtures the tests share.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/flighttest"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	tableName = tableschema.TableName{Catalog: "main", Schema: "sales", Table: "orders"}
	tableCols = mustColumns("id BIGINT NOT NULL, s STRING")
)

func mustColumns(s string) *tableschema.Schema {
	ts, err := tableschema.ParseColumns(s)
	if err != nil {
		panic(err)
	}
	return ts
}

// value is the expected content of column s for row id: nulls every 5th row.
func value(id int64) (string, bool) {
	if id%5 == 0 {
		return "", false
	}
	return fmt.Sprintf("v%d-%s", id, "padding-padding-padding"), true
}

// fixture is a batch of rows 0..n-1 cut into frames.
type fixture struct {
	enc    *partitioner.Encoder
	frames []*partitioner.Frame
	rows   int64
}

func newFixture(t testing.TB, mem memory.Allocator, rows int64, maxFrame int, opts ...partitioner.EncoderOption) *fixture {
	t.Helper()
	schema := tableCols.Arrow()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for id := range rows {
		b.Field(0).(*array.Int64Builder).Append(id)
		if v, ok := value(id); ok {
			b.Field(1).(*array.LargeStringBuilder).Append(v)
		} else {
			b.Field(1).AppendNull()
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	enc, err := partitioner.NewEncoder(schema, maxFrame, append([]partitioner.EncoderOption{partitioner.WithAllocator(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{enc: enc, rows: rows}
	t.Cleanup(func() { // before the allocator's check, made before the fixture
		for _, f := range fx.frames {
			f.Release()
		}
	})
	if err := enc.Encode(rec, partitioner.Span{File: 1, Unit: 2}, func(f *partitioner.Frame) error {
		fx.frames = append(fx.frames, f)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return fx
}

// produce sends the frames on an unbuffered channel and closes it, or stops when ctx ends.
func produce(ctx context.Context, frames []*partitioner.Frame) <-chan *partitioner.Frame {
	ch := make(chan *partitioner.Frame)
	go func() {
		defer close(ch)
		for _, f := range frames {
			f.Retain() // the fixture keeps its reference; Load takes this one
			select {
			case ch <- f:
			case <-ctx.Done():
				f.Release()
				return
			}
		}
	}()
	return ch
}

// ackLog records the frames Load reported.
type ackLog struct {
	mu     sync.Mutex
	frames []*partitioner.Frame
	closed bool
	late   int // frames reported after close
}

func (a *ackLog) acked(f *partitioner.Frame) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		a.late++
	}
	a.frames = append(a.frames, f)
}

func (a *ackLog) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
}

// check asserts every frame of fx was reported exactly once, as the very frame sent.
func (a *ackLog) check(t *testing.T, fx *fixture) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[*partitioner.Frame]int{}
	for _, f := range a.frames {
		seen[f]++
	}
	for i, f := range fx.frames {
		if seen[f] != 1 {
			t.Errorf("frame %d (%s, %d rows) reported %d times; want once", i, f.Span, f.Rows, seen[f])
		}
	}
	if len(a.frames) != len(fx.frames) {
		t.Errorf("%d frames reported; want %d", len(a.frames), len(fx.frames))
	}
	if a.late > 0 {
		t.Errorf("%d frames reported after Load returned", a.late)
	}
}

// row is one received row.
type row struct {
	id    int64
	s     string
	valid bool
}

// server is a Flight server speaking the Zerobus protocol (or plain Flight).
type server struct {
	flight.BaseFlightServer
	t   testing.TB
	mem memory.Allocator

	table   *tableschema.Schema // validated at setup (zerobus.ValidateSchema)
	token   string              // required bearer token, "" for none
	dialect flightclient.Dialect
	// For the Flight dialect: send READY after the schema; send no acks at all (rows become durable
	// when the client half-closes).
	flightReady, flightAckless bool

	// Hooks, each optional.
	onSetup func(c *call) error // before READY; an error ends the call
	onFrame func(c *call) error // after each data frame; default acks everything received
	onEOF   func(c *call) error // after the client half-closed; default acks everything received

	mu      sync.Mutex
	ncalls  int
	durable map[int64]int // row id → times made durable
	wrong   []string      // rows whose values differ from the source
	peers   map[string]bool
	calls   []*call
	addr    string
}

// call is one DoPut as the server sees it.
type call struct {
	s         *server
	n         int
	stream    flight.FlightService_DoPutServer
	md        metadata.MD
	desc      *flight.FlightDescriptor
	rows      []row   // received, in order
	frameEnds []int64 // cumulative rows at the end of each frame
	acked     int64
}

// ack makes rows [acked, n) durable and sends the cumulative ack, with a rotation request when
// closeMs is not nil.
func (c *call) ack(n int64, closeMs *uint64) error {
	c.s.mu.Lock()
	for _, r := range c.rows[c.acked:n] {
		c.s.durable[r.id]++
		if want, ok := value(r.id); ok != r.valid || want != r.s {
			c.s.wrong = append(c.s.wrong, fmt.Sprintf("id %d: got (%q, %t), want (%q, %t)", r.id, r.s, r.valid, want, ok))
		}
	}
	c.s.mu.Unlock()
	if n > c.acked {
		c.acked = n
	}
	off := int64(-1)
	for i, end := range c.frameEnds {
		if end <= n {
			off = int64(i)
		}
	}
	ack := zerobus.Ack{Offset: off, Records: n, CloseStreamAfterMs: closeMs}
	return c.stream.Send(&flight.PutResult{AppMetadata: ack.Marshal()})
}

func (c *call) ackAll() error { return c.ack(int64(len(c.rows)), nil) }

// durableOnly marks rows durable without sending an ack (ack-less Flight servers).
func (c *call) durableOnly() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for _, r := range c.rows[c.acked:] {
		c.s.durable[r.id]++
	}
	c.acked = int64(len(c.rows))
}

func (c *call) sendRaw(b []byte) error { return c.stream.Send(&flight.PutResult{AppMetadata: b}) }

func newServer(t testing.TB, mem memory.Allocator) *server {
	return &server{t: t, mem: mem, table: tableCols, dialect: flightclient.Zerobus,
		durable: map[int64]int{}, peers: map[string]bool{}}
}

// start serves on 127.0.0.1:0 until the test ends. Call it after setting the hooks.
func (s *server) start(t testing.TB, opts ...grpc.ServerOption) string {
	s.addr = serve(t, s, opts...)
	return s.addr
}

// serve serves srv on 127.0.0.1:0 until the test ends and returns its address.
func serve(t testing.TB, srv flight.FlightServer, opts ...grpc.ServerOption) string {
	return flighttest.Serve(t, srv, opts...)
}

func (s *server) endpoint() string { return "grpc://" + s.addr }

func (s *server) DoPut(stream flight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	c := &call{s: s, n: s.ncalls, stream: stream, md: md}
	s.ncalls++
	s.calls = append(s.calls, c)
	if p, ok := peer.FromContext(ctx); ok {
		s.peers[p.Addr.String()] = true
	}
	s.mu.Unlock()

	if s.token != "" && !slices.Equal(md.Get(zerobus.HeaderAuthorization), []string{"Bearer " + s.token}) {
		return status.Error(codes.Unauthenticated, "missing or wrong bearer token")
	}
	if s.dialect == flightclient.Zerobus {
		if got := md.Get(zerobus.HeaderTableName); !slices.Equal(got, []string{tableName.String()}) {
			return status.Errorf(codes.InvalidArgument, "table header %q", got)
		}
	}
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(s.mem))
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "schema frame: %v", err)
	}
	defer rdr.Release()
	c.desc = rdr.LatestFlightDescriptor()
	switch s.dialect {
	case flightclient.Zerobus:
		if c.desc != nil {
			return status.Error(codes.InvalidArgument, "zerobus: unexpected descriptor")
		}
	case flightclient.Flight:
		if c.desc == nil || c.desc.Type != flight.DescriptorPATH || !slices.Equal(c.desc.Path, tableName.Parts()) {
			return status.Errorf(codes.InvalidArgument, "flight: descriptor %v, want PATH %v", c.desc, tableName.Parts())
		}
	}
	if len(rdr.LatestAppMetadata()) != 0 {
		return status.Error(codes.InvalidArgument, "schema frame with app_metadata")
	}
	if se := zerobus.ValidateSchema(s.table, rdr.Schema()); se != nil {
		return se // InvalidArgument with the SCHEMA_VALIDATION_FAILED ErrorInfo
	}
	if s.onSetup != nil {
		if err := s.onSetup(c); err != nil {
			return err
		}
	}
	if s.dialect == flightclient.Zerobus || s.flightReady {
		if err := c.sendRaw(zerobus.Ready().Marshal()); err != nil {
			return err
		}
	}
	for rdr.Next() {
		off, err := zerobus.ParseFrameMetadata(rdr.LatestAppMetadata())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if want := int64(len(c.frameEnds)); off != want {
			return zerobus.NonIncrementalOffsetError(want, off)
		}
		rec := rdr.RecordBatch()
		ids := rec.Column(0).(*array.Int64)
		ss := rec.Column(1).(*array.LargeString)
		for i := range int(rec.NumRows()) {
			c.rows = append(c.rows, row{id: ids.Value(i), s: ss.Value(i), valid: ss.IsValid(i)})
		}
		c.frameEnds = append(c.frameEnds, int64(len(c.rows)))
		hook := s.onFrame
		if hook == nil {
			hook = (*call).defaultFrame
		}
		if err := hook(c); err != nil {
			if errors.Is(err, errEndOK) {
				return nil
			}
			return err
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	if s.onEOF != nil {
		return s.onEOF(c)
	}
	return c.defaultFrame()
}

func (c *call) defaultFrame() error {
	if c.s.dialect == flightclient.Flight && c.s.flightAckless {
		return nil
	}
	return c.ackAll()
}

// eofAckless is the onEOF of an ack-less Flight server: everything received becomes durable.
func eofAckless(c *call) error {
	c.durableOnly()
	return nil
}

// checkDurable asserts that rows 0..n-1 are durable exactly once with the source's values.
func (s *server) checkDurable(t *testing.T, n int64) {
	t.Helper()
	missing, dup, distinct := s.durableCounts(t, n)
	if missing > 0 || dup > 0 || int64(distinct) != n {
		t.Errorf("durable rows: %d missing, %d duplicated, %d distinct; want each of %d rows once", missing, dup, distinct, n)
	}
}

// checkDurableAtLeastOnce asserts that rows 0..n-1 are all durable, with the source's values; rows may
// be stored twice (at-least-once delivery after a timeout that raced an acknowledgement).
func (s *server) checkDurableAtLeastOnce(t *testing.T, n int64) {
	t.Helper()
	missing, _, distinct := s.durableCounts(t, n)
	if missing > 0 || int64(distinct) != n {
		t.Errorf("durable rows: %d missing, %d distinct; want all %d rows", missing, distinct, n)
	}
}

// durableCounts fails t for each durable row with wrong values and counts, of rows 0..n-1, those
// not durable and those durable more than once, and the distinct rows durable.
func (s *server) durableCounts(t *testing.T, n int64) (missing, dup, distinct int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.wrong {
		t.Errorf("durable row with wrong values: %s", w)
	}
	for id := range n {
		switch c := s.durable[id]; {
		case c == 0:
			missing++
		case c > 1:
			dup++
		}
	}
	return missing, dup, len(s.durable)
}

func (s *server) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ncalls
}

func (s *server) call(i int) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[i]
}

// testClient makes a client for the server with test-friendly timings.
func testClient(t testing.TB, endpoint string, dialect flightclient.Dialect, opts ...flightclient.Option) *flightclient.Client {
	t.Helper()
	base := []flightclient.Option{flightclient.WithRetry(3, 1e6, 4e6)} // 1 ms base, 4 ms max
	c, err := flightclient.New(endpoint, dialect, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// load runs Load over the fixture's frames.
func load(ctx context.Context, t *testing.T, c *flightclient.Client, fx *fixture, streams int) (flightclient.Stats, *ackLog, error) {
	t.Helper()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := &ackLog{}
	stats, err := c.Load(ctx, tableName, fx.enc.Schema(), fx.enc, streams, produce(pctx, fx.frames), log.acked)
	log.close()
	return stats, log, err
}

// loadAll runs Load over the fixture's frames, which must succeed with every frame reported once.
func loadAll(ctx context.Context, t *testing.T, c *flightclient.Client, fx *fixture, streams int) (flightclient.Stats, *ackLog) {
	t.Helper()
	stats, log, err := load(ctx, t, c, fx, streams)
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	log.check(t, fx)
	return stats, log
}

// errEndOK, returned by onFrame, ends the call with status OK right away.
var errEndOK = errors.New("end the call OK")

// arrowSchema is the table's canonical schema.
func arrowSchema() *arrow.Schema { return tableCols.Arrow() }
