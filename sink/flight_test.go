package sink_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// putResults reads a DoPut's answers to the end.
func putResults(st flight.FlightService_DoPutClient) ([]string, error) {
	var out []string
	for {
		res, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(res.GetAppMetadata()))
	}
}

// TestPlainFlight writes with arrow-go's flight.Writer and a PATH descriptor, with and without
// offset_id metadata.
func TestPlainFlight(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.pf", allTypes)
	schema := ts.Arrow()
	cl := flight.NewClientFromConn(e.conn, nil)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	for _, tc := range []struct {
		name     string
		offsets  []int64 // nil: no app_metadata
		from     int64
		wantCode codes.Code
	}{
		{"no offsets", nil, 0, codes.OK},
		{"sequential offsets", []int64{0, 1, 2}, 1000, codes.OK},
		{"offset gap", []int64{0, 2, 3}, 2000, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := cl.DoPut(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			w := flight.NewRecordWriter(st, ipc.WithSchema(schema), ipc.WithAllocator(mem))
			w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: name.Parts()})
			for i := range 3 {
				rec := batch(t, mem, schema, tc.from+int64(i*10), 10)
				if tc.offsets == nil {
					err = w.Write(rec)
				} else {
					err = w.WriteWithAppMetadata(rec, zerobus.FrameMetadata(tc.offsets[i]))
				}
				rec.Release()
				if err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
			}
			w.Close()
			st.CloseSend()
			res, err := putResults(st)
			if code := status.Code(err); code != tc.wantCode {
				t.Fatalf("DoPut ended with %v; want %v", err, tc.wantCode)
			}
			if len(res) == 0 || res[0] != readyJSON {
				t.Fatalf("first PutResult = %v; want READY", res)
			}
			if tc.wantCode == codes.OK {
				if last := res[len(res)-1]; last != `{"ack_up_to_offset":2,"ack_up_to_records":30}` {
					t.Errorf("last ack = %s", last)
				}
			} else if !strings.Contains(err.Error(), "Non-incremental offset: expected 1, actual 2") {
				t.Errorf("error %v does not name the gap", err)
			}
		})
	}
	e.flushCount(name)
	sameRows(t, scan(t, e.wh, name), expected(t, schema, [2]int64{0, 30}, [2]int64{1000, 30}, [2]int64{2000, 10}))
}

// TestPlainFlightSetupErrors: a PATH that is not a table, and a table that does not exist.
func TestPlainFlightSetupErrors(t *testing.T) {
	e := start(t, "")
	_, ts := e.createTable("main.default.t", "id BIGINT NOT NULL")
	schemaFrame, _ := encode(t, ts.Arrow(), nil)
	for _, tc := range []struct {
		name string
		desc *flight.FlightDescriptor
		code codes.Code
	}{
		{"two-part path", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"main", "t"}}, codes.InvalidArgument},
		{"bad part", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"main", "default", "a-b"}}, codes.InvalidArgument},
		{"unknown table", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"main", "default", "nope"}}, codes.NotFound},
		{"no descriptor, no header", nil, codes.InvalidArgument},
		{"garbage command", &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("not protobuf")}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := e.client.DoPut(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			first := &flight.FlightData{FlightDescriptor: tc.desc, DataHeader: schemaFrame.DataHeader}
			_, err = setup(st, first)
			if s := statusOf(t, err); s.Code() != tc.code {
				t.Errorf("DoPut = %v; want %v", err, tc.code)
			}
		})
	}
}

