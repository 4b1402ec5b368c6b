package warehouse_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// allTypes is a schema with every column type, nested nullability at every level and decimals at
// several precisions and scales.
func allTypes(t testing.TB) *tableschema.Schema {
	s := mustColumns(t, `b TINYINT, s SMALLINT, i INT NOT NULL, l BIGINT, f FLOAT, d DOUBLE, ok BOOLEAN,
		str STRING, bin BINARY, dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ,
		d1 DECIMAL(1,0), d5 DECIMAL(5,2), d18 DECIMAL(18,6), d38 DECIMAL(38,10), d38s DECIMAL(38,38), d20 DECIMAL(20,0),
		tags ARRAY<STRING>, nums ARRAY<DECIMAL(10,2)>, m MAP<STRING, INT>, md MAP<INT, DECIMAL(12,3)>,
		st STRUCT<x: DOUBLE NOT NULL, y: STRING, inner: STRUCT<z: DECIMAL(9,2), w: ARRAY<INT>>>,
		aos ARRAY<STRUCT<a: INT, b: STRING>>`)
	// Non-nullable elements and values cannot be written in SQL; add them by hand.
	s.Fields = append(s.Fields,
		tableschema.Field{Name: "req", Type: tableschema.ArrayOf(tableschema.Primitive(tableschema.Int), false), Nullable: true},
		tableschema.Field{Name: "mreq", Type: tableschema.MapOf(tableschema.Primitive(tableschema.String), tableschema.DecimalOf(4, 1), false), Nullable: true},
	)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

// allTypesJSON holds rows of allTypes with nulls at every level; decimals are in canonical form so
// that a round trip returns exactly these values.
const allTypesJSON = `[
{"b": -128, "s": -32768, "i": -2147483648, "l": -9223372036854775808, "f": -1.5, "d": -1e300, "ok": false,
 "str": "", "bin": "", "dt": "1970-01-01", "ts": "1969-12-31T23:59:59.999999Z", "ntz": "2024-02-29T12:00:00.000001",
 "d1": "-9", "d5": "-999.99", "d18": "-999999999999.999999", "d38": "-9999999999999999999999999999.9999999999",
 "d38s": "-0.99999999999999999999999999999999999999", "d20": "-99999999999999999999",
 "tags": [], "nums": [], "m": [], "md": [],
 "st": {"x": 0, "y": "", "inner": {"z": "0.00", "w": []}}, "aos": [], "req": [], "mreq": []},
{"b": 127, "s": 32767, "i": 2147483647, "l": 9223372036854775807, "f": 3.25, "d": 2.5, "ok": true,
 "str": "héllo wörld ✓", "bin": "AAEC/w==", "dt": "2024-12-31", "ts": "2024-06-01T01:02:03.456789Z", "ntz": "1900-01-01T00:00:00",
 "d1": "9", "d5": "999.99", "d18": "123456789012.123456", "d38": "9999999999999999999999999999.9999999999",
 "d38s": "0.00000000000000000000000000000000000001", "d20": "18446744073709551616",
 "tags": ["a", null, "c"], "nums": ["1.50", null, "-0.01"], "m": [{"key": "k1", "value": 1}, {"key": "k2", "value": null}],
 "md": [{"key": 7, "value": "-12.345"}, {"key": 8, "value": null}],
 "st": {"x": -1.25, "y": null, "inner": {"z": null, "w": [1, null, 3]}},
 "aos": [{"a": 1, "b": "x"}, null, {"a": null, "b": null}], "req": [1, 2, 3], "mreq": [{"key": "a", "value": "0.5"}]},
{"b": null, "s": null, "i": 0, "l": null, "f": null, "d": null, "ok": null,
 "str": null, "bin": null, "dt": null, "ts": null, "ntz": null,
 "d1": null, "d5": null, "d18": null, "d38": null, "d38s": null, "d20": null,
 "tags": null, "nums": null, "m": null, "md": null, "st": null, "aos": null, "req": null, "mreq": null},
{"b": 0, "s": 0, "i": 1, "l": 0, "f": 0, "d": 0, "ok": true,
 "str": "z", "bin": "/w==", "dt": "1969-07-20", "ts": "2000-01-01T00:00:00Z", "ntz": "2000-01-01T00:00:00",
 "d1": "0", "d5": "0.00", "d18": "-0.000001", "d38": "0.0000000000", "d38s": "0.00000000000000000000000000000000000000", "d20": "0",
 "tags": [null], "nums": [null], "m": [{"key": "", "value": 0}], "md": [],
 "st": {"x": 1, "y": "y", "inner": null}, "aos": [null], "req": [0], "mreq": [{"key": "n", "value": "-999.9"}]}
]`

func recordFromJSON(t testing.TB, mem memory.Allocator, schema *arrow.Schema, js string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, schema, strings.NewReader(js))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	return rec
}

