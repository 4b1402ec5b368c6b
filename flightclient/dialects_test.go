package flightclient_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/zerobus"
)

func TestFlightDialectWithAcks(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.dialect = flightclient.Flight
	srv.flightReady = true // like the embedded sink
	srv.onFrame = func(c *call) error {
		if len(c.frameEnds)%2 == 0 {
			return c.ackAll()
		}
		return nil
	}
	srv.start(t)
	fx := newFixture(t, mem, 3000, 2<<10)
	c := testClient(t, srv.endpoint(), flightclient.Flight, flightclient.WithConnections(2))
	stats, _ := loadAll(t.Context(), t, c, fx, 3)
	srv.checkDurable(t, fx.rows)
	if stats.Retries != 0 {
		t.Errorf("Stats.Retries = %d; want 0", stats.Retries)
	}
}

// TestFlightDialectAckless loads into a server that never answers: frames are acknowledged when a
// call ends OK, calls are bounded by bytes, and a failed call is replayed whole.
func TestFlightDialectAckless(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.dialect = flightclient.Flight
	srv.flightAckless = true
	srv.onFrame = func(c *call) error {
		if c.n == 1 && len(c.frameEnds) == 2 {
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	}
	srv.onEOF = eofAckless
	srv.start(t)
	fx := newFixture(t, mem, 3000, 2<<10)
	callBytes := 5 * int64(fx.frames[0].Size())
	c := testClient(t, srv.endpoint(), flightclient.Flight, flightclient.WithCallBytes(callBytes))
	stats, _ := loadAll(t.Context(), t, c, fx, 1)
	srv.checkDurable(t, fx.rows)
	if minCalls := int64(len(fx.frames)/5 + 1); stats.Calls < minCalls {
		t.Errorf("Stats.Calls = %d; want at least %d (calls of at most 5 frames)", stats.Calls, minCalls)
	}
	if stats.Retries != 1 {
		t.Errorf("Stats.Retries = %d; want 1", stats.Retries)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, cl := range srv.calls {
		if len(cl.frameEnds) > 5 {
			t.Errorf("call %d carried %d frames; want at most 5", cl.n, len(cl.frameEnds))
		}
	}
}

// idleProducer sends the first n frames, waits until they were all reported, then sends the rest:
// with a target that acknowledges only at the end of a call, only an idle flush gets it past the wait.
func idleProducer(ctx context.Context, frames []*partitioner.Frame, n int, reported <-chan struct{}) <-chan *partitioner.Frame {
	ch := make(chan *partitioner.Frame)
	go func() {
		defer close(ch)
		for i, f := range frames {
			if i == n {
				for range n {
					select {
					case <-reported:
					case <-ctx.Done():
						return
					}
				}
			}
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

func TestIdleFlush(t *testing.T) {
	for _, dialect := range []flightclient.Dialect{flightclient.Flight, flightclient.FlightSQL} {
		t.Run(string(dialect), func(t *testing.T) {
			mem := checked(t)
			fx := newFixture(t, mem, 1000, 2<<10)
			var endpoint string
			var check func()
			switch dialect {
			case flightclient.Flight:
				srv := newServer(t, mem)
				srv.dialect = flightclient.Flight
				srv.flightAckless = true
				srv.onEOF = eofAckless
				srv.start(t)
				endpoint, check = srv.endpoint(), func() { srv.checkDurable(t, fx.rows) }
			default:
				srv := newSQLServer(mem)
				endpoint = srv.start(t)
				check = func() { srv.checkDurable(t, fx.rows) }
			}
			c := testClient(t, endpoint, dialect, flightclient.WithIdleFlush(20*time.Millisecond))
			// Bound the test: without the idle flush the producer would wait forever.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			reported := make(chan struct{}, len(fx.frames))
			log := &ackLog{}
			_, err := c.Load(ctx, tableName, arrowSchema(), fx.enc, 1, idleProducer(ctx, fx.frames, 3, reported), func(f *partitioner.Frame) {
				log.acked(f)
				reported <- struct{}{}
			})
			log.close()
			if err != nil {
				t.Fatalf("Load() = %v (an idle call was not ended)", err)
			}
			log.check(t, fx)
			check()
		})
	}
}

// sqlServer is a Flight SQL server with bulk ingest, built on flightsql.BaseServer.
type sqlServer struct {
	flightsql.BaseServer
	mem memory.Allocator

	failCall   int   // the call (from 1) that fails with Unavailable after reading its frames; 0 for none
	countDelta int64 // added to the record count returned

	mu      sync.Mutex
	calls   int
	cmds    []flightsql.StatementIngest
	frames  []int // frames per call
	durable map[int64]int
	wrong   []string
}

func newSQLServer(mem memory.Allocator) *sqlServer {
	return &sqlServer{mem: mem, durable: map[int64]int{}}
}

func (s *sqlServer) start(t testing.TB) string {
	s.Alloc = s.mem
	return "grpc://" + serve(t, flightsql.NewFlightServerWithAllocator(s, s.mem))
}

func (s *sqlServer) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.cmds = append(s.cmds, cmd)
	s.mu.Unlock()
	var rows []row
	frames := 0
	for rdr.Next() {
		rec := rdr.RecordBatch()
		frames++
		ids := rec.Column(0).(*array.Int64)
		ss := rec.Column(1).(*array.LargeString)
		for i := range int(rec.NumRows()) {
			rows = append(rows, row{id: ids.Value(i), s: ss.Value(i), valid: ss.IsValid(i)})
		}
	}
	if err := rdr.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frames = append(s.frames, frames)
	if n == s.failCall {
		return 0, status.Error(codes.Unavailable, "injected")
	}
	for _, r := range rows {
		s.durable[r.id]++
		if want, ok := value(r.id); ok != r.valid || want != r.s {
			s.wrong = append(s.wrong, fmt.Sprintf("id %d", r.id))
		}
	}
	return int64(len(rows)) + s.countDelta, nil
}

// GetFlightInfoTables and DoGetTables describe one table, main.sales.orders.
func (s *sqlServer) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc,
		Schema:           flight.SerializeSchema(schema_ref.TablesWithIncludedSchema, s.mem),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}, nil
}

func (s *sqlServer) DoGetTables(_ context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.mem, schema_ref.TablesWithIncludedSchema)
	defer b.Release()
	// A table whose name the pattern also matches ("_" is a LIKE wildcard), then the real one.
	for _, name := range []string{"orders2", tableName.Table} {
		b.Field(0).(*array.StringBuilder).Append(tableName.Catalog)
		b.Field(1).(*array.StringBuilder).Append(tableName.Schema)
		b.Field(2).(*array.StringBuilder).Append(name)
		b.Field(3).(*array.StringBuilder).Append("TABLE")
		sch := arrowSchema()
		if name != tableName.Table {
			sch = arrow.NewSchema([]arrow.Field{{Name: "other", Type: arrow.PrimitiveTypes.Int32}}, nil)
		}
		b.Field(4).(*array.BinaryBuilder).Append(flight.SerializeSchema(sch, s.mem))
	}
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: b.NewRecordBatch()}
	close(ch)
	return schema_ref.TablesWithIncludedSchema, ch, nil
}