// TestReadBack covers GetFlightInfo, GetSchema, DoGet (through a client with gRPC's default
// message limit) and ListFlights.
func TestReadBack(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.big", allTypes)
	empty, _ := e.createTable("main.other.empty", "id BIGINT NOT NULL")
	e.createTable("main.other.third", "id BIGINT NOT NULL")
	e.ingest(name, ts.Arrow(), 0, 3, 1000)
	e.flushCount(name)
	// A table whose committed batch (6 MB) is over gRPC's default 4 MiB message limit.
	wide, wts := e.createTable("main.default.wide", "id BIGINT NOT NULL, s STRING")
	e.ingestWide(wide, wts.Arrow(), 3000, 2048)
	e.flushCount(wide)

	conn, err := grpc.NewClient("passthrough:///"+e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := flight.NewClientFromConn(conn, nil)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	read := func(n tableschema.TableName) (int64, map[int64]string, *arrow.Schema) {
		info, err := cl.GetFlightInfo(t.Context(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: n.Parts()})
		if err != nil {
			t.Fatalf("GetFlightInfo(%s) = %v", n, err)
		}
		if len(info.Endpoint) != 1 || string(info.Endpoint[0].Ticket.Ticket) != n.String() {
			t.Fatalf("endpoints = %v; want one with ticket %s", info.Endpoint, n)
		}
		infoSchema, err := flight.DeserializeSchema(info.Schema, mem)
		if err != nil {
			t.Fatal(err)
		}
		st, err := cl.DoGet(t.Context(), info.Endpoint[0].Ticket)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := flight.NewRecordReader(st, ipc.WithAllocator(mem))
		if err != nil {
			t.Fatalf("DoGet(%s): %v", n, err)
		}
		defer rdr.Release()
		var recs []arrow.RecordBatch
		for rdr.Next() {
			r := rdr.RecordBatch()
			r.Retain()
			recs = append(recs, r)
		}
		if err := rdr.Err(); err != nil {
			t.Fatalf("DoGet(%s) read: %v", n, err)
		}
		if !rdr.Schema().Equal(infoSchema) {
			t.Errorf("DoGet schema %v differs from FlightInfo schema %v", rdr.Schema(), infoSchema)
		}
		rows := rowsByID(t, recs...)
		for _, r := range recs {
			r.Release()
		}
		return info.TotalRecords, rows, infoSchema
	}

	total, rows, schema := read(name)
	if total != 3000 {
		t.Errorf("TotalRecords = %d; want 3000", total)
	}
	if !schema.Equal(ts.Arrow()) {
		t.Errorf("schema = %v; want the canonical %v", schema, ts.Arrow())
	}
	sameRows(t, rows, expected(t, ts.Arrow(), [2]int64{0, 3000}))

	total, rows, _ = read(wide)
	if total != 3000 || len(rows) != 3000 {
		t.Errorf("wide table: %d records, %d rows read; want 3000", total, len(rows))
	}
	for id, js := range rows {
		if !strings.Contains(js, wideValue(id, 2048)) {
			t.Fatalf("wide row %d reads back wrong", id)
		}
	}

	total, rows, _ = read(empty)
	if total != 0 || len(rows) != 0 {
		t.Errorf("empty table: %d records, %d rows", total, len(rows))
	}

	sr, err := cl.GetSchema(t.Context(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: empty.Parts()})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := flight.DeserializeSchema(sr.Schema, mem); err != nil || s.NumFields() != 1 || s.Field(0).Name != "id" {
		t.Errorf("GetSchema = %v, %v", s, err)
	}

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"main.default.big", "main.default.wide", "main.other.empty", "main.other.third"}},
		{"main.other.", []string{"main.other.empty", "main.other.third"}},
	} {
		lf, err := cl.ListFlights(t.Context(), &flight.Criteria{Expression: []byte(tc.prefix)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			info, err := lf.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, strings.Join(info.FlightDescriptor.Path, "."))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("ListFlights(%q) = %v; want %v", tc.prefix, got, tc.want)
		}
	}

	for _, call := range []func() error{
		func() error {
			_, err := cl.GetFlightInfo(t.Context(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"main", "x", "nope"}})
			return err
		},
		func() error {
			st, err := cl.DoGet(t.Context(), &flight.Ticket{Ticket: []byte("main.x.nope")})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		},
	} {
		if s := statusOf(t, call()); s.Code() != codes.NotFound {
			t.Errorf("unknown table: %v; want NotFound", s.Err())
		}
	}
}