// scanAll scans the table and concatenates the batches into one record.
func scanAll(t testing.TB, mem memory.Allocator, tbl *warehouse.Table) arrow.RecordBatch {
	t.Helper()
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	err := tbl.Scan(context.Background(), func(rec arrow.RecordBatch) error {
		rec.Retain()
		batches = append(batches, rec)
		return nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if len(batches) == 0 {
		s, err := tbl.Schema(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return array.NewRecordBatch(s.Arrow(), nil, 0)
	}
	return concatRecords(t, mem, batches...)
}

func assertRecordsEqual(t testing.TB, got, want arrow.RecordBatch) {
	t.Helper()
	if !got.Schema().Equal(want.Schema()) {
		t.Fatalf("schema = %s\nwant %s", got.Schema(), want.Schema())
	}
	if got.NumRows() != want.NumRows() {
		t.Fatalf("rows = %d; want %d", got.NumRows(), want.NumRows())
	}
	for i := range int(want.NumCols()) {
		if !array.ApproxEqual(got.Column(i), want.Column(i), array.WithNaNsEqual(true)) {
			t.Errorf("column %s = %v\nwant %v", want.ColumnName(i), got.Column(i), want.Column(i))
		}
	}
}

func TestRoundTripAllTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	wh := openWH(t, warehouse.WithAllocator(mem))
	schema := allTypes(t)
	tbl, err := wh.CreateTable(ctx, mustName(t, "c.s.all"), schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := recordFromJSON(t, mem, schema.Arrow(), allTypesJSON)
	defer rec.Release()
	if err := warehouse.NewChecker(schema).Check(rec); err != nil {
		t.Fatalf("Check: %v", err)
	}
	w := tbl.NewWriter()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatalf("Write: %v", err)
	}
	// The same rows again, as a slice with an offset.
	sl := rec.NewSlice(1, 4)
	defer sl.Release()
	if err := w.Write(ctx, sl); err != nil {
		t.Fatalf("Write(slice): %v", err)
	}
	res, err := w.Commit(ctx, warehouse.CommitOptions{})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if res.Version != 1 || res.Rows != 7 || res.Files != 1 || res.Bytes <= 0 {
		t.Errorf("Commit() = %+v; want version 1, 7 rows, 1 file", res)
	}
	got := scanAll(t, mem, tbl)
	defer got.Release()
	want := concatRecords(t, mem, rec, sl)
	defer want.Release()
	assertRecordsEqual(t, got, want)
	if !got.Schema().Equal(schema.Arrow()) {
		t.Errorf("Scan schema = %s; want the canonical %s", got.Schema(), schema.Arrow())
	}
}

// concatRecords returns one record of the rows of recs (at least one, all of the first's schema),
// column by column. The caller releases it.
func concatRecords(t testing.TB, mem memory.Allocator, recs ...arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, recs[0].NumCols())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
		defer c.Release()
	}
	return array.NewRecordBatch(recs[0].Schema(), cols, n)
}
