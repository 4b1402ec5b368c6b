package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

// allTypes is a table with a column of every type the sink stores.
const allTypes = "id BIGINT NOT NULL, ti TINYINT, si SMALLINT, i INT, f FLOAT, d DOUBLE, b BOOLEAN, " +
	"s STRING, bin BINARY, dec DECIMAL(10,2), dt DATE, ts TIMESTAMP, tsn TIMESTAMP_NTZ, " +
	"arr ARRAY<INT>, m MAP<STRING, BIGINT>, st STRUCT<a: INT, b: STRING>"

const readyJSON = `{"ack_up_to_offset":-1,"ack_up_to_records":0}`

// row returns the JSON object of row id for the allTypes table: deterministic values, with nulls
// in every nullable column on some rows and in single columns on others.
func row(id int64) map[string]any {
	r := map[string]any{"id": id}
	if id%7 == 3 {
		for _, c := range []string{"ti", "si", "i", "f", "d", "b", "s", "bin", "dec", "dt", "ts", "tsn", "arr", "m", "st"} {
			r[c] = nil
		}
		return r
	}
	r["ti"] = id%200 - 100
	r["si"] = id%30000 - 15000
	r["i"] = id * 3
	r["f"] = float64(id) / 4
	r["d"] = float64(id)/3 + 0.5
	r["b"] = id%2 == 0
	r["s"] = fmt.Sprintf("row %d ✓", id)
	if id%5 == 1 {
		r["s"] = nil
	}
	r["bin"] = base64.StdEncoding.EncodeToString([]byte{byte(id), 0, byte(id >> 8)})
	r["dec"] = fmt.Sprintf("%d.%02d", id%1000-500, id%100)
	if id%1000-500 < 0 {
		r["dec"] = fmt.Sprintf("-%d.%02d", -(id%1000 - 500), id%100)
	}
	r["dt"] = id % 30000
	r["ts"] = 1_700_000_000_000_000 + id*1_000_003
	r["tsn"] = 1_600_000_000_000_000 - id*7
	r["arr"] = []any{id, nil, id + 1}
	r["m"] = []any{map[string]any{"key": fmt.Sprint("k", id), "value": id}, map[string]any{"key": "z", "value": nil}}
	r["st"] = map[string]any{"a": id, "b": nil}
	if id%3 == 0 {
		r["st"] = map[string]any{"a": nil, "b": "three"}
	}
	return r
}

// batch builds the rows [from, from+n) in schema (the table's canonical schema or a subset).
func batch(t testing.TB, mem memory.Allocator, schema *arrow.Schema, from, n int64) arrow.RecordBatch {
	t.Helper()
	rows := make([]map[string]any, n)
	for i := range rows {
		full := row(from + int64(i))
		r := map[string]any{}
		for _, f := range schema.Fields() {
			r[f.Name] = full[f.Name]
		}
		rows[i] = r
	}
	js, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(mem, schema, bytes.NewReader(js))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	return rec
}

// rowsByID renders every row of the batches as JSON, keyed by id, failing on a duplicate id.
func rowsByID(t testing.TB, recs ...arrow.RecordBatch) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, rec := range recs {
		var buf bytes.Buffer
		if err := array.RecordToJSON(rec, &buf); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(&buf)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var probe struct{ ID int64 }
			if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
				t.Fatal(err)
			}
			if _, dup := out[probe.ID]; dup {
				t.Fatalf("id %d appears twice", probe.ID)
			}
			out[probe.ID] = sc.Text()
		}
	}
	return out
}

// sameRows compares two id-keyed renderings.
func sameRows(t testing.TB, got, want map[int64]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("read back %d rows; want %d", len(got), len(want))
	}
	var ids []int64
	for id := range want {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	bad := 0
	for _, id := range ids {
		if g, ok := got[id]; !ok {
			t.Errorf("row %d missing", id)
			bad++
		} else if g != want[id] {
			t.Errorf("row %d:\n got %s\nwant %s", id, g, want[id])
			bad++
		}
		if bad > 5 {
			t.Fatal("too many differences")
		}
	}
}

// capture collects the FlightData a flight.Writer produces, copying the reused buffers.
type capture struct{ msgs []*flight.FlightData }

func (c *capture) Send(fd *flight.FlightData) error {
	c.msgs = append(c.msgs, &flight.FlightData{
		FlightDescriptor: fd.FlightDescriptor,
		DataHeader:       bytes.Clone(fd.DataHeader),
		DataBody:         bytes.Clone(fd.DataBody),
		AppMetadata:      bytes.Clone(fd.AppMetadata),
	})
	return nil
}

