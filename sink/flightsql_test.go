package sink_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
)

// sqlSource is what a typical Flight SQL client sends: utf8, nanosecond timestamps, float32.
var sqlSource = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
}, nil)

func sqlBatch(t testing.TB, mem memory.Allocator, schema *arrow.Schema, from, n int) arrow.RecordBatch {
	t.Helper()
	var rows []string
	for id := from; id < from+n; id++ {
		if id%4 == 1 {
			rows = append(rows, fmt.Sprintf(`{"id":%d,"name":null,"at":null,"score":null}`, id))
			continue
		}
		rows = append(rows, fmt.Sprintf(`{"id":%d,"name":"n%d","at":%d,"score":%g}`, id, id, int64(1_700_000_000_000_000_000)+int64(id)*1000, float32(id)/2))
	}
	rec, _, err := array.RecordFromJSON(mem, schema, strings.NewReader("["+strings.Join(rows, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// sqlExpected is sqlBatch's rows as read back from the created table (canonical types: large_utf8,
// microsecond timestamps).
func sqlExpected(from, n int) map[int64]string {
	out := map[int64]string{}
	for id := from; id < from+n; id++ {
		if id%4 == 1 {
			out[int64(id)] = fmt.Sprintf(`{"at":null,"id":%d,"name":null,"score":null}`, id)
			continue
		}
		us := int64(1_700_000_000_000_000) + int64(id)
		at := arrow.Timestamp(us).ToTime(arrow.Microsecond).UTC().Format("2006-01-02T15:04:05.999999999Z")
		out[int64(id)] = fmt.Sprintf(`{"at":"%s","id":%d,"name":"n%d","score":%g}`, at, id, id, float32(id)/2)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func opts(ifNotExist flightsql.TableDefinitionOptionsTableNotExistOption, ifExists flightsql.TableDefinitionOptionsTableExistsOption) *flightsql.TableDefinitionOptions {
	return &flightsql.TableDefinitionOptions{IfNotExist: ifNotExist, IfExists: ifExists}
}

// TestFlightSQLIngest drives bulk ingest with arrow-go's flightsql.Client.
func TestFlightSQLIngest(t *testing.T) {
	e := start(t, "")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cl := &flightsql.Client{Client: flight.NewClientFromConn(e.conn, nil), Alloc: mem}
	const (
		create  = flightsql.TableDefinitionOptionsTableNotExistOptionCreate
		failNE  = flightsql.TableDefinitionOptionsTableNotExistOptionFail
		failEx  = flightsql.TableDefinitionOptionsTableExistsOptionFail
		appendO = flightsql.TableDefinitionOptionsTableExistsOptionAppend
		replace = flightsql.TableDefinitionOptionsTableExistsOptionReplace
	)
	name := tableschema.TableName{Catalog: "main", Schema: "sales", Table: "orders"}
	ingest := func(req *flightsql.ExecuteIngestOpts, schema *arrow.Schema, from, n int) (int64, error) {
		rec := sqlBatch(t, mem, schema, from, n)
		defer rec.Release()
		empty := rec.NewSlice(0, 0) // an empty batch too: it must not upset the count
		defer empty.Release()
		rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec, empty})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		return cl.ExecuteIngest(t.Context(), rdr, req)
	}

	steps := []struct {
		name    string
		req     *flightsql.ExecuteIngestOpts
		from, n int
		code    codes.Code
		total   int64
	}{
		{"append to missing table", &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TableDefinitionOptions: opts(failNE, appendO)}, 0, 10, codes.NotFound, -1},
		{"create", &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TableDefinitionOptions: opts(create, failEx)}, 0, 100, codes.OK, 100},
		{"create again fails", &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TableDefinitionOptions: opts(create, failEx)}, 100, 10, codes.AlreadyExists, 100},
		{"append", &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TableDefinitionOptions: opts(failNE, appendO)}, 100, 50, codes.OK, 150},
		{"temporary", &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), Temporary: true, TableDefinitionOptions: opts(failNE, appendO)}, 0, 1, codes.Unimplemented, 150},
		{"transaction", &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TransactionId: []byte("tx"), TableDefinitionOptions: opts(failNE, appendO)}, 0, 1, codes.NotFound, 150},
		{"unspecified if_exists", &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TableDefinitionOptions: &flightsql.TableDefinitionOptions{}}, 0, 1, codes.InvalidArgument, 150},
	}
	for _, s := range steps {
		n, err := ingest(s.req, sqlSource, s.from, s.n)
		if got := status.Code(err); got != s.code {
			t.Fatalf("%s: ExecuteIngest = %d, %v; want %v", s.name, n, err, s.code)
		}
		if s.code == codes.OK && n != int64(s.n) {
			t.Errorf("%s: ExecuteIngest = %d rows; want %d", s.name, n, s.n)
		}
		if s.total >= 0 {
			if c := e.flushCount(name); c.Committed != s.total {
				t.Errorf("%s: committed %d; want %d", s.name, c.Committed, s.total)
			}
		}
	}
	want := sqlExpected(0, 150)
	sameRows(t, scan(t, e.wh, name), want)
	var info sinkapi.TableInfo
	if err := e.action(t.Context(), sinkapi.ActionDescribe, []byte(name.String()), &info); err != nil {
		t.Fatal(err)
	}
	if info.Columns != "id BIGINT NOT NULL, name STRING, at TIMESTAMP, score FLOAT" {
		t.Errorf("created columns = %q", info.Columns)
	}

	// An append whose types cannot be cast is refused naming the column.
	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	brec, _, _ := array.RecordFromJSON(mem, bad, strings.NewReader(`[{"id":"x"}]`))
	brdr, _ := array.NewRecordReader(bad, []arrow.RecordBatch{brec})
	_, err := cl.ExecuteIngest(t.Context(), brdr, &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TableDefinitionOptions: opts(failNE, appendO)})
	brec.Release()
	brdr.Release()
	if s := statusOf(t, err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "id") {
		t.Errorf("mismatched append = %v; want InvalidArgument naming id", err)
	}

	// Replace with another schema: the old rows go, the schema changes.
	wider := arrow.NewSchema(append(sqlSource.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), nil)
	if n, err := ingest(&flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"), TableDefinitionOptions: opts(create, replace)}, wider, 500, 20); err != nil || n != 20 {
		t.Fatalf("replace = %d, %v", n, err)
	}
	if c := e.flushCount(name); c.Committed != 20 {
		t.Errorf("after replace committed %d; want 20", c.Committed)
	}
	if err := e.action(t.Context(), sinkapi.ActionDescribe, []byte(name.String()), &info); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.Columns, "extra INT") {
		t.Errorf("columns after replace = %q; want the new extra column", info.Columns)
	}

	// Default catalog and schema.
	if n, err := ingest(&flightsql.ExecuteIngestOpts{Table: "plain", TableDefinitionOptions: opts(create, failEx)}, sqlSource, 0, 5); err != nil || n != 5 {
		t.Fatalf("ingest without catalog/schema = %d, %v", n, err)
	}
	if c := e.flushCount(tableschema.TableName{Catalog: "main", Schema: "default", Table: "plain"}); c.Committed != 5 {
		t.Errorf("main.default.plain has %d rows; want 5", c.Committed)
	}

	checkSqlInfo(t, cl, mem)
}

