package sink_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink"
)

// tagged returns a copy of fd carrying offset n and rows [from, to) of unit.
func tagged(fd *flight.FlightData, n int64, unit string, from, to int64) *flight.FlightData {
	meta := fmt.Sprintf(`{"offset_id":%d,"unit":%q,"from":%d,"to":%d}`, n, unit, from, to)
	return &flight.FlightData{DataHeader: fd.DataHeader, DataBody: fd.DataBody, AppMetadata: []byte(meta)}
}

// sendTagged sends one DoPut of batches [from, to) of unit "u" (ranges in the unit are the ids) and
// returns the rows the last ack covers.
func sendTagged(t *testing.T, e *env, schema *arrow.Schema, ranges ...[2]int64) int64 {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, r := range ranges {
		recs = append(recs, batch(t, e.mem, schema, r[0], r[1]-r[0]))
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	schemaFrame, frames := encode(t, schema, recs)
	st := e.zerobus(t.Context(), "main.default.u", "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	for i, fd := range frames {
		if err := st.Send(tagged(fd, int64(i), "u", ranges[i][0], ranges[i][1])); err != nil {
			t.Fatal(err)
		}
	}
	acks, err := drain(st)
	if err != nil {
		t.Fatalf("DoPut: %v", err)
	}
	if len(acks) == 0 {
		t.Fatal("no ack")
	}
	return acks[len(acks)-1].Records
}

// TestUnitIDsStoreEachRangeOnce: frames tagged with a unit id whose rows the sink holds already,
// wholly or in part, are acknowledged in full but only their new rows are stored, across streams and
// across a restart (the ranges come back from the Delta txn actions).
func TestUnitIDsStoreEachRangeOnce(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir)
	name, ts := e.createTable("main.default.u", "id BIGINT NOT NULL, s STRING")
	schema := ts.Arrow()

	var res sinkapi.UnitIDsResult
	if err := e.action(t.Context(), sinkapi.ActionUnitIDs, []byte(name.String()), &res); err != nil || !res.UnitIDs {
		t.Fatalf("unit-ids action = %+v, %v; want unit_ids true", res, err)
	}
	if got := sendTagged(t, e, schema, [2]int64{0, 100}, [2]int64{100, 200}); got != 200 {
		t.Errorf("first call acknowledged %d rows; want 200", got)
	}
	// Overlapping, repeated and new rows on another call.
	if got := sendTagged(t, e, schema, [2]int64{50, 150}, [2]int64{0, 100}, [2]int64{180, 260}); got != 280 {
		t.Errorf("second call acknowledged %d rows; want 280 (every row sent)", got)
	}
	if c := e.flushCount(name); c.Committed != 260 {
		t.Errorf("committed %d rows; want 260", c.Committed)
	}
	sameRows(t, scan(t, e.wh, name), expected(t, schema, [2]int64{0, 260}))

	e.stop()
	e = start(t, dir)
	if got := sendTagged(t, e, schema, [2]int64{0, 130}, [2]int64{130, 300}); got != 300 {
		t.Errorf("call after the restart acknowledged %d rows; want 300", got)
	}
	if c := e.flushCount(name); c.Committed != 300 {
		t.Errorf("after the restart: committed %d rows; want 300", c.Committed)
	}
	sameRows(t, scan(t, e.wh, name), expected(t, schema, [2]int64{0, 300}))
}

// TestUnitIDsOffered: the action says whether the sink deduplicates.
func TestUnitIDsOffered(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sink.Option
		want bool
	}{
		{"default", nil, true},
		{"off", []sink.Option{sink.WithUnitIDs(false)}, false},
		{"discard", []sink.Option{sink.WithDiscard(true)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, "", tc.opts...)
			var res sinkapi.UnitIDsResult
			if err := e.action(t.Context(), sinkapi.ActionUnitIDs, []byte("main.default.x"), &res); err != nil {
				t.Fatal(err)
			}
			if res.UnitIDs != tc.want || res.Table != "main.default.x" {
				t.Errorf("result = %+v; want unit_ids %v", res, tc.want)
			}
		})
	}
}

// TestFaultsActionNeedsTestFaults: without WithTestFaults no client can inject faults.
func TestFaultsActionNeedsTestFaults(t *testing.T) {
	e := start(t, "", sink.WithTestFaults(false))
	err := e.action(context.Background(), sinkapi.ActionFaults, []byte(`{"unavailable_calls":1}`), nil)
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("faults action = %v; want PermissionDenied", err)
	}
}
