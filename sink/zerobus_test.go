package sink_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/zerobus"
)

// TestZerobusHappyPath streams every column type over many frames and checks READY, the acks
// (cumulative, never ahead of the log) and the committed rows, value by value.
func TestZerobusHappyPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ipc.Option
	}{
		{"uncompressed", nil},
		{"lz4", []ipc.Option{ipc.WithLZ4()}},
		{"zstd", []ipc.Option{ipc.WithZstd()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A long commit interval: nothing is committed until the explicit flush below, so
			// the log alone must hold every acknowledged row.
			e := start(t, "", sink.WithCommitInterval(time.Hour))
			name, ts := e.createTable("main.default.events", allTypes)
			schema := ts.Arrow()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)

			const frames, per = 25, 40
			var recs []arrow.RecordBatch
			for i := range frames {
				recs = append(recs, batch(t, mem, schema, int64(i*per), per))
			}
			schemaFrame, data := encode(t, schema, recs, tc.opts...)
			for _, r := range recs {
				r.Release()
			}

			st := e.zerobus(t.Context(), name.String(), "")
			ready, err := setup(st, schemaFrame)
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			if got := string(ready.GetAppMetadata()); got != readyJSON {
				t.Fatalf("READY = %s; want %s", got, readyJSON)
			}
			tbl, err := e.wh.Table(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			var acks []zerobus.Ack
			for i, fd := range data {
				if err := st.Send(withOffset(fd, int64(i))); err != nil {
					t.Fatalf("Send(frame %d) = %v", i, err)
				}
				// Read one ack now and then while sending, and check it is already in the log.
				if i%5 == 4 {
					res, err := st.Recv()
					if err != nil {
						t.Fatal(err)
					}
					a, err := zerobus.ParseAck(res.GetAppMetadata())
					if err != nil {
						t.Fatal(err)
					}
					pending, err := sink.PendingRows(t.Context(), tbl)
					if err != nil {
						t.Fatal(err)
					}
					if pending < a.Records {
						t.Fatalf("ack for %d rows arrived while the log holds %d", a.Records, pending)
					}
					acks = append(acks, a)
				}
			}
			rest, err := drain(st)
			if err != nil {
				t.Fatalf("call ended with %v; want OK", err)
			}
			acks = append(acks, rest...)
			checkAcks(t, acks, frames, per)

			c := e.flushCount(name)
			if c.Committed != frames*per || c.Acknowledged != 0 {
				t.Errorf("after flush: %+v; want %d committed, 0 acknowledged", c, frames*per)
			}
			sameRows(t, scan(t, e.wh, name), expected(t, schema, [2]int64{0, frames * per}))
		})
	}
}

// checkAcks verifies acks are cumulative, increasing, never beyond what was sent, and end at the
// last frame.
func checkAcks(t *testing.T, acks []zerobus.Ack, frames, per int) {
	t.Helper()
	if len(acks) == 0 {
		t.Fatal("no acks")
	}
	prev := zerobus.Ready()
	for _, a := range acks {
		if a.IsReady() || a.CloseStreamAfterMs != nil {
			t.Errorf("unexpected ack %s", a.Marshal())
		}
		if a.Offset <= prev.Offset || a.Records <= prev.Records {
			t.Errorf("ack %s does not advance past %s", a.Marshal(), prev.Marshal())
		}
		if a.Records != (a.Offset+1)*int64(per) {
			t.Errorf("ack %s: %d rows up to offset %d; want %d", a.Marshal(), a.Records, a.Offset, (a.Offset+1)*int64(per))
		}
		prev = a
	}
	if last := acks[len(acks)-1]; last.Offset != int64(frames-1) || last.Records != int64(frames*per) {
		t.Errorf("last ack %s; want offset %d, %d rows", last.Marshal(), frames-1, frames*per)
	}
}

