package sink_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/sink"
)

// TestDiscardChecksStructureNotValues holds the discard sink to what `serve --help` says: it
// acknowledges and counts rows whose values a durable sink refuses (invalid UTF-8, a null in a NOT
// NULL column), and still refuses a frame that is not a sound IPC message. The durable sink refuses
// the same bad values, so the test would fail if discard mode checked them or the durable one stopped.
func TestDiscardChecksStructureNotValues(t *testing.T) {
	badValues := func(t *testing.T, schema *arrow.Schema) *flight.FlightData {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i := range 4 {
			if i == 2 {
				b.Field(0).AppendNull() // NOT NULL
			} else {
				b.Field(0).(*array.Int64Builder).Append(int64(i))
			}
		}
		s := b.Field(1).(*array.LargeStringBuilder)
		s.AppendValues([]string{"ok", "\xff\xfe not UTF-8", "ok", "ok"}, nil)
		rec := b.NewRecordBatch()
		defer rec.Release()
		_, data := encode(t, schema, []arrow.RecordBatch{rec})
		return data[0]
	}
	for _, discard := range []bool{true, false} {
		e := start(t, "", sink.WithDiscard(discard))
		name, ts := e.createTable("main.default.x", "id BIGINT NOT NULL, s STRING")
		if _, ok := ts.Arrow().Field(1).Type.(*arrow.LargeStringType); !ok {
			t.Fatalf("column s is %s; the test builds large_utf8", ts.Arrow().Field(1).Type)
		}
		schemaFrame, _ := frames(t, ts.Arrow(), 0, 1, 1)
		st := e.zerobus(t.Context(), name.String(), "")
		if _, err := setup(st, schemaFrame); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(withOffset(badValues(t, ts.Arrow()), 0)); err != nil {
			t.Fatal(err)
		}
		acks, err := drain(st)
		if discard && (err != nil || len(acks) == 0 || acks[len(acks)-1].Records != 4) {
			t.Errorf("discard sink, a frame of bad values: acks %v, %v; want its 4 rows acknowledged", acks, err)
		}
		if !discard && status.Code(err) != codes.InvalidArgument {
			t.Errorf("durable sink, a frame of bad values: %v; want InvalidArgument", err)
		}

		// A body cut short of what its header declares is refused in both modes.
		_, data := frames(t, ts.Arrow(), 0, 1, 5)
		cut := &flight.FlightData{DataHeader: data[0].DataHeader, DataBody: data[0].DataBody[:len(data[0].DataBody)-8]}
		st = e.zerobus(t.Context(), name.String(), "")
		if _, err := setup(st, schemaFrame); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(withOffset(cut, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := drain(st); status.Code(err) != codes.InvalidArgument {
			t.Errorf("discard %v, a truncated IPC body: %v; want InvalidArgument", discard, err)
		}
		e.stop()
	}
}