// encode returns the schema frame and one data frame per batch, as arrow-go's IPC writer encodes
// them (no app_metadata).
func encode(t testing.TB, schema *arrow.Schema, recs []arrow.RecordBatch, opts ...ipc.Option) (*flight.FlightData, []*flight.FlightData) {
	t.Helper()
	var c capture
	w := flight.NewRecordWriter(&c, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(c.msgs) != len(recs)+1 {
		t.Fatalf("writer produced %d messages for %d batches", len(c.msgs), len(recs))
	}
	return c.msgs[0], c.msgs[1:]
}

// env is a running sink over a fresh warehouse.
type env struct {
	t      testing.TB
	wh     *warehouse.Warehouse
	srv    *sink.Server
	addr   string
	conn   *grpc.ClientConn
	client flight.FlightServiceClient
	mem    *memory.CheckedAllocator
	served chan error
	down   bool
}

// start runs a sink on 127.0.0.1:0 over dir (a new temporary one when "").
func start(t testing.TB, dir string, opts ...sink.Option) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	wh, err := warehouse.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, wh: wh, mem: memory.NewCheckedAllocator(memory.NewGoAllocator()), served: make(chan error, 1)}
	e.srv = sink.New(wh, append([]sink.Option{sink.WithAllocator(e.mem), sink.WithTestFaults(true)}, opts...)...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	go func() { e.served <- e.srv.Serve(lis) }()
	select {
	case <-e.srv.Ready():
	case err := <-e.served:
		t.Fatalf("Serve() = %v before ready", err)
	}
	e.conn = dial(t, e.addr)
	e.client = flight.NewFlightServiceClient(e.conn)
	t.Cleanup(func() { e.stop() })
	return e
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// stop shuts the sink down (once) and checks Serve's result and the allocator.
func (e *env) stop() {
	if e.down {
		return
	}
	e.down = true
	e.conn.Close()
	if err := e.srv.Shutdown(context.Background()); err != nil {
		e.t.Errorf("Shutdown() = %v", err)
	}
	if err := <-e.served; err != nil {
		e.t.Errorf("Serve() = %v after Shutdown", err)
	}
	e.mem.AssertSize(e.t, 0)
}

func (e *env) createTable(name, columns string) (tableschema.TableName, *tableschema.Schema) {
	e.t.Helper()
	n, err := tableschema.ParseTableName(name)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := tableschema.ParseColumns(columns)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.wh.CreateTable(context.Background(), n, s); err != nil {
		e.t.Fatal(err)
	}
	return n, s
}

func withAuth(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, zerobus.HeaderAuthorization, "Bearer "+token)
}

// zerobus opens a Zerobus DoPut to table.
func (e *env) zerobus(ctx context.Context, table, token string) flight.FlightService_DoPutClient {
	e.t.Helper()
	ctx = metadata.AppendToOutgoingContext(withAuth(ctx, token), zerobus.HeaderTableName, table)
	st, err := e.client.DoPut(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// setup sends the schema frame and returns the first answer: READY or the call's error.
func setup(st flight.FlightService_DoPutClient, schemaFrame *flight.FlightData) (*flight.PutResult, error) {
	if err := st.Send(schemaFrame); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return st.Recv()
}

// withOffset returns a copy of fd carrying {"offset_id":n}.
func withOffset(fd *flight.FlightData, n int64) *flight.FlightData {
	return &flight.FlightData{DataHeader: fd.DataHeader, DataBody: fd.DataBody, AppMetadata: zerobus.FrameMetadata(n)}
}

// sendRecv sends data frame i with its offset and returns the answer that follows it.
func sendRecv(t *testing.T, st flight.FlightService_DoPutClient, i int, fd *flight.FlightData) *flight.PutResult {
	t.Helper()
	if err := st.Send(withOffset(fd, int64(i))); err != nil {
		t.Fatal(err)
	}
	res, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// drain half-closes and reads every remaining ack until the call ends; it returns the acks and the
// call's final error (nil for OK).
func drain(st flight.FlightService_DoPutClient) ([]zerobus.Ack, error) {
	if err := st.CloseSend(); err != nil {
		return nil, err
	}
	raw, err := putResults(st)
	var acks []zerobus.Ack
	for _, r := range raw {
		a, perr := zerobus.ParseAck([]byte(r))
		if perr != nil {
			return acks, perr
		}
		acks = append(acks, a)
	}
	return acks, err
}

// action runs a sinkapi action and decodes its JSON result into out.
func (e *env) action(ctx context.Context, typ string, body []byte, out any) error {
	st, err := e.client.DoAction(ctx, &flight.Action{Type: typ, Body: body})
	if err != nil {
		return err
	}
	res, err := st.Recv()
	if err != nil {
		return err
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	if out != nil {
		return json.Unmarshal(res.GetBody(), out)
	}
	return nil
}

func (e *env) flushCount(name tableschema.TableName) sinkapi.CountResult {
	e.t.Helper()
	var c sinkapi.CountResult
	if err := e.action(context.Background(), sinkapi.ActionFlush, []byte(name.String()), &c); err != nil {
		e.t.Fatalf("flush %s: %v", name, err)
	}
	return c
}

// scan reads a table's committed rows straight from the warehouse.
func scan(t testing.TB, wh *warehouse.Warehouse, name tableschema.TableName) map[int64]string {
	t.Helper()
	tbl, err := wh.Table(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	err = tbl.Scan(context.Background(), func(r arrow.RecordBatch) error {
		r.Retain()
		recs = append(recs, r)
		return nil
	})
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if err != nil {
		t.Fatalf("Scan(%s) = %v", name, err)
	}
	return rowsByID(t, recs...)
}

// expected renders rows [from, from+n) of schema the way rowsByID renders read-back rows, the
// omitted columns (if any) as nulls.
func expected(t testing.TB, table *arrow.Schema, ids ...[2]int64) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, r := range ids {
		rec := batch(t, memory.DefaultAllocator, table, r[0], r[1])
		for k, v := range rowsByID(t, rec) {
			out[k] = v
		}
		rec.Release()
	}
	return out
}

// contains returns the parts of subs s lacks.
func contains(s string, subs ...string) []string { return fixture.Missing(s, subs...) }