// TestZerobusSubsetSchema leaves nullable columns out; they read back as nulls.
func TestZerobusSubsetSchema(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.subset", allTypes)
	sub := arrow.NewSchema([]arrow.Field{ts.Arrow().Field(0), ts.Arrow().Field(7), ts.Arrow().Field(15)}, nil)
	rec := batch(t, memory.DefaultAllocator, sub, 0, 10)
	defer rec.Release()
	schemaFrame, data := encode(t, sub, []arrow.RecordBatch{rec})
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(withOffset(data[0], 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
	e.flushCount(name)
	got := scan(t, e.wh, name)
	if len(got) != 10 {
		t.Fatalf("read back %d rows; want 10", len(got))
	}
	for id, js := range got {
		for _, col := range []string{`"ti":null`, `"m":null`, `"dec":null`} {
			if !strings.Contains(js, col) {
				t.Errorf("row %d: omitted column not null: %s", id, js)
			}
		}
	}
}

func statusOf(t *testing.T, err error) *status.Status {
	t.Helper()
	if err == nil {
		t.Fatal("call succeeded; want an error")
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	return st
}

// TestSetupErrors checks each refusal of a Zerobus setup and its order.
func TestSetupErrors(t *testing.T) {
	e := start(t, "", sink.WithTokens("secret"))
	name, ts := e.createTable("main.default.t", "id BIGINT NOT NULL, s STRING")
	rec := batch(t, memory.DefaultAllocator, ts.Arrow(), 0, 3)
	defer rec.Release()
	schemaFrame, data := encode(t, ts.Arrow(), []arrow.RecordBatch{rec})

	for _, tc := range []struct {
		name   string
		table  string // "" omits the header
		token  string
		first  *flight.FlightData
		code   codes.Code
		substr string
	}{
		{"no token", name.String(), "", schemaFrame, codes.Unauthenticated, "bearer token"},
		{"wrong token", name.String(), "nope", schemaFrame, codes.Unauthenticated, "bearer token"},
		{"missing header", "", "secret", schemaFrame, codes.InvalidArgument, zerobus.HeaderTableName},
		{"bad table name", "main.default", "secret", schemaFrame, codes.InvalidArgument, "catalog.schema.table"},
		{"unknown table", "main.default.nope", "secret", schemaFrame, codes.NotFound, "main.default.nope"},
		{"app_metadata on schema frame", name.String(), "secret",
			&flight.FlightData{DataHeader: schemaFrame.DataHeader, AppMetadata: zerobus.FrameMetadata(0)}, codes.InvalidArgument, "app_metadata must be empty"},
		{"body on schema frame", name.String(), "secret",
			&flight.FlightData{DataHeader: schemaFrame.DataHeader, DataBody: []byte{1, 2, 3, 4, 5, 6, 7, 8}}, codes.InvalidArgument, "data_body must be empty"},
		{"empty schema frame", name.String(), "secret", &flight.FlightData{}, codes.InvalidArgument, "data_header is empty"},
		{"record batch instead of schema", name.String(), "secret",
			&flight.FlightData{DataHeader: data[0].DataHeader}, codes.InvalidArgument, "want Schema"},
		{"garbage schema header", name.String(), "secret",
			&flight.FlightData{DataHeader: []byte("this is not a flatbuffer at all")}, codes.InvalidArgument, "schema frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := withAuth(t.Context(), tc.token)
			if tc.table != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, zerobus.HeaderTableName, tc.table)
			}
			stream, err := e.client.DoPut(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = setup(stream, tc.first)
			st := statusOf(t, err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.substr) {
				t.Errorf("setup = %v %q; want %v containing %q", st.Code(), st.Message(), tc.code, tc.substr)
			}
		})
	}
}

// TestSchemaMismatch checks the full shape of a schema error.
func TestSchemaMismatch(t *testing.T) {
	e := start(t, "")
	name, _ := e.createTable("main.default.t", "id BIGINT NOT NULL, name STRING, amount DOUBLE NOT NULL, tags ARRAY<STRING>")
	stream := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},               // utf8, not large_utf8
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},                               // out of order
		{Name: "extra", Type: arrow.PrimitiveTypes.Int32, Nullable: true},            // not in table
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}, // element named "item" but utf8
	}, nil) // amount (NOT NULL) missing
	schemaFrame, _ := encode(t, stream, nil)
	st := e.zerobus(t.Context(), name.String(), "")
	_, err := setup(st, schemaFrame)
	s := statusOf(t, err)
	if s.Code() != codes.InvalidArgument {
		t.Fatalf("code = %v; want InvalidArgument", s.Code())
	}
	info := zerobus.ErrorInfoOf(s)
	if info == nil {
		t.Fatal("no ErrorInfo detail")
	}
	if info.GetReason() != "SCHEMA_VALIDATION_FAILED" || info.GetDomain() != "zerobus.databricks.com" {
		t.Errorf("ErrorInfo reason/domain = %q/%q", info.GetReason(), info.GetDomain())
	}
	if got := info.GetMetadata()["error_code"]; got != "8001" {
		t.Errorf("error_code = %q; want 8001", got)
	}
	causes := info.GetMetadata()["causes"]
	for _, c := range []string{"FIELD_NOT_IN_TABLE", "MISSING_REQUIRED_COLUMN", "FIELD_OUT_OF_ORDER", "TYPE_INCOMPATIBLE"} {
		if !strings.Contains(causes, c) {
			t.Errorf("causes %q lack %s", causes, c)
		}
	}
	if m := contains(s.Message(), "Arrow Flight schema validation failed", `"name"`, `"id"`, `"extra"`, `"amount"`, `"tags"`); len(m) > 0 {
		t.Errorf("message %q does not name %v", s.Message(), m)
	}
	if se, ok := zerobus.AsSchemaError(err); !ok || zerobus.Retryable(err) || !se.Has(zerobus.CauseFieldNotInTable) {
		t.Errorf("AsSchemaError(%v) = %v, %v; want a non-retryable schema error", err, se, ok)
	}
}