// checkSqlInfo reads GetSqlInfo and checks the bulk-ingest entries.
func checkSqlInfo(t *testing.T, cl *flightsql.Client, mem memory.Allocator) {
	t.Helper()
	info, err := cl.GetSqlInfo(t.Context(), []flightsql.SqlInfo{
		flightsql.SqlInfoFlightSqlServerBulkIngestion,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported,
		flightsql.SqlInfoFlightSqlServerName,
	})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := cl.DoGet(t.Context(), info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	got := map[uint32]any{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		names := rec.Column(0).(*array.Uint32)
		vals := rec.Column(1).(*array.DenseUnion)
		for i := 0; i < int(rec.NumRows()); i++ {
			child := vals.Field(vals.ChildID(i))
			off := int(vals.ValueOffset(i))
			switch c := child.(type) {
			case *array.Boolean:
				got[names.Value(i)] = c.Value(off)
			case *array.String:
				got[names.Value(i)] = c.Value(off)
			}
		}
	}
	if got[uint32(flightsql.SqlInfoFlightSqlServerBulkIngestion)] != true ||
		got[uint32(flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported)] != true ||
		got[uint32(flightsql.SqlInfoFlightSqlServerName)] != sink.ServerName {
		t.Errorf("GetSqlInfo = %v; want bulk ingestion true, ingest transactions true, the server name", got)
	}
}

// TestADBCIngest drives bulk ingest with the ADBC Go Flight SQL driver.
func TestADBCIngest(t *testing.T) {
	e := start(t, "", sink.WithTokens("tok"))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	drv := adbcflightsql.NewDriver(mem)
	db, err := drv.NewDatabase(map[string]string{
		adbc.OptionKeyURI:                       "grpc://" + e.addr,
		adbcflightsql.OptionAuthorizationHeader: "Bearer tok",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	cnxn, err := db.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cnxn.Close()

	run := func(mode string, catalog, schema string, from, n int) (int64, error) {
		stmt, err := cnxn.NewStatement()
		if err != nil {
			t.Fatal(err)
		}
		defer stmt.Close()
		for k, v := range map[string]string{
			adbc.OptionKeyIngestTargetTable:      "adbc_t",
			adbc.OptionKeyIngestMode:             mode,
			adbc.OptionValueIngestTargetCatalog:  catalog,
			adbc.OptionValueIngestTargetDBSchema: schema,
		} {
			if err := stmt.SetOption(k, v); err != nil {
				t.Fatal(err)
			}
		}
		// BindStream rather than Bind: the driver's Bind path wraps the batch in a reader it never
		// releases (a client-side leak the checked allocator would report).
		rec := sqlBatch(t, mem, sqlSource, from, n)
		defer rec.Release()
		rdr, err := array.NewRecordReader(sqlSource, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		if err := stmt.BindStream(ctx, rdr); err != nil {
			t.Fatal(err)
		}
		return stmt.ExecuteUpdate(ctx)
	}
	name := tableschema.TableName{Catalog: "lake", Schema: "bronze", Table: "adbc_t"}
	for _, s := range []struct {
		mode    string
		from, n int
		ok      bool
		total   int64
	}{
		{adbc.OptionValueIngestModeAppend, 0, 5, false, -1},
		{adbc.OptionValueIngestModeCreate, 0, 40, true, 40},
		{adbc.OptionValueIngestModeCreate, 40, 5, false, 40},
		{adbc.OptionValueIngestModeAppend, 40, 20, true, 60},
		{adbc.OptionValueIngestModeCreateAppend, 60, 10, true, 70},
		{adbc.OptionValueIngestModeReplace, 100, 7, true, 7},
	} {
		n, err := run(s.mode, "lake", "bronze", s.from, s.n)
		if (err == nil) != s.ok {
			t.Fatalf("%s: ExecuteUpdate = %d, %v; want ok=%v", s.mode, n, err, s.ok)
		}
		if s.ok && n != int64(s.n) {
			t.Errorf("%s: %d rows; want %d", s.mode, n, s.n)
		}
		if s.total >= 0 {
			var c sinkapi.CountResult
			if err := e.action(withAuth(ctx, "tok"), sinkapi.ActionCount, []byte(name.String()), &c); err != nil {
				t.Fatal(err)
			}
			if c.Committed != s.total {
				t.Errorf("%s: table has %d rows; want %d", s.mode, c.Committed, s.total)
			}
		}
	}
	sameRows(t, scan(t, e.wh, name), sqlExpected(100, 7))

	// The catalog commands: ADBC's GetTableSchema and GetObjects see the table.
	got, err := cnxn.GetTableSchema(ctx, ptr("lake"), ptr("bronze"), "adbc_t")
	if err != nil {
		t.Fatalf("GetTableSchema = %v", err)
	}
	want, _ := tableschema.ParseColumns("id BIGINT NOT NULL, name STRING, at TIMESTAMP, score FLOAT")
	if !got.Equal(want.Arrow()) {
		t.Errorf("GetTableSchema = %v; want %v", got, want.Arrow())
	}
	if _, err := cnxn.GetTableSchema(ctx, ptr("lake"), ptr("bronze"), "nope"); err == nil {
		t.Error("GetTableSchema(nope) succeeded")
	}
	objs, err := cnxn.GetObjects(ctx, adbc.ObjectDepthTables, nil, ptr("bron%"), ptr("adbc_%"), nil, nil)
	if err != nil {
		t.Fatalf("GetObjects = %v", err)
	}
	var js strings.Builder
	for objs.Next() {
		if err := array.RecordToJSON(objs.RecordBatch(), &js); err != nil {
			t.Fatal(err)
		}
	}
	objs.Release()
	if m := contains(js.String(), `"catalog_name":"lake"`, `"db_schema_name":"bronze"`, `"table_name":"adbc_t"`, `"table_type":"TABLE"`); len(m) > 0 {
		t.Errorf("GetObjects = %s; lacks %v", js.String(), m)
	}
}

// TestFlightSQLUnsupported: other Flight SQL commands answer clearly.
func TestFlightSQLUnsupported(t *testing.T) {
	e := start(t, "")
	cl := &flightsql.Client{Client: flight.NewClientFromConn(e.conn, nil), Alloc: memory.DefaultAllocator}
	if _, err := cl.Execute(t.Context(), "SELECT 1"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "SELECT count(*) FROM <table>") {
		t.Errorf("Execute(SELECT 1) = %v; want InvalidArgument naming the one statement the sink runs", err)
	}
}

// TestFlightSQLIngestTransaction: an ingest call in a transaction is visible only once the
// transaction commits, and never after a rollback; a transaction takes one ingest call.
func TestFlightSQLIngestTransaction(t *testing.T) {
	e := start(t, "")
	cl := &flightsql.Client{Client: flight.NewClientFromConn(e.conn, nil), Alloc: memory.DefaultAllocator}
	name := tableschema.TableName{Catalog: "main", Schema: "sales", Table: "orders"}
	opts := &flightsql.TableDefinitionOptions{IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionCreate,
		IfExists: flightsql.TableDefinitionOptionsTableExistsOptionAppend}
	ingest := func(tx *flightsql.Txn, from, n int) (int64, error) {
		rec := sqlBatch(t, memory.DefaultAllocator, sqlSource, from, n)
		defer rec.Release()
		rdr, err := array.NewRecordReader(sqlSource, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		return cl.ExecuteIngest(t.Context(), rdr, &flightsql.ExecuteIngestOpts{Table: "orders", Catalog: ptr("main"), Schema: ptr("sales"),
			TransactionId: tx.ID(), TableDefinitionOptions: opts})
	}
	tx, err := cl.BeginTransaction(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ingest(tx, 0, 40); err != nil || n != 40 {
		t.Fatalf("ingest in a transaction = %d, %v", n, err)
	}
	if _, err := ingest(tx, 40, 5); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second ingest in the transaction = %v; want FailedPrecondition", err)
	}
	if c := e.flushCount(name); c.Committed != 0 {
		t.Errorf("before the commit: %d rows visible; want 0", c.Committed)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := e.flushCount(name); c.Committed != 40 {
		t.Errorf("after the commit: %d rows; want 40", c.Committed)
	}
	tx2, err := cl.BeginTransaction(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest(tx2, 40, 10); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := e.flushCount(name); c.Committed != 40 {
		t.Errorf("after a rollback: %d rows; want 40", c.Committed)
	}
	sameRows(t, scan(t, e.wh, name), sqlExpected(0, 40))
}

// TestFlightSQLIngestMemoryLimit: a compressed buffer claiming 200 GiB decompressed fails the
// ingest call with InvalidArgument; it is not allocated (which would crash the whole process).
func TestFlightSQLIngestMemoryLimit(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.bomb", "v BIGINT NOT NULL")
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range 1000 {
		b.Append(int64(i))
	}
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(ts.Arrow(), []arrow.Array{col}, 1000)
	col.Release()
	defer rec.Release()
	schemaFrame, data := encode(t, ts.Arrow(), []arrow.RecordBatch{rec}, ipc.WithZstd())
	body := bytes.Clone(data[0].DataBody)
	claimed := false
	for off := 0; off+8 <= len(body); off += 8 { // each compressed buffer starts with its decompressed length
		if binary.LittleEndian.Uint64(body[off:]) == 8000 {
			binary.LittleEndian.PutUint64(body[off:], 200<<30)
			claimed = true
		}
	}
	if !claimed {
		t.Fatal("no compressed buffer of 8000 bytes to enlarge")
	}

	packed, err := anypb.New(&pb.CommandStatementIngest{Table: name.Table, Schema: &name.Schema, Catalog: &name.Catalog,
		TableDefinitionOptions: &pb.CommandStatementIngest_TableDefinitionOptions{
			IfNotExist: pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_FAIL,
			IfExists:   pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_APPEND,
		}})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := proto.Marshal(packed)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.client.DoPut(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range []*flight.FlightData{
		{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}, DataHeader: schemaFrame.DataHeader},
		{DataHeader: data[0].DataHeader, DataBody: body},
	} {
		if err := st.Send(fd); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
	}
	st.CloseSend()
	_, err = putResults(st) // the row count (0), then the call's error
	if s := statusOf(t, err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "allocate more than") {
		t.Errorf("ingest of a 200 GiB claim = %v; want InvalidArgument naming the memory limit", err)
	}
	if c := e.flushCount(name); c.Committed != 0 {
		t.Errorf("committed %d rows; want 0", c.Committed)
	}
}

// countRows runs a statement and reads its one integer.
func countRows(t *testing.T, cl *flightsql.Client, query string) (int64, error) {
	t.Helper()
	info, err := cl.Execute(t.Context(), query)
	if err != nil {
		return 0, err
	}
	rdr, err := cl.DoGet(t.Context(), info.Endpoint[0].Ticket)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var got []int64
	for rdr.Next() {
		got = append(got, rdr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		return 0, err
	}
	if len(got) != 1 {
		t.Fatalf("%s returned %d rows; want 1", query, len(got))
	}
	return got[0], nil
}

// TestFlightSQLCount: SELECT count(*) counts every acknowledged row (committing the log's first), in
// the spellings clients use; other tables and statements fail clearly.
func TestFlightSQLCount(t *testing.T) {
	e := start(t, "", sink.WithCommitInterval(time.Hour)) // nothing commits unless asked
	name, ts := e.createTable("main.sales.orders", "id BIGINT NOT NULL, s STRING")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batch(t, mem, ts.Arrow(), 0, 25)
	defer rec.Release()
	schemaFrame, data := encode(t, ts.Arrow(), []arrow.RecordBatch{rec})
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(withOffset(data[0], 0)); err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
	cl := &flightsql.Client{Client: flight.NewClientFromConn(e.conn, nil), Alloc: mem}
	for _, q := range []string{
		`SELECT count(*) FROM "main"."sales"."orders"`,
		"select COUNT( * ) from main.sales.orders;",
		`SELECT count(1) FROM "main" . sales . "orders"`,
	} {
		if n, err := countRows(t, cl, q); err != nil || n != 25 {
			t.Errorf("%s = %d, %v; want 25", q, n, err)
		}
	}
	if c := e.flushCount(name); c.Committed != 25 || c.Acknowledged != 0 {
		t.Errorf("after the count: %+v; want 25 committed, none left in the log", c)
	}
	e.createTable("main.default.short", "id BIGINT")
	if n, err := countRows(t, cl, "SELECT count(*) FROM short"); err != nil || n != 0 {
		t.Errorf("count of main.default.short by its bare name = %d, %v; want 0", n, err)
	}
	if _, err := cl.Execute(t.Context(), `SELECT count(*) FROM "main"."sales"."nope"`); status.Code(err) != codes.NotFound {
		t.Errorf("count of a missing table = %v; want NotFound", err)
	}
	for _, q := range []string{"SELECT count(*) FROM a.b.c.d", "SELECT count(*) FROM t WHERE 1=1", "DROP TABLE main.sales.orders"} {
		if _, err := cl.Execute(t.Context(), q); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s = %v; want InvalidArgument", q, err)
		}
	}

	discard := start(t, e.wh.Dir(), sink.WithDiscard(true))
	dcl := &flightsql.Client{Client: flight.NewClientFromConn(discard.conn, nil), Alloc: mem}
	if _, err := dcl.Execute(t.Context(), "SELECT count(*) FROM main.sales.orders"); status.Code(err) != codes.Unimplemented {
		t.Errorf("count on a discarding sink = %v; want Unimplemented", err)
	}
}

// TestFlightSQLCreateConcurrently: parallel ingest calls that all ask to create a missing table
// (create, else append: what a loader's streams send) all succeed, and every row lands once.
func TestFlightSQLCreateConcurrently(t *testing.T) {
	e := start(t, "")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cl := &flightsql.Client{Client: flight.NewClientFromConn(e.conn, nil), Alloc: mem}
	req := &flightsql.ExecuteIngestOpts{Table: "raced", Catalog: ptr("main"), Schema: ptr("sales"),
		TableDefinitionOptions: opts(flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionAppend)}
	const calls, per = 6, 40
	errs := make(chan error, calls)
	for i := range calls {
		ingest := func() error {
			rec := sqlBatch(t, mem, sqlSource, i*per, per)
			defer rec.Release()
			rdr, err := array.NewRecordReader(sqlSource, []arrow.RecordBatch{rec})
			if err != nil {
				return err
			}
			defer rdr.Release()
			_, err = cl.ExecuteIngest(t.Context(), rdr, req)
			return err
		}
		go func() { errs <- ingest() }() // after the batch is released
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Errorf("ExecuteIngest = %v; want every racing create-or-append call to succeed", err)
		}
	}
	name := tableschema.TableName{Catalog: "main", Schema: "sales", Table: "raced"}
	sameRows(t, scan(t, e.wh, name), sqlExpected(0, calls*per))
}