// TestActions covers count, flush, describe, faults and the errors of each.
func TestActions(t *testing.T) {
	e := start(t, "", sink.WithCommitInterval(time.Hour))
	name, ts := e.createTable("main.default.a", "id BIGINT NOT NULL, s STRING")
	e.ingest(name, ts.Arrow(), 0, 4, 25)

	var c sinkapi.CountResult
	if err := e.action(t.Context(), sinkapi.ActionCount, []byte(name.String()), &c); err != nil {
		t.Fatal(err)
	}
	if c != (sinkapi.CountResult{Table: name.String(), Committed: 0, Acknowledged: 100, Version: 0}) {
		t.Errorf("count before flush = %+v; want 0 committed, 100 acknowledged", c)
	}
	c = e.flushCount(name)
	if c.Committed != 100 || c.Acknowledged != 0 || c.Version != 1 {
		t.Errorf("flush = %+v; want 100 committed at version 1", c)
	}

	var info sinkapi.TableInfo
	if err := e.action(t.Context(), sinkapi.ActionDescribe, []byte(name.String()), &info); err != nil {
		t.Fatal(err)
	}
	if info.Table != name.String() || info.ID == "" || info.Columns != ts.SQL() || !strings.Contains(info.DeltaSchema, `"type":"struct"`) {
		t.Errorf("describe = %+v", info)
	}
	parsed, err := tableschema.ParseColumns(info.Columns)
	if err != nil || !parsed.Equal(ts) {
		t.Errorf("describe columns %q do not parse back to the schema: %v", info.Columns, err)
	}

	var f sink.Faults
	if err := e.action(t.Context(), sinkapi.ActionFaults, []byte(`{"unavailable_calls":1,"ack_delay":1000}`), &f); err != nil {
		t.Fatal(err)
	}
	if f != (sink.Faults{UnavailableCalls: 1, AckDelay: time.Microsecond}) {
		t.Errorf("faults = %+v", f)
	}
	e.srv.SetFaults(sink.Faults{})

	for _, tc := range []struct {
		typ, body string
		code      codes.Code
	}{
		{sinkapi.ActionCount, "main.default.nope", codes.NotFound},
		{sinkapi.ActionFlush, "not a name", codes.InvalidArgument},
		{sinkapi.ActionDescribe, "", codes.InvalidArgument},
		{sinkapi.ActionFaults, `{"drop_after_frames":"x"}`, codes.InvalidArgument},
		{sinkapi.ActionFaults, `{"no_such_fault":1}`, codes.InvalidArgument},
		{sinkapi.ActionFaults, `{"drop_calls":-1}`, codes.InvalidArgument},
		{sinkapi.ActionFaults, `{"ack_delay":"soon"}`, codes.InvalidArgument},
		{"no.such.action", "", codes.InvalidArgument},
	} {
		err := e.action(t.Context(), tc.typ, []byte(tc.body), nil)
		if s := statusOf(t, err); s.Code() != tc.code {
			t.Errorf("action %s(%q) = %v; want %v", tc.typ, tc.body, err, tc.code)
		}
	}

	la, err := e.client.ListActions(t.Context(), &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		a, err := la.Recv()
		if err != nil {
			break
		}
		types = append(types, a.Type)
	}
	if m := contains(strings.Join(types, " "), sinkapi.ActionCount, sinkapi.ActionFlush, sinkapi.ActionDescribe, sinkapi.ActionFaults); len(m) > 0 {
		t.Errorf("ListActions lacks %v", m)
	}
}

// TestAuthAllRPCs: with tokens, every RPC wants one.
func TestAuthAllRPCs(t *testing.T) {
	e := start(t, "", sink.WithTokens("t1", "t2"))
	name, _ := e.createTable("main.default.a", "id BIGINT NOT NULL")
	calls := map[string]func(ctx context.Context) error{
		"ListFlights": func(ctx context.Context) error {
			st, err := e.client.ListFlights(ctx, &flight.Criteria{})
			if err == nil {
				_, err = st.Recv()
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		},
		"GetFlightInfo": func(ctx context.Context) error {
			_, err := e.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: name.Parts()})
			return err
		},
		"DoAction": func(ctx context.Context) error {
			return e.action(ctx, sinkapi.ActionCount, []byte(name.String()), nil)
		},
		"DoGet": func(ctx context.Context) error {
			st, err := e.client.DoGet(ctx, &flight.Ticket{Ticket: []byte(name.String())})
			if err == nil {
				for err == nil {
					_, err = st.Recv()
				}
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		},
	}
	for rpc, call := range calls {
		for _, tc := range []struct {
			token string
			code  codes.Code
		}{{"", codes.Unauthenticated}, {"t3", codes.Unauthenticated}, {"t1", codes.OK}, {"t2", codes.OK}} {
			err := call(withAuth(t.Context(), tc.token))
			if got := status.Code(err); got != tc.code {
				t.Errorf("%s with token %q = %v; want %v", rpc, tc.token, err, tc.code)
			}
		}
	}
	// Lower-case scheme is accepted, a different scheme is not.
	for _, tc := range []struct {
		header string
		code   codes.Code
	}{{"bearer t1", codes.OK}, {"Basic t1", codes.Unauthenticated}, {"Bearer", codes.Unauthenticated}} {
		err := calls["DoAction"](metadata.AppendToOutgoingContext(t.Context(), "authorization", tc.header))
		if got := status.Code(err); got != tc.code {
			t.Errorf("authorization %q = %v; want %v", tc.header, err, tc.code)
		}
	}
}

func wideValue(id int64, size int) string {
	return fmt.Sprintf("%08d", id) + strings.Repeat(string(rune('a'+id%26)), size-8)
}

// ingestWide sends one frame of n rows (id, s) whose strings are size bytes.
func (e *env) ingestWide(name tableschema.TableName, schema *arrow.Schema, n int64, size int) {
	e.t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := range n {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.LargeStringBuilder).Append(wideValue(id, size))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	schemaFrame, data := encode(e.t, schema, []arrow.RecordBatch{rec})
	st := e.zerobus(context.Background(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		e.t.Fatal(err)
	}
	if err := st.Send(withOffset(data[0], 0)); err != nil {
		e.t.Fatal(err)
	}
	if _, err := drain(st); err != nil {
		e.t.Fatal(err)
	}
}