// TestOffsets checks offset_id handling: a gap, a missing offset and a non-JSON one.
func TestOffsets(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.t", "id BIGINT NOT NULL, s STRING")
	var recs []arrow.RecordBatch
	for i := range 3 {
		r := batch(t, memory.DefaultAllocator, ts.Arrow(), int64(i*10), 10)
		defer r.Release()
		recs = append(recs, r)
	}
	schemaFrame, data := encode(t, ts.Arrow(), recs)
	for _, tc := range []struct {
		name   string
		third  *flight.FlightData
		code   codes.Code
		msg    string
		reason string
	}{
		{"gap", withOffset(data[2], 3), codes.InvalidArgument, "Non-incremental offset: expected 2, actual 3", "NON_INCREMENTAL_OFFSET"},
		{"repeat", withOffset(data[2], 1), codes.InvalidArgument, "Non-incremental offset: expected 2, actual 1", "NON_INCREMENTAL_OFFSET"},
		{"no app_metadata", &flight.FlightData{DataHeader: data[2].DataHeader, DataBody: data[2].DataBody}, codes.InvalidArgument, "offset_id", ""},
		{"not json", &flight.FlightData{DataHeader: data[2].DataHeader, DataBody: data[2].DataBody, AppMetadata: []byte("2")}, codes.InvalidArgument, "offset_id", ""},
		{"negative", &flight.FlightData{DataHeader: data[2].DataHeader, DataBody: data[2].DataBody, AppMetadata: []byte(`{"offset_id":-2}`)}, codes.InvalidArgument, "offset_id", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := e.zerobus(t.Context(), name.String(), "")
			if _, err := setup(st, schemaFrame); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := st.Send(withOffset(data[i], int64(i))); err != nil {
					t.Fatal(err)
				}
			}
			st.Send(tc.third)
			acks, err := drain(st)
			s := statusOf(t, err)
			if s.Code() != tc.code || !strings.Contains(s.Message(), tc.msg) {
				t.Errorf("status = %v %q; want %v containing %q", s.Code(), s.Message(), tc.code, tc.msg)
			}
			if tc.msg != "" && strings.HasPrefix(tc.msg, "Non-incremental") && s.Message() != tc.msg {
				t.Errorf("message = %q; want exactly %q", s.Message(), tc.msg)
			}
			if tc.reason != "" {
				info := zerobus.ErrorInfoOf(s)
				if info == nil || info.GetReason() != tc.reason || info.GetMetadata()["error_code"] != "4002" {
					t.Errorf("ErrorInfo = %v; want reason %s, error_code 4002", info, tc.reason)
				}
			}
			// The two good frames were acknowledged before the error.
			if len(acks) == 0 || acks[len(acks)-1].Offset != 1 || acks[len(acks)-1].Records != 20 {
				t.Errorf("acks before the error = %v; want up to offset 1, 20 rows", acks)
			}
		})
	}
}

// corruptions of a valid data frame; each must end the call with InvalidArgument naming offset 1.
func corruptions(t *testing.T, good, dict, schemaFrame *flight.FlightData) map[string]*flight.FlightData {
	trunc := func(b []byte, n int) []byte { return append([]byte(nil), b[:len(b)-n]...) }
	mangled := append([]byte(nil), good.DataBody...)
	for i := range mangled { // every offset and validity byte garbage
		mangled[i] ^= 0xA5
	}
	return map[string]*flight.FlightData{
		"garbage header":      {DataHeader: []byte("\x10\x00\x00\x00garbage-garbage-garbage"), DataBody: good.DataBody},
		"short header":        {DataHeader: []byte{1, 2, 3}, DataBody: good.DataBody},
		"truncated body":      {DataHeader: good.DataHeader, DataBody: trunc(good.DataBody, 16)},
		"wrong body length":   {DataHeader: good.DataHeader, DataBody: append(append([]byte(nil), good.DataBody...), make([]byte, 8)...)},
		"empty header":        {DataBody: good.DataBody},
		"mangled body":        {DataHeader: good.DataHeader, DataBody: mangled},
		"dictionary batch":    {DataHeader: dict.DataHeader, DataBody: dict.DataBody},
		"second schema":       {DataHeader: schemaFrame.DataHeader},
		"truncated header":    {DataHeader: trunc(good.DataHeader, len(good.DataHeader)/2), DataBody: good.DataBody},
		"body without header": {DataHeader: nil, DataBody: []byte("x")},
	}
}

