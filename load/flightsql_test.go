package load_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/loaderproject/loader/sink"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/flighttest"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// thirdParty is a Flight SQL server of another make in front of the embedded sink, describing tables
// the way some DuckDB-backed servers do: a nested column reads as utf8 and every column as nullable.
// Ingest and SELECT count(*) go through to the sink, so the rows really land. Its flags turn GetTables
// and statements off, and make its SqlInfo say it runs no SQL.
type thirdParty struct {
	flightsql.BaseServer
	sink *flightsql.Client
	wh   *warehouse.Warehouse

	noTables, noSQL bool
}

func startThirdParty(t *testing.T, wh *warehouse.Warehouse, sinkEndpoint string, tp *thirdParty, sqlInfoNoSQL bool) string {
	t.Helper()
	cl, err := flightsql.NewClient(strings.TrimPrefix(sinkEndpoint, "grpc://"), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	tp.sink, tp.wh, tp.Alloc = cl, wh, memory.DefaultAllocator
	if sqlInfoNoSQL {
		if err := tp.RegisterSqlInfo(flightsql.SqlInfoFlightSqlServerSql, false); err != nil {
			t.Fatal(err)
		}
	}
	return "grpc://" + flighttest.Serve(t, flightsql.NewFlightServer(tp))
}

// lossy is the description such a server gives.
func lossy(s *tableschema.Schema) *arrow.Schema {
	fields := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		typ := f.Type.Arrow()
		switch f.Type.Kind {
		case tableschema.Array, tableschema.Map, tableschema.Struct:
			typ = arrow.BinaryTypes.String
		}
		fields[i] = arrow.Field{Name: f.Name, Type: typ, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

func (tp *thirdParty) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if tp.noTables {
		return nil, status.Error(codes.Unimplemented, "GetTables is not implemented here")
	}
	return &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc, TotalRecords: -1, TotalBytes: -1,
		Schema: flight.SerializeSchema(schema_ref.TablesWithIncludedSchema, memory.DefaultAllocator)}, nil
}

func (tp *thirdParty) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema_ref.TablesWithIncludedSchema)
	defer b.Release()
	names, err := tp.wh.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		if p := cmd.GetTableNameFilterPattern(); p != nil && *p != n.Table {
			continue
		}
		tbl, err := tp.wh.Table(ctx, n)
		if err != nil {
			return nil, nil, err
		}
		s, err := tbl.Schema(ctx)
		if err != nil {
			return nil, nil, err
		}
		b.Field(0).(*array.StringBuilder).Append(n.Catalog)
		b.Field(1).(*array.StringBuilder).Append(n.Schema)
		b.Field(2).(*array.StringBuilder).Append(n.Table)
		b.Field(3).(*array.StringBuilder).Append("BASE TABLE")
		b.Field(4).(*array.BinaryBuilder).Append(flight.SerializeSchema(lossy(s), memory.DefaultAllocator))
	}
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: b.NewRecordBatch()}
	close(ch)
	return schema_ref.TablesWithIncludedSchema, ch, nil
}

func (tp *thirdParty) GetFlightInfoStatement(_ context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if tp.noSQL {
		return nil, status.Error(codes.Unimplemented, "statements are not implemented here")
	}
	tkt, err := flightsql.CreateStatementQueryTicket([]byte(cmd.GetQuery()))
	if err != nil {
		return nil, err
	}
	return &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		FlightDescriptor: desc, TotalRecords: -1, TotalBytes: -1}, nil
}

func (tp *thirdParty) DoGetStatement(ctx context.Context, cmd flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	info, err := tp.sink.Execute(ctx, string(cmd.GetStatementHandle()))
	if err != nil {
		return nil, nil, err
	}
	rdr, err := tp.sink.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		return nil, nil, err
	}
	defer rdr.Release()
	if !rdr.Next() {
		return nil, nil, status.Errorf(codes.Internal, "the sink returned no count: %v", rdr.Err())
	}
	rec := rdr.RecordBatch()
	rec.Retain()
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return rec.Schema(), ch, nil
}

