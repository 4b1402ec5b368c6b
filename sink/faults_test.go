package sink_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

// frames encodes n frames of per rows of schema starting at id from.
func frames(t testing.TB, schema *arrow.Schema, from int64, n, per int) (*flight.FlightData, []*flight.FlightData) {
	t.Helper()
	var recs []arrow.RecordBatch
	for i := range n {
		recs = append(recs, batch(t, memory.DefaultAllocator, schema, from+int64(i*per), int64(per)))
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return encode(t, schema, recs)
}

// TestFaultDrop: the first DoPut is dropped at its third frame with exactly two frames acked; the
// next DoPut is not dropped (drop_calls 1).
func TestFaultDrop(t *testing.T) {
	e := start(t, "", sink.WithFaults(sink.Faults{DropAfterFrames: 3, DropCalls: 1}))
	name, ts := e.createTable("main.default.d", "id BIGINT NOT NULL, s STRING")
	schemaFrame, data := frames(t, ts.Arrow(), 0, 5, 10)

	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	for i, fd := range data {
		if err := st.Send(withOffset(fd, int64(i))); err != nil {
			break // the server may end the call while we send
		}
	}
	acks, err := drain(st)
	if s := statusOf(t, err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "drop") {
		t.Errorf("dropped call ended with %v; want Unavailable from the drop fault", err)
	}
	if len(acks) == 0 || acks[len(acks)-1] != (zerobus.Ack{Offset: 1, Records: 20}) {
		t.Errorf("acks before the drop = %v; want the last to be offset 1, 20 rows", acks)
	}
	if !zerobus.Retryable(err) {
		t.Errorf("Retryable(%v) = false; a dropped stream must be retryable", err)
	}

	// The next call is not dropped.
	schemaFrame2, data2 := frames(t, ts.Arrow(), 1000, 5, 10)
	st = e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame2); err != nil {
		t.Fatal(err)
	}
	for i, fd := range data2 {
		if err := st.Send(withOffset(fd, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if acks, err := drain(st); err != nil || acks[len(acks)-1].Records != 50 {
		t.Fatalf("second call = %v, %v; want OK with 50 rows acked", acks, err)
	}
	// Frames 1-2 of the dropped call are stored, frame 3 is not.
	e.flushCount(name)
	sameRows(t, scan(t, e.wh, name), expected(t, ts.Arrow(), [2]int64{0, 20}, [2]int64{1000, 50}))
}

// TestFaultAckDelay: no ack arrives before the delay has passed.
func TestFaultAckDelay(t *testing.T) {
	const delay = 150 * time.Millisecond
	e := start(t, "")
	name, ts := e.createTable("main.default.a", "id BIGINT NOT NULL")
	var f sink.Faults
	if err := e.action(t.Context(), sinkapi.ActionFaults, []byte(`{"ack_delay":"150ms"}`), &f); err != nil {
		t.Fatal(err)
	}
	if f.AckDelay != delay {
		t.Fatalf("installed ack_delay = %v; want %v", f.AckDelay, delay)
	}
	schemaFrame, data := frames(t, ts.Arrow(), 0, 2, 5)
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	for i, fd := range data {
		sent := time.Now()
		sendRecv(t, st, i, fd)
		if waited := time.Since(sent); waited < delay {
			t.Errorf("ack %d after %v; the fault holds acks %v", i, waited, delay)
		}
	}
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
}

// TestFaultRotate: the ack that covers frame 2 carries close_stream_duration_ms, once.
func TestFaultRotate(t *testing.T) {
	e := start(t, "")
	e.srv.SetFaults(sink.Faults{RotateAfterFrames: 2, RotateGrace: 5 * time.Second})
	name, ts := e.createTable("main.default.r", "id BIGINT NOT NULL")
	schemaFrame, data := frames(t, ts.Arrow(), 0, 4, 5)
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, fd := range data {
		got = append(got, string(sendRecv(t, st, i, fd).GetAppMetadata()))
	}
	want := []string{
		`{"ack_up_to_offset":0,"ack_up_to_records":5}`,
		`{"ack_up_to_offset":1,"ack_up_to_records":10,"close_stream_duration_ms":5000}`,
		`{"ack_up_to_offset":2,"ack_up_to_records":15}`,
		`{"ack_up_to_offset":3,"ack_up_to_records":20}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("acks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
}

// TestFaultUnavailable: the next N DoPuts, of any dialect, are refused; then calls succeed.
func TestFaultUnavailable(t *testing.T) {
	e := start(t, "", sink.WithFaults(sink.Faults{UnavailableCalls: 1}))
	name, ts := e.createTable("main.default.u", "id BIGINT NOT NULL")
	schemaFrame, data := frames(t, ts.Arrow(), 0, 1, 5)
	try := func() error {
		st := e.zerobus(t.Context(), name.String(), "")
		if _, err := setup(st, schemaFrame); err != nil {
			return err
		}
		st.Send(withOffset(data[0], 0))
		_, err := drain(st)
		return err
	}
	if err := try(); status.Code(err) != codes.Unavailable {
		t.Errorf("first call (installed at start) = %v; want Unavailable", err)
	}
	if err := try(); err != nil {
		t.Errorf("second call = %v; want OK", err)
	}
	if err := e.action(t.Context(), sinkapi.ActionFaults, []byte(`{"unavailable_calls":2}`), nil); err != nil {
		t.Fatal(err)
	}
	cl := &flightsql.Client{Client: flight.NewClientFromConn(e.conn, nil), Alloc: memory.DefaultAllocator}
	rec := batch(t, memory.DefaultAllocator, ts.Arrow(), 100, 3)
	defer rec.Release()
	rdr, _ := array.NewRecordReader(ts.Arrow(), []arrow.RecordBatch{rec})
	defer rdr.Release()
	_, err := cl.ExecuteIngest(t.Context(), rdr, &flightsql.ExecuteIngestOpts{Table: "u",
		TableDefinitionOptions: opts(flightsql.TableDefinitionOptionsTableNotExistOptionFail, flightsql.TableDefinitionOptionsTableExistsOptionAppend)})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Flight SQL ingest under the fault = %v; want Unavailable", err)
	}
	if err := try(); status.Code(err) != codes.Unavailable {
		t.Errorf("Zerobus call under the fault = %v; want Unavailable", err)
	}
	if err := try(); err != nil {
		t.Errorf("call after the fault = %v; want OK", err)
	}
	if c := e.flushCount(name); c.Committed != 10 {
		t.Errorf("committed %d; want 10", c.Committed)
	}
}

// TestConcurrentStreams: 8 DoPuts into one table while the committer runs every 10ms; every row is
// committed exactly once.
func TestConcurrentStreams(t *testing.T) {
	e := start(t, "", sink.WithCommitInterval(10*time.Millisecond), sink.WithWALSegmentBytes(64<<10))
	name, ts := e.createTable("main.default.c", "id BIGINT NOT NULL, s STRING, d DOUBLE, arr ARRAY<INT>")
	const streams, n, per = 8, 20, 100
	var wg sync.WaitGroup
	for k := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			schemaFrame, data := frames(t, ts.Arrow(), int64(k*100_000), n, per)
			st := e.zerobus(context.Background(), name.String(), "")
			if _, err := setup(st, schemaFrame); err != nil {
				t.Error(err)
				return
			}
			for i, fd := range data {
				if err := st.Send(withOffset(fd, int64(i))); err != nil {
					t.Error(err)
					return
				}
			}
			acks, err := drain(st)
			if err != nil || acks[len(acks)-1].Records != n*per {
				t.Errorf("stream %d: %v, last ack %v", k, err, acks[len(acks)-1:])
			}
		}()
	}
	wg.Wait()
	c := e.flushCount(name)
	if c.Committed != streams*n*per || c.Acknowledged != 0 {
		t.Errorf("count = %+v; want %d committed", c, streams*n*per)
	}
	var ranges [][2]int64
	for k := range streams {
		ranges = append(ranges, [2]int64{int64(k * 100_000), n * per})
	}
	sameRows(t, scan(t, e.wh, name), expected(t, ts.Arrow(), ranges...))
}

// TestDiscard: every dialect is validated and acknowledged, nothing is stored.
func TestDiscard(t *testing.T) {
	e := start(t, "", sink.WithDiscard(true))
	name, ts := e.createTable("main.default.x", "id BIGINT NOT NULL, s STRING")
	schemaFrame, data := frames(t, ts.Arrow(), 0, 3, 10)
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	for i, fd := range data {
		st.Send(withOffset(fd, int64(i)))
	}
	acks, err := drain(st)
	if err != nil || acks[len(acks)-1].Records != 30 {
		t.Fatalf("discard DoPut = %v, %v; want 30 rows acked", acks, err)
	}
	// Validation still applies.
	bad := arrow.NewSchema([]arrow.Field{{Name: "nope", Type: arrow.PrimitiveTypes.Int64}}, nil)
	badFrame, _ := encode(t, bad, nil)
	st = e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, badFrame); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad schema in discard mode = %v; want InvalidArgument", err)
	}
	// Flight SQL: counted, not stored, no table created.
	cl := &flightsql.Client{Client: flight.NewClientFromConn(e.conn, nil), Alloc: memory.DefaultAllocator}
	rec := batch(t, memory.DefaultAllocator, ts.Arrow(), 0, 7)
	defer rec.Release()
	rdr, _ := array.NewRecordReader(ts.Arrow(), []arrow.RecordBatch{rec})
	defer rdr.Release()
	n, err := cl.ExecuteIngest(t.Context(), rdr, &flightsql.ExecuteIngestOpts{Table: "created",
		TableDefinitionOptions: opts(flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionFail)})
	if err != nil || n != 7 {
		t.Errorf("discard ExecuteIngest = %d, %v; want 7", n, err)
	}
	if _, err := e.wh.Table(t.Context(), tableschema.TableName{Catalog: "main", Schema: "default", Table: "created"}); err == nil {
		t.Error("discard mode created a table")
	}
	// Nothing to count: the count actions say so, so clients skip verification.
	for _, action := range []string{sinkapi.ActionCount, sinkapi.ActionFlush} {
		var c sinkapi.CountResult
		if err := e.action(t.Context(), action, []byte(name.String()), &c); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s in discard mode = %v; want Unimplemented", action, err)
		}
	}
	tbl, _ := e.wh.Table(t.Context(), name)
	if n, _, err := tbl.Count(t.Context()); err != nil || n != 0 {
		t.Errorf("discard mode stored %d rows (%v)", n, err)
	}
	if _, err := os.Stat(filepath.Join(tbl.Dir(), "_sink")); !os.IsNotExist(err) {
		t.Errorf("discard mode wrote a log: %v", err)
	}
}

// TestReplacedTable: when the table's schema is replaced under a running stream, the stream's next
// frame is refused with a schema error, and log records that no longer fit are kept aside rather
// than committed.
func TestReplacedTable(t *testing.T) {
	e := start(t, "", sink.WithCommitInterval(time.Hour))
	name, ts := e.createTable("main.default.rp", "id BIGINT NOT NULL, s STRING")
	schemaFrame, data := frames(t, ts.Arrow(), 0, 3, 10)
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(withOffset(data[0], 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // acked: durable in the log, not committed
		t.Fatal(err)
	}

	// Someone replaces the table behind the sink's back with an incompatible schema.
	tbl, _ := e.wh.Table(t.Context(), name)
	newSchema, _ := tableschema.ParseColumns("id BIGINT NOT NULL, amount DOUBLE NOT NULL")
	w := tbl.NewWriter(warehouse.WithSchema(newSchema))
	if _, err := w.Commit(t.Context(), warehouse.CommitOptions{Overwrite: true, Schema: newSchema}); err != nil {
		t.Fatal(err)
	}

	// The commit keeps the acknowledged record aside.
	c := e.flushCount(name)
	if c.Committed != 0 || c.Acknowledged != 0 {
		t.Errorf("after flush: %+v; want nothing committed, nothing pending", c)
	}
	kept, _ := filepath.Glob(filepath.Join(tbl.Dir(), "_sink", "rejected", "*.arrows"))
	if len(kept) != 1 {
		t.Fatalf("rejected files = %v; want one", kept)
	}
	f, err := os.Open(kept[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewReader(f)
	if err != nil {
		t.Fatalf("rejected file is not an IPC stream: %v", err)
	}
	defer r.Release()
	if !r.Next() || r.RecordBatch().NumRows() != 10 {
		t.Errorf("rejected file does not hold the 10 acknowledged rows: %v", r.Err())
	}

	// The running stream learns of the new schema at its next frame.
	st.Send(withOffset(data[1], 1))
	_, err = drain(st)
	if se, ok := zerobus.AsSchemaError(err); !ok || !se.Has(zerobus.CauseFieldNotInTable) || !se.Has(zerobus.CauseMissingRequiredColumn) {
		t.Errorf("stream after replace = %v; want a schema error (s not in table, amount missing)", err)
	}
}

// TestReplacedTableChecksNewTypes: when the table's schema is replaced under a running stream by one
// the stream still fits (same Arrow types, a narrower DECIMAL), the stream's next frames are
// checked against the new schema's values, not the old one's.
func TestReplacedTableChecksNewTypes(t *testing.T) {
	e := start(t, "", sink.WithCommitInterval(time.Hour))
	name, ts := e.createTable("main.default.narrowed", "id BIGINT NOT NULL, d DECIMAL(10,2)")
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, ts.Arrow(), strings.NewReader(`[{"id": 1, "d": "12345.67"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	schemaFrame, data := encode(t, ts.Arrow(), []arrow.RecordBatch{rec, rec})
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(withOffset(data[0], 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // fits DECIMAL(10,2): acked
		t.Fatal(err)
	}

	tbl, _ := e.wh.Table(t.Context(), name)
	narrow, _ := tableschema.ParseColumns("id BIGINT NOT NULL, d DECIMAL(4,2)")
	w := tbl.NewWriter(warehouse.WithSchema(narrow))
	if _, err := w.Commit(t.Context(), warehouse.CommitOptions{Overwrite: true, Schema: narrow}); err != nil {
		t.Fatal(err)
	}
	e.flushCount(name) // the sink reads the new schema

	st.Send(withOffset(data[1], 1))
	_, err = drain(st)
	if s := statusOf(t, err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), `column "d" row 0`) {
		t.Errorf("frame after the narrowing = %v; want InvalidArgument: column d row 0 does not fit DECIMAL(4,2)", err)
	}
}

// TestStreamRateLimit: a DoPut on a sink capped at 1 MB/s takes at least its bytes past the
// first burst over the rate, and every row still arrives.
func TestStreamRateLimit(t *testing.T) {
	const rate = 1_000_000
	e := start(t, "", sink.WithStreamRateLimit(rate))
	name, ts := e.createTable("main.default.r", "id BIGINT NOT NULL, s STRING")
	schemaFrame, data := frames(t, ts.Arrow(), 0, 8, 4_000)
	total := 0
	for _, fd := range data {
		total += len(fd.DataHeader) + len(fd.DataBody)
	}
	st := e.zerobus(t.Context(), name.String(), "")
	if _, err := setup(st, schemaFrame); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	for i, fd := range data {
		if err := st.Send(withOffset(fd, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	acks, err := drain(st)
	if err != nil || len(acks) == 0 || acks[len(acks)-1].Records != 8*4_000 {
		t.Fatalf("acks %v, %v; want every row acknowledged", acks, err)
	}
	// The limiter's burst is a tenth of the rate; the rest of the bytes cannot arrive faster.
	if least := time.Duration(float64(total-rate/10) / rate * float64(time.Second)); time.Since(sent) < least {
		t.Errorf("%d bytes at %d B/s arrived in %v; the cap allows no less than %v", total, rate, time.Since(sent), least)
	}
	e.flushCount(name)
	sameRows(t, scan(t, e.wh, name), expected(t, ts.Arrow(), [2]int64{0, 8 * 4_000}))
}