// TestCorruptFrames sends damaged data frames; each ends the call with InvalidArgument naming the
// offset, never a panic, and the server keeps serving.
func TestCorruptFrames(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.t", "id BIGINT NOT NULL, s STRING, tags ARRAY<STRING>")
	schema := ts.Arrow()
	good := batch(t, memory.DefaultAllocator, schema, 0, 50)
	defer good.Release()
	schemaFrame, data := encode(t, schema, []arrow.RecordBatch{good, good})

	// A dictionary batch, taken from a stream with a dictionary column.
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	dschema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: dictType, Nullable: true}}, nil)
	db := arrowDictBatch(t, dschema)
	defer db.Release()
	var c capture
	w := flight.NewRecordWriter(&c, ipc.WithSchema(dschema))
	if err := w.Write(db); err != nil {
		t.Fatal(err)
	}
	w.Close()
	dict := c.msgs[1] // schema, dictionary, batch

	for cname, bad := range corruptions(t, data[1], dict, schemaFrame) {
		t.Run(cname, func(t *testing.T) {
			st := e.zerobus(t.Context(), name.String(), "")
			if _, err := setup(st, schemaFrame); err != nil {
				t.Fatal(err)
			}
			if err := st.Send(withOffset(data[0], 0)); err != nil {
				t.Fatal(err)
			}
			bad.AppMetadata = zerobus.FrameMetadata(1)
			st.Send(bad)
			acks, err := drain(st)
			s := statusOf(t, err)
			if s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "offset 1") {
				t.Errorf("status = %v %q; want InvalidArgument naming offset 1", s.Code(), s.Message())
			}
			if len(acks) != 1 || acks[0].Records != 50 {
				t.Errorf("acks = %v; want the good frame's", acks)
			}
		})
	}
	// Still serving, and only the good frames were stored.
	c2 := e.flushCount(name)
	if want := int64(50 * len(corruptions(t, data[1], dict, schemaFrame))); c2.Committed != want {
		t.Errorf("committed %d; want %d (one good frame per stream)", c2.Committed, want)
	}
}

func arrowDictBatch(t *testing.T, schema *arrow.Schema) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(`[{"s":"a"},{"s":"b"},{"s":"a"}]`))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestFrameTooLarge refuses a frame over zerobus.MaxMessageBytes.
func TestFrameTooLarge(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.t", "id BIGINT NOT NULL, s STRING")
	rec := batch(t, memory.DefaultAllocator, ts.Arrow(), 0, 1)
	defer rec.Release()
	schemaFrame, data := encode(t, ts.Arrow(), []arrow.RecordBatch{rec})
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	big := withOffset(data[0], 0)
	big.DataBody = make([]byte, zerobus.MaxMessageBytes+1)
	st.Send(big)
	_, err := drain(st)
	if s := statusOf(t, err); s.Code() != codes.ResourceExhausted {
		t.Errorf("status = %v %q; want ResourceExhausted", s.Code(), s.Message())
	}
}

// TestCancelledClient: a DoPut on a cancelled context fails cleanly.
func TestCancelledClient(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.t", "id BIGINT NOT NULL")
	schemaFrame, _ := encode(t, ts.Arrow(), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	st, err := e.client.DoPut(metadata.AppendToOutgoingContext(ctx, zerobus.HeaderTableName, name.String()))
	if err == nil {
		_, err = setup(st, schemaFrame)
	}
	if status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
		t.Errorf("DoPut on a cancelled context = %v; want Canceled", err)
	}
}

// TestZeroRowFrame: a frame with no rows is acknowledged (the record count stays) and stores nothing.
func TestZeroRowFrame(t *testing.T) {
	e := start(t, "")
	name, ts := e.createTable("main.default.z", "id BIGINT NOT NULL, s STRING")
	full := batch(t, memory.DefaultAllocator, ts.Arrow(), 0, 4)
	defer full.Release()
	empty := full.NewSlice(0, 0)
	defer empty.Release()
	schemaFrame, data := encode(t, ts.Arrow(), []arrow.RecordBatch{full, empty, full})
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	var acks []zerobus.Ack
	for i, fd := range data {
		a, _ := zerobus.ParseAck(sendRecv(t, st, i, fd).GetAppMetadata())
		acks = append(acks, a)
	}
	want := []zerobus.Ack{{Offset: 0, Records: 4}, {Offset: 1, Records: 4}, {Offset: 2, Records: 8}}
	for i := range want {
		if acks[i] != want[i] {
			t.Errorf("ack %d = %s; want %s", i, acks[i].Marshal(), want[i].Marshal())
		}
	}
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
	if c := e.flushCount(name); c.Committed != 8 {
		t.Errorf("committed %d; want 8 (ids 0-3 twice would be a duplicate)", c.Committed)
	}
}
