package warehouse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/warehouse"
)

// idRecord builds a batch of "id BIGINT NOT NULL, name STRING" rows with ids [from, from+n).
func idRecord(mem memory.Allocator, from, n int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	names := b.Field(1).(*array.LargeStringBuilder)
	for i := from; i < from+n; i++ {
		ids.Append(int64(i))
		if i%7 == 3 {
			names.AppendNull()
		} else {
			names.Append(fmt.Sprintf("name-%06d", i))
		}
	}
	return b.NewRecordBatch()
}

const idCols = "id BIGINT NOT NULL, name STRING"

// scanIDs returns the ids a scan of an idCols table yields, in order, checking the names.
func scanIDs(t testing.TB, tbl *warehouse.Table) []int64 {
	t.Helper()
	var ids []int64
	err := tbl.Scan(context.Background(), func(rec arrow.RecordBatch) error {
		idc := rec.Column(0).(*array.Int64)
		names := rec.Column(1).(*array.LargeString)
		for i := 0; i < int(rec.NumRows()); i++ {
			id := idc.Value(i)
			if id%7 == 3 {
				if names.IsValid(i) {
					return fmt.Errorf("row id %d: name = %q; want null", id, names.Value(i))
				}
			} else if want := fmt.Sprintf("name-%06d", id); names.Value(i) != want {
				return fmt.Errorf("row id %d: name = %q; want %q", id, names.Value(i), want)
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return ids
}

// commitRecords writes recs with one Writer and commits them, failing the test on any error.
func commitRecords(t testing.TB, tbl *warehouse.Table, opts warehouse.CommitOptions, recs ...arrow.RecordBatch) warehouse.CommitResult {
	t.Helper()
	ctx := context.Background()
	w := tbl.NewWriter()
	defer w.Abort()
	for _, rec := range recs {
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Commit(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func seq(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// addActions returns the add actions of one version with their stats parsed.
func addActions(t testing.TB, tbl *warehouse.Table, version int64) []map[string]any {
	t.Helper()
	adds := actionsOf(readLog(t, tbl, version), "add")
	for _, a := range adds {
		var st map[string]any
		d := json.NewDecoder(strings.NewReader(a["stats"].(string)))
		d.UseNumber()
		if err := d.Decode(&st); err != nil {
			t.Fatalf("add stats %q: %v", a["stats"], err)
		}
		a["stats"] = st
	}
	return adds
}

func TestWriterRollsFiles(t *testing.T) {
	ctx := context.Background()
	mem, tbl := checkedTable(t, idCols)
	tests := []struct {
		name      string
		target    int64
		batches   int
		wantFiles func(n int) bool
	}{
		{"a file per write", 1, 5, func(n int) bool { return n == 5 }},
		{"small target", 16 << 10, 40, func(n int) bool { return n > 2 && n < 40 }},
		{"default target", 0, 10, func(n int) bool { return n == 1 }},
	}
	next := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []warehouse.WriterOption
			if tt.target > 0 {
				opts = append(opts, warehouse.WithTargetFileSize(tt.target))
			}
			w := tbl.NewWriter(opts...)
			start := next
			for range tt.batches {
				rec := idRecord(mem, next, 1000)
				err := w.Write(ctx, rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				next += 1000
			}
			if w.Rows() != int64(tt.batches*1000) {
				t.Errorf("Rows() = %d; want %d", w.Rows(), tt.batches*1000)
			}
			res, err := w.Commit(ctx, warehouse.CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantFiles(res.Files) {
				t.Errorf("Commit() made %d files for %d batches with target %d", res.Files, tt.batches, tt.target)
			}
			adds := addActions(t, tbl, res.Version)
			if len(adds) != res.Files {
				t.Fatalf("version %d has %d adds; CommitResult says %d files", res.Version, len(adds), res.Files)
			}
			// Files hold consecutive id ranges in order: check each file's stats against that.
			var total, bytes int64
			lo := int64(start)
			for _, a := range adds {
				st := a["stats"].(map[string]any)
				n, _ := st["numRecords"].(json.Number).Int64()
				mins := st["minValues"].(map[string]any)
				maxs := st["maxValues"].(map[string]any)
				if fmt.Sprint(mins["id"]) != fmt.Sprint(lo) || fmt.Sprint(maxs["id"]) != fmt.Sprint(lo+n-1) {
					t.Errorf("file %s: id min/max = %v/%v; want %d/%d", a["path"], mins["id"], maxs["id"], lo, lo+n-1)
				}
				size, _ := a["size"].(json.Number).Int64()
				fi, err := os.Stat(filepath.Join(tbl.Dir(), a["path"].(string)))
				if err != nil || fi.Size() != size {
					t.Errorf("file %s: size in log %d, on disk %v (%v)", a["path"], size, fi, err)
				}
				name := a["path"].(string)
				if !strings.HasPrefix(name, "part-") || !strings.HasSuffix(name, "-c000.snappy.parquet") || len(name) != len("part-00000-")+36+len("-c000.snappy.parquet") {
					t.Errorf("file name %q; want part-NNNNN-<uuid>-c000.snappy.parquet", name)
				}
				lo += n
				total += n
				bytes += size
			}
			if total != res.Rows || bytes != res.Bytes {
				t.Errorf("adds hold %d rows, %d bytes; CommitResult %+v", total, bytes, res)
			}
		})
	}
	if got := scanIDs(t, tbl); !slices.Equal(got, seq(0, next)) {
		t.Errorf("Scan() returned %d ids; want 0..%d in order", len(got), next-1)
	}
	if rows, _, err := tbl.Count(ctx); err != nil || rows != int64(next) {
		t.Errorf("Count() = %d, %v; want %d", rows, err, next)
	}
}

func TestWriterSubsetSchema(t *testing.T) {
	ctx := context.Background()
	cols := "id BIGINT NOT NULL, a STRING, p DECIMAL(5,2), s STRUCT<x: INT NOT NULL, l ARRAY<INT>>, m MAP<STRING, STRING>"
	schema := mustColumns(t, cols)
	mem, tbl := checkedTable(t, cols)
	w := tbl.NewWriter()
	only := func(names ...string) *arrow.Schema {
		var fields []arrow.Field
		for _, f := range schema.Arrow().Fields() {
			if slices.Contains(names, f.Name) {
				fields = append(fields, f)
			}
		}
		return arrow.NewSchema(fields, nil)
	}
	batches := []struct {
		schema *arrow.Schema
		js     string
	}{
		{only("id"), `[{"id": 1}, {"id": 2}]`},
		{only("id", "p"), `[{"id": 3, "p": "1.5"}, {"id": 4, "p": null}]`},
		{only("id", "s", "m"), `[{"id": 5, "s": {"x": 7, "l": [1]}, "m": [{"key": "k", "value": "v"}]}]`},
		{schema.Arrow(), `[{"id": 6, "a": "full", "p": "-2", "s": null, "m": null}]`},
		{only("id"), `[{"id": 7}]`},
	}
	for _, b := range batches {
		rec := recordFromJSON(t, mem, b.schema, b.js)
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("Write(%s): %v", b.schema, err)
		}
	}
	res, err := w.Commit(ctx, warehouse.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := recordFromJSON(t, mem, schema.Arrow(), `[
		{"id": 1}, {"id": 2}, {"id": 3, "p": "1.50"}, {"id": 4},
		{"id": 5, "s": {"x": 7, "l": [1]}, "m": [{"key": "k", "value": "v"}]},
		{"id": 6, "a": "full", "p": "-2.00"}, {"id": 7}]`)
	defer want.Release()
	got := scanAll(t, mem, tbl)
	defer got.Release()
	assertRecordsEqual(t, got, want)

	adds := addActions(t, tbl, res.Version)
	if len(adds) != 1 {
		t.Fatalf("%d adds; want 1", len(adds))
	}
	st := adds[0]["stats"].(map[string]any)
	wantNulls := `map[a:6 id:0 m:6 p:5 s:map[l:6 x:6]]`
	if got := fmt.Sprint(st["nullCount"]); got != wantNulls {
		t.Errorf("nullCount = %s; want %s", got, wantNulls)
	}
	if got := fmt.Sprint(st["minValues"]); got != "map[a:full id:1 p:-2.00 s:map[x:7]]" {
		t.Errorf("minValues = %s", got)
	}
	if got := fmt.Sprint(st["maxValues"]); got != "map[a:full id:7 p:1.50 s:map[x:7]]" {
		t.Errorf("maxValues = %s", got)
	}
}

func TestStats(t *testing.T) {
	cols := "s STRING, f FLOAT, d DOUBLE, bin BINARY, ok BOOLEAN, ts TIMESTAMP, ntz TIMESTAMP_NTZ, dt DATE, a ARRAY<INT>, m MAP<INT,INT>, st STRUCT<p: DECIMAL(6,3), q: STRING>"
	schema := mustColumns(t, cols)
	mem, tbl := checkedTable(t, cols)
	long := strings.Repeat("é", 31) + "xyz" // 34 characters
	rows := fmt.Sprintf(`[
	{"s": %q, "f": 1.5, "d": 1, "bin": "AA==", "ok": true, "ts": "2024-01-02T03:04:05.678999Z", "ntz": "2024-01-02T03:04:05.001", "dt": "2024-03-01", "a": [1, null], "m": [{"key": 1, "value": null}], "st": {"p": "-1.5", "q": "b"}},
	{"s": "b", "f": -0.25, "d": null, "bin": null, "ok": false, "ts": "1999-12-31T23:59:59Z", "ntz": null, "dt": "1900-01-01", "a": null, "m": null, "st": {"p": null, "q": null}},
	{"s": null, "f": null, "d": "NaN", "ok": null, "ts": null, "ntz": "1970-01-01T00:00:00", "dt": null, "a": [], "m": [], "st": null}]`, long)
	rec := recordFromJSON(t, mem, schema.Arrow(), rows)
	defer rec.Release()
	res := commitRecords(t, tbl, warehouse.CommitOptions{}, rec)
	st := addActions(t, tbl, res.Version)[0]["stats"].(map[string]any)
	if fmt.Sprint(st["numRecords"]) != "3" {
		t.Errorf("numRecords = %v; want 3", st["numRecords"])
	}
	mins, maxs := st["minValues"].(map[string]any), st["maxValues"].(map[string]any)
	wantMin := map[string]any{
		"s": "b", "f": "-0.25", "ts": "1999-12-31T23:59:59.000Z", "ntz": "1970-01-01T00:00:00.000",
		"dt": "1900-01-01", "st": "map[p:-1.500 q:b]",
	}
	wantMax := map[string]any{
		"s": strings.Repeat("é", 31) + "x\U0010FFFF", "f": "1.5", "ts": "2024-01-02T03:04:05.678Z", "ntz": "2024-01-02T03:04:05.001",
		"dt": "2024-03-01", "st": "map[p:-1.500 q:b]",
	}
	for name, want := range wantMin {
		if got := fmt.Sprint(mins[name]); got != fmt.Sprint(want) {
			t.Errorf("minValues.%s = %s; want %v", name, got, want)
		}
	}
	for name, want := range wantMax {
		if got := fmt.Sprint(maxs[name]); got != fmt.Sprint(want) {
			t.Errorf("maxValues.%s = %s; want %v", name, got, want)
		}
	}
	// No min/max for binary, boolean, arrays, maps, or a double column holding NaN.
	for _, name := range []string{"bin", "ok", "a", "m", "d"} {
		if _, ok := mins[name]; ok {
			t.Errorf("minValues has %s = %v; want none", name, mins[name])
		}
		if _, ok := maxs[name]; ok {
			t.Errorf("maxValues has %s = %v; want none", name, maxs[name])
		}
	}
	wantNulls := "map[a:1 bin:2 d:1 dt:1 f:1 m:1 ntz:1 ok:1 s:1 st:map[p:2 q:2] ts:1]"
	if got := fmt.Sprint(st["nullCount"]); got != wantNulls {
		t.Errorf("nullCount = %s; want %s", got, wantNulls)
	}

	// A long min is cut to 32 characters; a long max also gets U+10FFFF so it still bounds the value.
	rec2 := recordFromJSON(t, mem, schema.Arrow(), fmt.Sprintf(`[{"s": %q}, {"s": %q}]`, long, long+"z"))
	defer rec2.Release()
	res = commitRecords(t, tbl, warehouse.CommitOptions{}, rec2)
	st = addActions(t, tbl, res.Version)[0]["stats"].(map[string]any)
	if gotMin := st["minValues"].(map[string]any)["s"]; gotMin != strings.Repeat("é", 31)+"x" {
		t.Errorf("minValues.s = %q; want the 32-character prefix", gotMin)
	}
	gotMax := st["maxValues"].(map[string]any)["s"].(string)
	if want := strings.Repeat("é", 31) + "x\U0010FFFF"; gotMax != want {
		t.Errorf("maxValues.s = %q; want %q", gotMax, want)
	}
	if gotMax < long+"z" {
		t.Errorf("truncated max %q sorts below the value %q", gotMax, long+"z")
	}
}

func TestTxn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	wh := openWH(t, warehouse.WithAllocator(mem))
	tbl := createTable(t, wh, "c.s.t", idCols)
	commit := func(from int, txn *warehouse.Txn) (warehouse.CommitResult, error) {
		w := tbl.NewWriter()
		defer w.Abort()
		rec := idRecord(mem, from, 10)
		defer rec.Release()
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return w.Commit(ctx, warehouse.CommitOptions{Txn: txn})
	}
	steps := []struct {
		from    int
		txn     *warehouse.Txn
		wantErr error
	}{
		{0, &warehouse.Txn{AppID: "wal-a", Version: 1}, nil},
		{10, &warehouse.Txn{AppID: "wal-a", Version: 1}, warehouse.ErrTxnCommitted},
		{10, &warehouse.Txn{AppID: "wal-b", Version: 1}, nil},
		{20, &warehouse.Txn{AppID: "wal-a", Version: 5}, nil},
		{30, &warehouse.Txn{AppID: "wal-a", Version: 4}, warehouse.ErrTxnCommitted},
		{30, &warehouse.Txn{AppID: "wal-a", Version: 5}, warehouse.ErrTxnCommitted},
		{30, nil, nil},
	}
	for i, s := range steps {
		res, err := commit(s.from, s.txn)
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("step %d: Commit(%+v) = %v; want %v", i, s.txn, err, s.wantErr)
		}
		if err != nil {
			continue
		}
		if s.txn != nil {
			txns := actionsOf(readLog(t, tbl, res.Version), "txn")
			if len(txns) != 1 || txns[0]["appId"] != s.txn.AppID || fmt.Sprint(txns[0]["version"]) != fmt.Sprint(s.txn.Version) || txns[0]["lastUpdated"] == nil {
				t.Errorf("step %d: txn actions = %v", i, txns)
			}
		}
	}
	if n := countDataFiles(t, tbl); n != 4 {
		t.Errorf("table dir holds %d data files; want 4 (dropped commits delete theirs)", n)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(snap.Txns) != "map[wal-a:5 wal-b:1]" || snap.NumRecords != 40 || len(snap.Files) != 4 || snap.Version != 4 {
		t.Errorf("Snapshot() = %+v; want txns wal-a:5 wal-b:1, 40 rows in 4 files at version 4", snap)
	}
	if got := scanIDs(t, tbl); !slices.Equal(got, seq(0, 40)) {
		t.Errorf("Scan() = %v; want 0..39", got)
	}
	// A fresh Warehouse replays the same state from disk.
	wh2, err := warehouse.Open(wh.Dir())
	if err != nil {
		t.Fatal(err)
	}
	tbl2, err := wh2.Table(ctx, tbl.Name())
	if err != nil {
		t.Fatal(err)
	}
	snap2, err := tbl2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !snap2.Schema.Equal(snap.Schema) {
		t.Errorf("Snapshot().Schema from a fresh Warehouse = %s; want %s", snap2.Schema.SQL(), snap.Schema.SQL())
	}
	snap2.Schema = snap.Schema
	if fmt.Sprint(snap2) != fmt.Sprint(snap) {
		t.Errorf("Snapshot() from a fresh Warehouse = %+v; want %+v", snap2, snap)
	}
	// An empty AppID is refused.
	if _, err := commit(50, &warehouse.Txn{}); err == nil {
		t.Error("Commit with an empty Txn.AppID succeeded")
	}
}

func TestOverwrite(t *testing.T) {
	ctx := context.Background()
	mem, tbl := checkedTable(t, idCols)
	write := func(w *warehouse.Writer, from, n int) {
		t.Helper()
		rec := idRecord(mem, from, n)
		defer rec.Release()
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		w := tbl.NewWriter()
		write(w, i*10, 10)
		if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Overwrite with the same schema.
	w := tbl.NewWriter()
	write(w, 100, 5)
	res, err := w.Commit(ctx, warehouse.CommitOptions{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	log := readLog(t, tbl, res.Version)
	var removed []string
	for _, r := range actionsOf(log, "remove") {
		removed = append(removed, r["path"].(string))
		if r["dataChange"] != true || r["extendedFileMetadata"] != true || r["deletionTimestamp"] == nil || r["size"] == nil {
			t.Errorf("remove action = %v", r)
		}
	}
	var wantRemoved []string
	for _, f := range before.Files {
		wantRemoved = append(wantRemoved, f.Path)
	}
	slices.Sort(removed)
	slices.Sort(wantRemoved)
	if !slices.Equal(removed, wantRemoved) {
		t.Errorf("removed %v; want %v", removed, wantRemoved)
	}
	ci := actionsOf(log, "commitInfo")[0]
	if ci["isBlindAppend"] != false || fmt.Sprint(ci["operationParameters"]) != "map[mode:Overwrite partitionBy:[]]" {
		t.Errorf("overwrite commitInfo = %v", ci)
	}
	if got := scanIDs(t, tbl); !slices.Equal(got, seq(100, 5)) {
		t.Errorf("after overwrite Scan() = %v; want 100..104", got)
	}
	if rows, _, err := tbl.Count(ctx); err != nil || rows != 5 {
		t.Errorf("after overwrite Count() = %d, %v; want 5", rows, err)
	}

	// Overwrite with a new schema that needs the timestampNtz feature.
	newSchema := mustColumns(t, "k STRING NOT NULL, at TIMESTAMP_NTZ")
	w = tbl.NewWriter(warehouse.WithSchema(newSchema))
	rec := recordFromJSON(t, mem, newSchema.Arrow(), `[{"k": "a", "at": "2020-01-01T00:00:00"}, {"k": "b"}]`)
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	res, err = w.Commit(ctx, warehouse.CommitOptions{Overwrite: true, Schema: newSchema, Operation: "CREATE OR REPLACE TABLE AS SELECT"})
	if err != nil {
		t.Fatal(err)
	}
	log = readLog(t, tbl, res.Version)
	md := actionsOf(log, "metaData")
	if len(md) != 1 || md[0]["schemaString"] != newSchema.DeltaJSON() || md[0]["id"] != before.ID {
		t.Errorf("metaData = %v; want the new schema and the table's id %s", md, before.ID)
	}
	if pr := actionsOf(log, "protocol"); len(pr) != 1 || fmt.Sprint(pr[0]["readerFeatures"]) != "[timestampNtz]" {
		t.Errorf("protocol = %v; want an upgrade to the timestampNtz feature", pr)
	}
	if op := actionsOf(log, "commitInfo")[0]["operation"]; op != "CREATE OR REPLACE TABLE AS SELECT" {
		t.Errorf("commitInfo.operation = %v", op)
	}
	sch, err := tbl.Schema(ctx)
	if err != nil || !sch.Equal(newSchema) {
		t.Fatalf("Schema() = %v, %v; want %s", sch.SQL(), err, newSchema.SQL())
	}
	got := scanAll(t, mem, tbl)
	defer got.Release()
	assertRecordsEqual(t, got, rec)

	// Misuse: a schema without Overwrite; rows written for the old schema committed under a new one.
	w = tbl.NewWriter()
	if _, err := w.Commit(ctx, warehouse.CommitOptions{Schema: newSchema}); err == nil {
		t.Error("Commit(Schema without Overwrite) succeeded")
	}
	w.Abort()
	w = tbl.NewWriter() // the table's schema is newSchema now
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, warehouse.CommitOptions{Overwrite: true, Schema: mustColumns(t, idCols)}); !errors.Is(err, warehouse.ErrSchemaChanged) {
		t.Errorf("Commit(rows of another schema) = %v; want ErrSchemaChanged", err)
	}
	w.Abort()

	// Overwrite with no rows empties the table.
	w = tbl.NewWriter()
	if _, err := w.Commit(ctx, warehouse.CommitOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if rows, _, err := tbl.Count(ctx); err != nil || rows != 0 {
		t.Errorf("after an empty overwrite Count() = %d, %v; want 0", rows, err)
	}
}

func TestAbort(t *testing.T) {
	ctx := context.Background()
	mem, tbl := checkedTable(t, idCols)
	w := tbl.NewWriter(warehouse.WithTargetFileSize(1))
	for i := range 3 {
		rec := idRecord(mem, i*10, 10)
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if n := countDataFiles(t, tbl); n != 3 {
		t.Fatalf("%d staged files; want 3", n)
	}
	w.Abort()
	w.Abort()
	if n := countDataFiles(t, tbl); n != 0 {
		t.Errorf("after Abort %d data files remain; want 0", n)
	}
	rec := idRecord(mem, 0, 1)
	defer rec.Release()
	if err := w.Write(ctx, rec); err == nil {
		t.Error("Write after Abort succeeded")
	}
	if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	// Abort after Commit keeps the committed files.
	w = tbl.NewWriter()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err == nil {
		t.Error("second Commit succeeded")
	}
	if got := scanIDs(t, tbl); !slices.Equal(got, []int64{0}) {
		t.Errorf("Scan() = %v; want [0]", got)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	mem, tbl := checkedTable(t, idCols)
	rec := idRecord(mem, 0, 10)
	defer rec.Release()

	w := tbl.NewWriter()
	if err := w.Write(cancelled, rec); !errors.Is(err, context.Canceled) {
		t.Errorf("Write(cancelled) = %v; want context.Canceled", err)
	}
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(cancelled, warehouse.CommitOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit(cancelled) = %v; want context.Canceled", err)
	}
	if rows, v, err := tbl.Count(ctx); err != nil || rows != 0 || v != 0 {
		t.Errorf("after a cancelled Commit Count() = %d at version %d, %v; want 0 at 0", rows, v, err)
	}
	// The writer survives a cancelled Commit.
	if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err != nil {
		t.Fatalf("Commit after a cancelled one: %v", err)
	}
	called := false
	if err := tbl.Scan(cancelled, func(arrow.RecordBatch) error { called = true; return nil }); !errors.Is(err, context.Canceled) || called {
		t.Errorf("Scan(cancelled) = %v (callback called: %t); want context.Canceled", err, called)
	}
}

func TestScanCallbackError(t *testing.T) {
	ctx := context.Background()
	mem, tbl := checkedTable(t, idCols)
	for i := range 2 {
		rec := idRecord(mem, i, 1)
		commitRecords(t, tbl, warehouse.CommitOptions{}, rec)
		rec.Release()
	}
	stop := errors.New("stop")
	calls := 0
	err := tbl.Scan(ctx, func(arrow.RecordBatch) error { calls++; return stop })
	if err != stop || calls != 1 { //nolint:errorlint // Scan returns fn's error as is (its doc): identity is what is tested
		t.Errorf("Scan() = %v after %d calls; want the callback's error after 1", err, calls)
	}
}

func TestScanCorruptDataFile(t *testing.T) {
	ctx := context.Background()
	mem, tbl := checkedTable(t, idCols)
	rec := idRecord(mem, 0, 100)
	defer rec.Release()
	commitRecords(t, tbl, warehouse.CommitOptions{}, rec)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tbl.Dir(), snap.Files[0].Path)
	if err := os.Truncate(path, snap.Files[0].Size/2); err != nil {
		t.Fatal(err)
	}
	err = tbl.Scan(ctx, func(arrow.RecordBatch) error { return nil })
	if err == nil || !strings.Contains(err.Error(), snap.Files[0].Path) {
		t.Errorf("Scan(truncated file) = %v; want an error naming %s", err, snap.Files[0].Path)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	err = tbl.Scan(ctx, func(arrow.RecordBatch) error { return nil })
	if err == nil || !strings.Contains(err.Error(), snap.Files[0].Path) {
		t.Errorf("Scan(missing file) = %v; want an error naming %s", err, snap.Files[0].Path)
	}
}

// TestCountWithoutStats covers add actions written by other Delta writers without stats: Count and
// Snapshot read the row count from the Parquet footer.
func TestCountWithoutStats(t *testing.T) {
	ctx := context.Background()
	mem, tbl := checkedTable(t, idCols)
	rec := idRecord(mem, 0, 42)
	defer rec.Release()
	res := commitRecords(t, tbl, warehouse.CommitOptions{}, rec)
	add := actionsOf(readLog(t, tbl, res.Version), "add")[0]
	line := fmt.Sprintf(`{"add":{"path":%q,"partitionValues":{},"size":%s,"modificationTime":1,"dataChange":false}}`, add["path"], add["size"])
	write(t, filepath.Join(tbl.Dir(), "_delta_log", fmt.Sprintf("%020d.json", res.Version+1)), line+"\n")
	rows, v, err := tbl.Count(ctx)
	if err != nil || rows != 42 || v != res.Version+1 {
		t.Errorf("Count() = %d, %d, %v; want 42 at version %d", rows, v, err, res.Version+1)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil || snap.NumRecords != 42 || len(snap.Files) != 1 || snap.Files[0].NumRecords != 42 {
		t.Errorf("Snapshot() = %+v, %v; want one file of 42 rows", snap, err)
	}
}

// TestProtocolLimits covers tables written by other engines with features this package cannot
// honour: reads or writes are refused with an error naming the feature, never served wrongly.
func TestProtocolLimits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	tests := []struct {
		name      string
		action    string
		readErr   string // "" when reads work
		writeErr  string
		overwrite string // error of an overwrite when writes work
	}{
		{"deletion vectors", `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}`,
			"deletionVectors", "deletionVectors", ""},
		{"check constraints", `{"protocol":{"minReaderVersion":1,"minWriterVersion":3}}`, "", "writer version 3", ""},
		{"append only", `{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":` + jsonString(mustColumns(t, idCols).DeltaJSON()) +
			`,"partitionColumns":[],"configuration":{"delta.appendOnly":"true"}}}`, "", "", "append-only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := openWH(t, warehouse.WithAllocator(mem))
			tbl := createTable(t, wh, "c.s.t", idCols)
			write(t, filepath.Join(tbl.Dir(), "_delta_log", "00000000000000000001.json"), tt.action+"\n")
			_, _, err := tbl.Count(ctx)
			if tt.readErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.readErr) {
					t.Errorf("Count() = %v; want an error naming %q", err, tt.readErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Count() = %v", err)
			}
			rec := idRecord(mem, 0, 3)
			defer rec.Release()
			for _, overwrite := range []bool{false, true} {
				w := tbl.NewWriter()
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
				_, err = w.Commit(ctx, warehouse.CommitOptions{Overwrite: overwrite})
				w.Abort()
				want := tt.writeErr
				if overwrite && want == "" {
					want = tt.overwrite
				}
				if want == "" {
					if err != nil {
						t.Errorf("Commit(overwrite=%t) = %v", overwrite, err)
					}
				} else if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Commit(overwrite=%t) = %v; want an error naming %q", overwrite, err, want)
				}
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
