package warehouse_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

// relabel returns rec's columns under another schema with the same physical layout (to build
// batches whose nullability flags the builders would refuse). Nested types are retyped recursively.
func relabel(t testing.TB, rec arrow.RecordBatch, schema *arrow.Schema) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		d := retypeData(rec.Column(i).Data(), schema.Field(i).Type)
		cols[i] = array.MakeFromData(d)
		d.Release()
		defer cols[i].Release()
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows())
}

func retypeData(d arrow.ArrayData, dt arrow.DataType) arrow.ArrayData {
	var children []arrow.ArrayData
	switch dt := dt.(type) {
	case *arrow.MapType:
		children = []arrow.ArrayData{retypeData(d.Children()[0], dt.Elem())}
	case *arrow.ListType:
		children = []arrow.ArrayData{retypeData(d.Children()[0], dt.Elem())}
	case *arrow.StructType:
		for i, f := range dt.Fields() {
			children = append(children, retypeData(d.Children()[i], f.Type))
		}
	}
	out := array.NewData(dt, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	for _, c := range children {
		c.Release()
	}
	return out
}

func TestChecker(t *testing.T) {
	tests := []struct {
		name    string
		cols    string
		table   func(*tableschema.Schema) // adjusts the table schema (for nullability SQL cannot say)
		js      string
		build   string // when set, the batch is built with this schema, then relabelled to the table's
		wantCol string
		wantRow int
		wantMsg string
		wantErr error  // what the error wraps besides ErrBadValue
		secret  string // a value that must not appear in the error
	}{
		{name: "ok nested nulls under null parents", cols: "st STRUCT<x: INT NOT NULL>, a ARRAY<STRUCT<y: INT NOT NULL>>",
			build: "st STRUCT<x: INT>, a ARRAY<STRUCT<y: INT>>", js: `[{"st": null, "a": [null]}, {"st": {"x": 1}, "a": null}]`},
		{name: "null in NOT NULL column", cols: "id BIGINT NOT NULL, v STRING", js: `[{"id": 1, "v": "a"}, {"id": 2}, {"id": null, "v": "x"}]`,
			wantCol: "id", wantRow: 2, wantMsg: "null in a NOT NULL column"},
		{name: "null in NOT NULL struct field", cols: "st STRUCT<x: INT NOT NULL, y: STRING>",
			build: "st STRUCT<x: INT, y: STRING>",
			js:    `[{"st": {"x": 1}}, {"st": null}, {"st": {"y": "q"}}]`, wantCol: "st.x", wantRow: 2, wantMsg: "NOT NULL field"},
		{name: "null in NOT NULL field two levels down", cols: "st STRUCT<in: STRUCT<z: STRING NOT NULL>>",
			build: "st STRUCT<in: STRUCT<z: STRING>>",
			js:    `[{"st": {"in": null}}, {"st": null}, {"st": {"in": {"z": "ok"}}}, {"st": {"in": {}}}]`, wantCol: "st.in.z", wantRow: 3},
		{name: "null in NOT NULL field inside an array", cols: "a ARRAY<STRUCT<y: INT NOT NULL>>",
			build: "a ARRAY<STRUCT<y: INT>>",
			js:    `[{"a": [{"y": 1}]}, {"a": null}, {"a": [{"y": 2}, null, {"y": null}]}]`, wantCol: "a.element.y", wantRow: 2},
		{name: "null array element", cols: "a ARRAY<INT>", table: func(s *tableschema.Schema) {
			s.Fields[0].Type = tableschema.ArrayOf(tableschema.Primitive(tableschema.Int), false)
		}, js: `[{"a": [1, 2]}, {"a": []}, {"a": null}, {"a": [3, null]}]`, build: "a ARRAY<INT>", wantCol: "a.element", wantRow: 3},
		{name: "null map value", cols: "m MAP<STRING, INT>", table: func(s *tableschema.Schema) {
			s.Fields[0].Type = tableschema.MapOf(tableschema.Primitive(tableschema.String), tableschema.Primitive(tableschema.Int), false)
		}, js: `[{"m": [{"key": "a", "value": 1}]}, {"m": [{"key": "b", "value": null}]}]`, build: "m MAP<STRING, INT>", wantCol: "m.value", wantRow: 1},
		{name: "decimal needs rounding", cols: "p DECIMAL(5,2)", js: `[{"p": "1.50"}, {"p": "123.456789"}]`,
			wantCol: "p", wantRow: 1, wantErr: tableschema.ErrDecimalRounding, secret: "123.456789"},
		{name: "decimal overflow", cols: "p DECIMAL(5,2)", js: `[{"p": "-999.99"}, {"p": null}, {"p": "-1000"}]`,
			wantCol: "p", wantRow: 2, wantErr: tableschema.ErrDecimalOverflow, secret: "-1000"},
		{name: "decimal garbage", cols: "p DECIMAL(38,0)", js: `[{"p": "1"}, {"p": "12abc34"}]`,
			wantCol: "p", wantRow: 1, wantErr: tableschema.ErrDecimalSyntax, secret: "12abc34"},
		{name: "decimal empty", cols: "p DECIMAL(3,0)", js: `[{"p": ""}]`, wantCol: "p", wantRow: 0, wantErr: tableschema.ErrDecimalSyntax},
		{name: "decimal in array", cols: "a ARRAY<DECIMAL(4,1)>", js: `[{"a": ["1.0"]}, {"a": null}, {"a": ["2", "3.25"]}]`,
			wantCol: "a.element", wantRow: 2, wantErr: tableschema.ErrDecimalRounding, secret: "3.25"},
		{name: "decimal in map value", cols: "m MAP<INT, DECIMAL(4,1)>", js: `[{"m": [{"key": 1, "value": "99999"}]}]`,
			wantCol: "m.value", wantRow: 0, wantErr: tableschema.ErrDecimalOverflow, secret: "99999"},
		{name: "decimal in struct", cols: "s STRUCT<in: STRUCT<z: DECIMAL(9,2)>>", js: `[{"s": {"in": {"z": "1"}}}, {"s": {"in": {"z": "1e3"}}}]`,
			wantCol: "s.in.z", wantRow: 1, wantErr: tableschema.ErrDecimalSyntax, secret: "1e3"},
		{name: "bad decimal under a null struct is ignored", cols: "s STRUCT<z: DECIMAL(9,2)>", build: "s STRUCT<z: STRING>",
			js: `[{"s": null}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			schema := mustColumns(t, tt.cols)
			if tt.table != nil {
				tt.table(schema)
			}
			var rec arrow.RecordBatch
			if tt.build != "" {
				raw := recordFromJSON(t, mem, mustColumns(t, tt.build).Arrow(), tt.js)
				rec = relabel(t, raw, schema.Arrow())
				raw.Release()
			} else {
				rec = recordFromJSON(t, mem, schema.Arrow(), tt.js)
			}
			defer rec.Release()
			if serr := zerobus.ValidateSchema(schema, rec.Schema()); serr != nil {
				t.Fatalf("test batch does not pass ValidateSchema: %v", serr)
			}
			err := warehouse.NewChecker(schema).Check(rec)
			if tt.wantCol == "" {
				if err != nil {
					t.Fatalf("Check() = %v; want nil", err)
				}
				return
			}
			checkBadValue(t, err, tt.wantCol, tt.wantRow, tt.wantMsg, tt.secret)
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Check() = %v; want it to wrap %v", err, tt.wantErr)
			}

			// Writer.Write refuses the batch the same way, writes nothing and stays usable.
			ctx := context.Background()
			wh := openWH(t, warehouse.WithAllocator(mem))
			tbl, err := wh.CreateTable(ctx, mustName(t, "c.s.t"), schema)
			if err != nil {
				t.Fatal(err)
			}
			w := tbl.NewWriter()
			defer w.Abort()
			checkBadValue(t, w.Write(ctx, rec), tt.wantCol, tt.wantRow, tt.wantMsg, tt.secret)
			if n := countDataFiles(t, tbl); n != 0 {
				t.Errorf("after a refused Write the table dir has %d data files; want 0", n)
			}
			good := rec.NewSlice(0, int64(tt.wantRow))
			defer good.Release()
			if err := w.Write(ctx, good); err != nil {
				t.Fatalf("Write(rows before the bad one) = %v", err)
			}
			if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err != nil {
				t.Fatalf("Commit after a refused Write: %v", err)
			}
			if rows, _, err := tbl.Count(ctx); err != nil || rows != int64(tt.wantRow) {
				t.Errorf("Count() = %d, %v; want %d", rows, err, tt.wantRow)
			}
		})
	}
}

func checkBadValue(t *testing.T, err error, col string, row int, msg, secret string) {
	t.Helper()
	if !errors.Is(err, warehouse.ErrBadValue) {
		t.Fatalf("err = %v; want ErrBadValue", err)
	}
	s := err.Error()
	for _, want := range []string{`column "` + col + `"`, "row " + itoa(row)} {
		if !strings.Contains(s, want) {
			t.Errorf("err = %q; want it to contain %q", s, want)
		}
	}
	if msg != "" && !strings.Contains(s, msg) {
		t.Errorf("err = %q; want it to say %q", s, msg)
	}
	if secret != "" && strings.Contains(s, secret) {
		t.Errorf("err = %q contains the value %q", s, secret)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func countDataFiles(t testing.TB, tbl *warehouse.Table) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(tbl.Dir(), "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func TestWriteSchemaErrors(t *testing.T) {
	ctx := context.Background()
	_, tbl := checkedTable(t, "id BIGINT NOT NULL, name STRING")
	tests := []struct {
		name, cols string
	}{
		{"extra column", "id BIGINT NOT NULL, name STRING, extra INT"},
		{"missing NOT NULL", "name STRING"},
		{"wrong type", "id INT NOT NULL"},
		{"out of order", "name STRING, id BIGINT NOT NULL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := array.NewRecordBatch(mustColumns(t, tt.cols).Arrow(), nil, 0)
			defer rec.Release()
			w := tbl.NewWriter()
			defer w.Abort()
			err := w.Write(ctx, rec)
			var se *zerobus.SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("Write() = %v; want a *zerobus.SchemaError", err)
			}
		})
	}
}

// TestCheckersAreIndependent: checkers of different schemas, used at once, each check against their
// own (nothing is shared between them).
func TestCheckersAreIndependent(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	narrow, wide := mustColumns(t, "v DECIMAL(3,0)"), mustColumns(t, "v DECIMAL(6,0)")
	rec := recordFromJSON(t, mem, wide.Arrow(), `[{"v": "1000"}]`)
	defer rec.Release()
	checkers := []struct {
		c    *warehouse.Checker
		fits bool
	}{{warehouse.NewChecker(narrow), false}, {warehouse.NewChecker(wide), true}}
	var wg sync.WaitGroup
	for i := range 8 {
		ck := checkers[i%2]
		wg.Go(func() {
			for range 50 {
				err := ck.c.Check(rec)
				if fits := err == nil; fits != ck.fits || (err != nil && !errors.Is(err, tableschema.ErrDecimalOverflow)) {
					t.Errorf("Check(1000) = %v; want fits %t", err, ck.fits)
					return
				}
			}
		})
	}
	wg.Wait()
}