func (s *sqlServer) checkDurable(t *testing.T, n int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.wrong) > 0 {
		t.Errorf("%d rows with wrong values, e.g. %s", len(s.wrong), s.wrong[0])
	}
	bad := 0
	for id := range n {
		if s.durable[id] != 1 {
			bad++
		}
	}
	if bad > 0 || int64(len(s.durable)) != n {
		t.Errorf("%d of %d rows not durable exactly once (%d distinct)", bad, n, len(s.durable))
	}
}

func TestFlightSQLIngest(t *testing.T) {
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("create=%t", create), func(t *testing.T) {
			mem := checked(t)
			srv := newSQLServer(mem)
			srv.failCall = 2
			endpoint := srv.start(t)
			fx := newFixture(t, mem, 3000, 2<<10)
			c := testClient(t, endpoint, flightclient.FlightSQL,
				flightclient.WithCallBytes(4*int64(fx.frames[0].Size())), flightclient.WithCreateTable(create))
			stats, _ := loadAll(t.Context(), t, c, fx, 2)
			srv.checkDurable(t, fx.rows)
			if stats.Retries != 1 {
				t.Errorf("Stats.Retries = %d; want 1", stats.Retries)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for i, n := range srv.frames {
				if n > 4 {
					t.Errorf("call %d carried %d frames; want at most 4", i, n)
				}
			}
			wantNotExist := flightsql.TableDefinitionOptionsTableNotExistOptionFail
			if create {
				wantNotExist = flightsql.TableDefinitionOptionsTableNotExistOptionCreate
			}
			for i, cmd := range srv.cmds {
				opts := cmd.GetTableDefinitionOptions()
				if cmd.GetCatalog() != tableName.Catalog || cmd.GetSchema() != tableName.Schema || cmd.GetTable() != tableName.Table ||
					opts.GetIfExists() != flightsql.TableDefinitionOptionsTableExistsOptionAppend || opts.GetIfNotExist() != wantNotExist {
					t.Errorf("call %d: CommandStatementIngest %v; want %s with append / %s", i, cmd, tableName, wantNotExist)
				}
			}
		})
	}
}

func TestFlightSQLCountMismatch(t *testing.T) {
	mem := checked(t)
	srv := newSQLServer(mem)
	srv.countDelta = -1
	endpoint := srv.start(t)
	fx := newFixture(t, mem, 100, 1<<20)
	c := testClient(t, endpoint, flightclient.FlightSQL)
	stats, log, err := load(t.Context(), t, c, fx, 1)
	if !errors.Is(err, zerobus.ErrProtocol) {
		t.Fatalf("Load() = %v; want a protocol error for a wrong record count", err)
	}
	if stats.Retries != 0 || len(log.frames) != 0 {
		t.Errorf("Stats.Retries = %d, %d frames reported; want none", stats.Retries, len(log.frames))
	}
}

func TestFlightSQLDescribeWithGetTables(t *testing.T) {
	mem := checked(t)
	srv := newSQLServer(mem)
	endpoint := srv.start(t)
	c := testClient(t, endpoint, flightclient.FlightSQL)
	info, err := c.Describe(t.Context(), tableName)
	if err != nil {
		t.Fatalf("Describe() = %v", err)
	}
	if !info.Schema.Equal(tableCols) {
		t.Errorf("Describe() schema %s; want %s", info.Schema.SQL(), tableCols.SQL())
	}
	missing := tableName
	missing.Table = "nope"
	if _, err := c.Describe(t.Context(), missing); !errors.Is(err, flightclient.ErrTableNotFound) {
		t.Errorf("Describe(missing) = %v; want ErrTableNotFound", err)
	}
	if _, err := c.Count(t.Context(), tableName); !errors.Is(err, flightclient.ErrUnsupported) {
		t.Errorf("Count() = %v; want ErrUnsupported", err)
	}
}