// DoPutCommandStatementIngest passes the call on to the sink, schema first even when no batch
// follows (an ingest of no rows creates a table).
func (tp *thirdParty) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	catalog, schema := cmd.GetCatalog(), cmd.GetSchema()
	packed, err := anypb.New(&pb.CommandStatementIngest{
		TableDefinitionOptions: cmd.GetTableDefinitionOptions(), Table: cmd.GetTable(), Catalog: &catalog, Schema: &schema})
	if err != nil {
		return 0, err
	}
	desc, err := proto.Marshal(packed)
	if err != nil {
		return 0, err
	}
	stream, err := tp.sink.Client.DoPut(ctx)
	if err != nil {
		return 0, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rdr.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: desc})
	for rdr.Next() {
		if err := w.Write(rdr.RecordBatch()); err != nil {
			break // the sink's status comes from Recv
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	var n int64
	for {
		res, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, rdr.Err()
			}
			return 0, err
		}
		var r pb.DoPutUpdateResult
		if err := proto.Unmarshal(res.GetAppMetadata(), &r); err != nil {
			return 0, err
		}
		n = r.GetRecordCount()
	}
}

// flightSQLFiles writes n rows of the fixture as three Parquet files.
func flightSQLFiles(t *testing.T, n int64) string {
	t.Helper()
	data := t.TempDir()
	for i := range int64(3) {
		if err := fixture.WriteParquet(filepath.Join(data, "part-"+string(rune('a'+i))+".parquet"), i*n/3, n/3, 250); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// logTo returns a logger writing text lines at warn level and above into buf.
func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestFlightSQLCreateTable: with CreateTable, a Flight SQL target creates the missing table (an
// ingest of no rows that asks to create it), with the given columns or the first file's canonical
// ones, then takes the rows and verifies the count with SELECT count(*).
func TestFlightSQLCreateTable(t *testing.T) {
	given, err := tableschema.ParseColumns(fixture.TableColumns)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		given *tableschema.Schema
	}{{"given columns", given}, {"first file", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			dir := t.TempDir()
			wh, err := warehouse.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, endpoint := startSink(t, wh)
			cfg := baseConfig(t, mem, flightSQLFiles(t, 1500))
			cfg.Endpoint, cfg.Protocol, cfg.CreateTable, cfg.TableSchema = endpoint, flightclient.FlightSQL, true, tt.given
			sum := run(t, cfg)
			if sum.Rows != 1500 || sum.VerifiedRows == nil || *sum.VerifiedRows != 1500 {
				t.Errorf("summary = %+v; want 1500 rows, verified", sum)
			}
			tbl, err := wh.Table(t.Context(), table)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tbl.Schema(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := tt.given
			if want == nil {
				if want, err = tableschema.FromArrow(fixture.SourceSchema()); err != nil {
					t.Fatal(err)
				}
			}
			if !got.Equal(want) {
				t.Errorf("created table %s; want %s", got.SQL(), want.SQL())
			}
			if tt.given != nil {
				checkTable(t, dir, fixture.IDs(0, 1500), fixture.Expected)
			}
		})
	}
}

// TestFlightSQLLossyDescription: a server that describes a list column as utf8 and every column as
// nullable makes a file with that list refused, with an error that says what the server described
// and why that looks lossy; giving the real columns overrides the description, with one warning, and
// the load goes through and is verified.
func TestFlightSQLLossyDescription(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_, sinkEndpoint := startSink(t, wh)
	endpoint := startThirdParty(t, wh, sinkEndpoint, &thirdParty{}, false)
	cfg := baseConfig(t, mem, flightSQLFiles(t, 900))
	cfg.Endpoint, cfg.Protocol = endpoint, flightclient.FlightSQL

	_, err := load.Run(t.Context(), cfg)
	var le *load.LossyDescriptionError
	if !errors.As(err, &le) {
		t.Fatalf("Run = %v; want a LossyDescriptionError", err)
	}
	if m := fixture.Missing(err.Error(), "arr STRING", `column "arr" is described as STRING but the file has list<`,
		`every column is described as nullable, but the file says "id" is not`); len(m) > 0 {
		t.Errorf("Run = %v; lacks %q", err, m)
	}

	var logs bytes.Buffer
	cfg.Logger = logTo(&logs)
	if cfg.TableSchema, err = tableschema.ParseColumns(fixture.TableColumns); err != nil {
		t.Fatal(err)
	}
	sum := run(t, cfg)
	if sum.Rows != 900 || sum.VerifiedRows == nil || *sum.VerifiedRows != 900 {
		t.Errorf("summary = %+v; want 900 rows, verified", sum)
	}
	checkTable(t, dir, fixture.IDs(0, 900), fixture.Expected)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "differs from the target's description") {
		t.Errorf("log = %q; want one warning that the given schema differs from the description", logs.String())
	}
}

// TestFlightSQLWithoutGetTablesOrSQL: a server without GetTables and without statements still takes
// a load, into the columns given (or the first file's); it is not verified, and the summary says why.
func TestFlightSQLWithoutGetTablesOrSQL(t *testing.T) {
	for _, tt := range []struct {
		name         string
		sqlInfoNoSQL bool
		why          string
	}{
		{"statements unimplemented", false, "did not run SELECT count(*)"},
		{"SqlInfo says no SQL", true, "FLIGHT_SQL_SERVER_SQL is false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			dir, wh := newWarehouse(t, fixture.TableColumns)
			_, sinkEndpoint := startSink(t, wh)
			endpoint := startThirdParty(t, wh, sinkEndpoint, &thirdParty{noTables: true, noSQL: true}, tt.sqlInfoNoSQL)
			data := flightSQLFiles(t, 600)
			cfg := baseConfig(t, mem, data)
			cfg.Endpoint, cfg.Protocol = endpoint, flightclient.FlightSQL
			sum := run(t, cfg) // the first file's canonical columns, assumed
			if sum.Rows != 600 || sum.VerifiedRows != nil || !strings.Contains(sum.NotVerified, tt.why) {
				t.Errorf("summary = %+v; want 600 rows, not verified because %q", sum, tt.why)
			}
			checkTable(t, dir, fixture.IDs(0, 600), fixture.Expected)

			// A partial load keeps the reason: it is why, not that a file failed.
			if err := os.WriteFile(filepath.Join(data, "zz-broken.parquet"), []byte("PAR1 not parquet PAR1"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg.OnError, cfg.Force = load.OnErrorSkipFile, true
			sum, err := load.Run(t.Context(), cfg)
			if !errors.Is(err, load.ErrPartial) || !strings.Contains(sum.NotVerified, tt.why) || sum.Error == "" {
				t.Errorf("partial load = %v, %+v; want ErrPartial, not verified because %q, the error in the summary", err, sum, tt.why)
			}
		})
	}
}

// TestFlightSQLOverride: against the sink's own Flight SQL service, which describes the table
// faithfully, given columns that differ (the nullable "extra" left out) are used instead, with one
// warning saying so; the load is verified with SELECT count(*).
func TestFlightSQLOverride(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir, wh := newWarehouse(t, fixture.TableColumns)
	_, endpoint := startSink(t, wh)
	cfg := baseConfig(t, mem, flightSQLFiles(t, 300))
	cfg.Endpoint, cfg.Protocol = endpoint, flightclient.FlightSQL
	given, err := tableschema.ParseColumns(strings.TrimSuffix(fixture.TableColumns, ", extra STRING"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.TableSchema = given
	var logs bytes.Buffer
	cfg.Logger = logTo(&logs)
	sum := run(t, cfg)
	if sum.Rows != 300 || sum.VerifiedRows == nil || *sum.VerifiedRows != 300 {
		t.Errorf("summary = %+v; want 300 rows, verified", sum)
	}
	checkTable(t, dir, fixture.IDs(0, 300), fixture.Expected)
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "differs from the target's description") ||
		!strings.Contains(logs.String(), "extra STRING") {
		t.Errorf("log = %q; want one warning naming both schemas", logs.String())
	}
}

// txnCounter counts the sink's log records of committed ingest transactions.
type txnCounter struct{ n atomic.Int64 }

func (c *txnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *txnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "sink: Flight SQL ingest transaction committed" {
		c.n.Add(1)
	}
	return nil
}
func (c *txnCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *txnCounter) WithGroup(string) slog.Handler      { return c }

// TestFlightSQLIngestInTransactions: the sink advertises ingest transactions, so each bounded
// ingest call runs in one, committed when the call ends OK; the table holds each row once.
func TestFlightSQLIngestInTransactions(t *testing.T) {
	dir, wh := newWarehouse(t, fixture.TableColumns)
	var txns txnCounter
	_, endpoint := startSink(t, wh, sink.WithLogger(slog.New(&txns)))
	cfg := baseConfig(t, memory.DefaultAllocator, faultSource(t, 3000))
	cfg.Endpoint, cfg.Protocol = endpoint, flightclient.FlightSQL
	sum := run(t, cfg)
	if sum.Rows != 3000 || sum.VerifiedRows == nil || *sum.VerifiedRows != 3000 {
		t.Errorf("summary = %+v; want 3000 rows, verified", sum)
	}
	if txns.n.Load() == 0 {
		t.Error("no ingest transaction was committed")
	}
	checkTable(t, dir, fixture.IDs(0, 3000), fixture.Expected)
}
