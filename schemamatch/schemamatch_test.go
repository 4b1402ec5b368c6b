package schemamatch_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

func mustTable(t testing.TB, cols string) *tableschema.Schema {
	t.Helper()
	s, err := tableschema.ParseColumns(cols)
	if err != nil {
		t.Fatalf("ParseColumns(%q): %v", cols, err)
	}
	return s
}

func recordFromJSON(t testing.TB, mem memory.Allocator, s *arrow.Schema, js string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, s, strings.NewReader(js))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	return rec
}

func TestEveryProblemInOneError(t *testing.T) {
	table := mustTable(t, "id BIGINT NOT NULL, name STRING, price DECIMAL(10,2), must INT NOT NULL, ok DOUBLE")
	src := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Float64},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 12, Scale: 4}, Nullable: true},
		{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "t", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "ok", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	}, nil)
	_, err := schemamatch.NewPlan(src, table, schemamatch.WithSource("data/part-0.parquet"))
	var me *schemamatch.MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("NewPlan = %v; want *MismatchError", err)
	}
	want := []schemamatch.Problem{
		{Column: "id", Expected: "BIGINT NOT NULL", Actual: "float64", Reason: "cannot cast float64 to BIGINT"},
		{Column: "name", Expected: "STRING", Actual: "int32", Reason: "no implicit cast from int32 to STRING"},
		{Column: "price", Expected: "DECIMAL(10,2)", Actual: "decimal(12, 4)"},
		{Column: "must", Expected: "INT NOT NULL", Reason: "missing NOT NULL column"},
		{Column: "extra", Actual: "utf8", Reason: "not in table"},
		{Column: "t", Actual: "time64[us]", Reason: "not in table"},
	}
	if len(me.Problems) != len(want) {
		t.Fatalf("got %d problems %+v; want %d", len(me.Problems), me.Problems, len(want))
	}
	for i, w := range want {
		g := me.Problems[i]
		if g.Column != w.Column || g.Expected != w.Expected || g.Actual != w.Actual || (w.Reason != "" && g.Reason != w.Reason) {
			t.Errorf("problem %d = %+v; want %+v", i, g, w)
		}
	}
	msg := err.Error()
	for _, s := range []string{"data/part-0.parquet", "6 problems", `column "must": expected INT NOT NULL`, `column "extra": actual utf8: not in table`} {
		if !strings.Contains(msg, s) {
			t.Errorf("Error() = %q; want it to contain %q", msg, s)
		}
	}
}

func TestMatchByName(t *testing.T) {
	table := mustTable(t, "a BIGINT NOT NULL, b STRING, c DOUBLE")
	src := arrow.NewSchema([]arrow.Field{
		{Name: "C", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "A", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	tests := []struct {
		name    string
		opts    []schemamatch.Option
		wantErr string
	}{
		{name: "exact names refuse other case", wantErr: `(the table has "c"; use case-insensitive matching)`},
		{name: "case-insensitive", opts: []schemamatch.Option{schemamatch.WithCaseInsensitive(true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			plan, err := schemamatch.NewPlan(src, table, append(tt.opts, schemamatch.WithAllocator(mem))...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewPlan = %v; want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPlan = %v", err)
			}
			rec := recordFromJSON(t, mem, src, `[{"C": 1.5, "A": 7}, {"C": null, "A": 8}]`)
			defer rec.Release()
			out, err := plan.Apply(rec)
			if err != nil {
				t.Fatalf("Apply = %v", err)
			}
			defer out.Release()
			want := recordFromJSON(t, mem, plan.Schema(), `[{"a": 7, "b": null, "c": 1.5}, {"a": 8, "b": null, "c": null}]`)
			defer want.Release()
			if !array.RecordEqual(out, want) {
				t.Errorf("Apply = %v; want %v", out, want)
			}
			steps := plan.Steps()
			wantSteps := []schemamatch.Step{
				{Column: "a", Action: `match source column "A"; copy`},
				{Column: "b", Action: "fill nulls"},
				{Column: "c", Action: `match source column "C"; copy`},
			}
			if fmt.Sprint(steps) != fmt.Sprint(wantSteps) {
				t.Errorf("Steps() = %v; want %v", steps, wantSteps)
			}
		})
	}
}

func TestDuplicateMatches(t *testing.T) {
	table := mustTable(t, "a BIGINT")
	src := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "A", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	_, err := schemamatch.NewPlan(src, table, schemamatch.WithCaseInsensitive(true))
	if err == nil || !strings.Contains(err.Error(), `source column "A" matches table column "a", as does source column "a"`) {
		t.Fatalf("NewPlan = %v; want a duplicate-match problem", err)
	}
}

func TestNotNullChecked(t *testing.T) {
	table := mustTable(t, "id BIGINT NOT NULL, s STRUCT<x: INT NOT NULL, y: STRING>, l ARRAY<STRING>")
	// Make the list element NOT NULL too.
	elem := tableschema.Primitive(tableschema.String)
	table.Fields[2].Type = tableschema.ArrayOf(elem, false)
	src := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	plan, err := schemamatch.NewPlan(src, table, schemamatch.WithSource("f.csv"))
	if err != nil {
		t.Fatalf("NewPlan = %v (nullable into NOT NULL is allowed statically)", err)
	}
	if verr := zerobus.ValidateSchema(table, plan.Schema()); verr != nil {
		t.Fatalf("ValidateSchema(Plan.Schema()) = %v", verr)
	}
	tests := []struct {
		name    string
		rows    string
		wantErr string // "" for success
	}{
		{name: "no nulls", rows: `[{"id":1,"s":{"x":1,"y":null},"l":["a"]}]`},
		{name: "null struct hides its null child", rows: `[{"id":1,"s":null,"l":null}]`},
		{name: "top-level null", rows: `[{"id":1,"s":null,"l":null},{"id":null,"s":null,"l":null}]`, wantErr: `f.csv: column "id" row 1: null in a NOT NULL column`},
		{name: "nested null", rows: `[{"id":1,"s":null,"l":null},{"id":2,"s":null,"l":null},{"id":3,"s":{"x":null,"y":"q"},"l":null}]`, wantErr: `column "s.x" row 2: null in a NOT NULL column`},
		{name: "list element null", rows: `[{"id":1,"s":null,"l":["a","b"]},{"id":2,"s":null,"l":["c",null]}]`, wantErr: `column "l.item" row 1: null in a NOT NULL column`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rec := recordFromJSON(t, mem, src, tt.rows)
			defer rec.Release()
			out, err := plan.Apply(rec)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Apply = %v", err)
				}
				out.Release()
				return
			}
			var ve *schemamatch.ValueError
			if !errors.As(err, &ve) || !errors.Is(err, schemamatch.ErrValue) {
				t.Fatalf("Apply = %v; want *ValueError", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Apply = %q; want %q", err, tt.wantErr)
			}
			// The same rows minus the first: the error moves up one row.
			if ve.Row >= 1 {
				sl := rec.NewSlice(1, rec.NumRows())
				defer sl.Release()
				_, err := plan.Apply(sl)
				var ve2 *schemamatch.ValueError
				if !errors.As(err, &ve2) || ve2.Row != ve.Row-1 || ve2.Column != ve.Column {
					t.Errorf("Apply(slice from row 1) = %v; want column %s row %d", err, ve.Column, ve.Row-1)
				}
			}
		})
	}
}

func TestApplySharesUnchangedArrays(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := mustTable(t, "a BIGINT, s STRING, tags ARRAY<BIGINT>, ts TIMESTAMP")
	src := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}, Nullable: true},
	}, nil)
	plan, err := schemamatch.NewPlan(src, table, schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	rec := recordFromJSON(t, mem, src, `[{"a":1,"s":"x","tags":[1,2],"ts":5},{"a":null,"s":null,"tags":null,"ts":null}]`)
	defer rec.Release()
	out, err := plan.Apply(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if out.Column(0) != rec.Column(0) {
		t.Errorf("column a was not shared")
	}
	same := func(name string, a, b *memory.Buffer) {
		t.Helper()
		if a == nil || b == nil || &a.Bytes()[0] != &b.Bytes()[0] {
			t.Errorf("%s: buffer copied; want it shared", name)
		}
	}
	// utf8 -> large_utf8 shares the character data.
	same("s data", rec.Column(1).Data().Buffers()[2], out.Column(1).Data().Buffers()[2])
	// the list rename shares offsets and the child values.
	same("tags offsets", rec.Column(2).Data().Buffers()[1], out.Column(2).Data().Buffers()[1])
	same("tags values", rec.Column(2).Data().Children()[0].Buffers()[1], out.Column(2).Data().Children()[0].Buffers()[1])
	if got := out.Column(2).DataType().(*arrow.ListType).ElemField().Name; got != "item" {
		t.Errorf("list element named %q; want item", got)
	}
	// a zone relabel shares the values.
	same("ts values", rec.Column(3).Data().Buffers()[1], out.Column(3).Data().Buffers()[1])
}

func TestIdentityPlan(t *testing.T) {
	table := mustTable(t, "a BIGINT NOT NULL, s STRING")
	plan, err := schemamatch.NewPlan(table.Arrow(), table)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Identity() {
		t.Errorf("Identity() = false for the canonical schema")
	}
	src := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	plan, err = schemamatch.NewPlan(src, table)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Identity() {
		t.Errorf("Identity() = true for a plan that fills a column")
	}
}

// toStringScaled is the reference rendering: decimal128.Num.ToString after scaling.
func toStringScaled(n decimal128.Num, up, scale int32) string {
	return n.IncreaseScaleBy(up).ToString(scale)
}

func TestDecimalTextIsToString(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	// values around the 64- and 128-bit boundaries the formatting splits at, and the widest
	edges := []string{"9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
		"9999999999999999999", "10000000000000000000", "99999999999999999999999999999999999999", "10000000000000000000000000000000000000"}
	// Values of up to 64 bits at the same scale are formatted by putDecimal, the others by the
	// general layout (appendUnscaled).
	for _, tc := range []struct{ ps, ss, pd, sd int32 }{{38, 0, 38, 0}, {38, 10, 38, 10}, {18, 2, 20, 4}, {9, 9, 10, 10}, {30, 5, 38, 13}, {5, 0, 5, 0}, {38, 18, 38, 18},
		{12, 2, 12, 2}, {18, 6, 18, 6}, {19, 3, 19, 3}, {4, 4, 4, 4}, {9, 1, 9, 1}} {
		var bigs []*big.Int
		for i := 0; i < 500; i++ {
			if i%11 == 5 {
				bigs = append(bigs, nil) // a null
				continue
			}
			digits := 1 + rng.IntN(int(tc.ps))
			s := ""
			for k := 0; k < digits; k++ {
				s += string(rune('0' + rng.IntN(10)))
			}
			bi, _ := new(big.Int).SetString(s, 10)
			if rng.IntN(2) == 0 {
				bi.Neg(bi)
			}
			bigs = append(bigs, bi)
		}
		for _, e := range edges {
			if len(e) <= int(tc.ps) {
				bi, _ := new(big.Int).SetString(e, 10)
				bigs = append(bigs, bi, new(big.Int).Neg(bi))
			}
		}
		bigs = append(bigs, new(big.Int)) // zero
		// build fills b with bigs (nil: a null) through add, which appends one and returns its text.
		build := func(b array.Builder, add func(*big.Int) string) (arrow.Array, []string) {
			defer b.Release()
			var want []string // "" for a null
			for _, bi := range bigs {
				if bi == nil {
					b.AppendNull()
					want = append(want, "")
					continue
				}
				want = append(want, add(bi))
			}
			return b.NewArray(), want
		}
		for _, width := range []int{128, 256, 64} {
			var (
				dt   arrow.DataType
				arr  arrow.Array
				want []string
			)
			switch width {
			case 256:
				dt = &arrow.Decimal256Type{Precision: tc.ps, Scale: tc.ss}
				b := array.NewDecimal256Builder(mem, dt.(*arrow.Decimal256Type))
				arr, want = build(b, func(bi *big.Int) string {
					n := decimal256.FromBigInt(bi)
					b.Append(n)
					return n.IncreaseScaleBy(tc.sd - tc.ss).ToString(tc.sd)
				})
			case 128:
				dt = &arrow.Decimal128Type{Precision: tc.ps, Scale: tc.ss}
				b := array.NewDecimal128Builder(mem, dt.(*arrow.Decimal128Type))
				arr, want = build(b, func(bi *big.Int) string {
					n := decimal128.FromBigInt(bi)
					b.Append(n)
					return toStringScaled(n, tc.sd-tc.ss, tc.sd)
				})
			case 64:
				if tc.ps > 18 {
					continue
				}
				dt = &arrow.Decimal64Type{Precision: tc.ps, Scale: tc.ss}
				b := array.NewDecimal64Builder(mem, dt.(*arrow.Decimal64Type))
				arr, want = build(b, func(bi *big.Int) string {
					b.Append(decimal.Decimal64(bi.Int64()))
					return toStringScaled(decimal128.FromBigInt(bi), tc.sd-tc.ss, tc.sd)
				})
			}
			src := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt, Nullable: true}}, nil)
			table := mustTable(t, fmt.Sprintf("d DECIMAL(%d,%d)", tc.pd, tc.sd))
			plan, err := schemamatch.NewPlan(src, table, schemamatch.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			rec := array.NewRecordBatch(src, []arrow.Array{arr}, int64(arr.Len()))
			arr.Release()
			// the whole batch, and a slice of it (values start at the array's offset)
			for _, from := range []int64{0, 7} {
				in := rec.NewSlice(from, rec.NumRows())
				out, err := plan.Apply(in)
				in.Release()
				if err != nil {
					t.Fatalf("Apply = %v", err)
				}
				got := out.Column(0).(*array.LargeString)
				for i, w := range want[from:] {
					if null := w == ""; got.IsNull(i) != null {
						t.Errorf("%s -> DECIMAL(%d,%d), rows from %d: value %d null %v; want %v", dt, tc.pd, tc.sd, from, i, got.IsNull(i), null)
					} else if got.Value(i) != w {
						t.Errorf("%s -> DECIMAL(%d,%d), rows from %d: value %d = %q; want %q", dt, tc.pd, tc.sd, from, i, got.Value(i), w)
					}
				}
				out.Release()
			}
			rec.Release()
		}
	}
}

// TestDecimalTextRescued: with a rescue column, a decimal value beyond the target's precision (as a
// corrupt file may hold) becomes null and goes to the rescue column, its neighbours and nulls as
// they were.
func TestDecimalTextRescued(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dt := &arrow.Decimal128Type{Precision: 4, Scale: 2}
	b := array.NewDecimal128Builder(mem, dt)
	b.Append(decimal128.FromI64(150))
	b.Append(decimal128.FromI64(1234567)) // one digit more than DECIMAL(6,2) holds
	b.AppendNull()
	b.Append(decimal128.FromI64(-5))
	arr := b.NewArray()
	b.Release()
	src := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt, Nullable: true}}, nil)
	plan, err := schemamatch.NewPlan(src, mustTable(t, "d DECIMAL(6,2), _rescued_data STRING"), schemamatch.WithRescueColumn("_rescued_data"), schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	rec := array.NewRecordBatch(src, []arrow.Array{arr}, int64(arr.Len()))
	arr.Release()
	defer rec.Release()
	out, err := plan.Apply(rec)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	defer out.Release()
	d := out.Column(0).(*array.LargeString)
	if d.NullN() != 2 || d.IsNull(0) || d.Value(0) != "1.50" || !d.IsNull(1) || !d.IsNull(2) || d.IsNull(3) || d.Value(3) != "-0.05" {
		t.Errorf("d = %v (%d nulls); want [1.50 null null -0.05]", d, d.NullN())
	}
	resc := out.Column(1).(*array.LargeString)
	if resc.IsNull(1) || !strings.Contains(resc.Value(1), `"d"`) || !resc.IsNull(0) {
		t.Errorf("rescued = %v; want row 1 only, naming d", resc)
	}
}

// TestDecimalBeyond128Bits: a decimal256 value wider than its declared precision and than 128 bits
// (a corrupt file) fails, naming the row.
func TestDecimalBeyond128Bits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dt := &arrow.Decimal256Type{Precision: 38, Scale: 0}
	b := array.NewDecimal256Builder(mem, dt)
	b.Append(decimal256.FromI64(-7))
	huge, _ := new(big.Int).SetString("-1"+strings.Repeat("0", 60), 10)
	b.Append(decimal256.FromBigInt(huge))
	arr := b.NewArray()
	b.Release()
	src := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt, Nullable: true}}, nil)
	plan, err := schemamatch.NewPlan(src, mustTable(t, "d DECIMAL(38,0)"), schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	rec := array.NewRecordBatch(src, []arrow.Array{arr}, int64(arr.Len()))
	arr.Release()
	defer rec.Release()
	_, err = plan.Apply(rec)
	var ve *schemamatch.ValueError
	if !errors.As(err, &ve) || ve.Row != 1 || !strings.Contains(ve.Reason, "more digits than DECIMAL(38,0)") {
		t.Errorf("Apply(61-digit decimal256) = %v; want a ValueError at row 1", err)
	}
}

func TestValueErrorsNameRowNotValue(t *testing.T) {
	secret := "12345.678901"
	tests := []struct {
		name string
		src  arrow.DataType
		js   string
		col  string
		row  int64
	}{
		{name: "decimal text too precise", src: arrow.BinaryTypes.String, js: `["1.5","` + secret + `"]`, col: "DECIMAL(12,2)", row: 1},
		{name: "decimal text garbage", src: arrow.BinaryTypes.String, js: `["x` + secret + `"]`, col: "DECIMAL(12,2)", row: 0},
		{name: "timestamp overflow", src: &arrow.TimestampType{Unit: arrow.Second}, js: `[0, 0, 9223372036854775807]`, col: "TIMESTAMP", row: 2},
		{name: "decimal beyond its precision", src: &arrow.Decimal128Type{Precision: 4, Scale: 2}, js: "raw", col: "DECIMAL(6,2)", row: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src := arrow.NewSchema([]arrow.Field{{Name: "v", Type: tt.src, Nullable: true}}, nil)
			plan, err := schemamatch.NewPlan(src, mustTable(t, "v "+tt.col), schemamatch.WithAllocator(mem), schemamatch.WithSource("s.csv"))
			if err != nil {
				t.Fatal(err)
			}
			var arr arrow.Array
			if tt.js == "raw" { // a value beyond the declared precision, as a corrupt file may hold
				b := array.NewDecimal128Builder(mem, tt.src.(*arrow.Decimal128Type))
				b.Append(decimal128.FromI64(1234567)) // one digit more than DECIMAL(6,2) holds
				arr = b.NewArray()
				b.Release()
			} else {
				arr = fromJSON(t, mem, tt.src, tt.js)
			}
			rec := array.NewRecordBatch(src, []arrow.Array{arr}, int64(arr.Len()))
			arr.Release()
			defer rec.Release()
			_, err = plan.Apply(rec)
			var ve *schemamatch.ValueError
			if !errors.As(err, &ve) {
				t.Fatalf("Apply = %v; want *ValueError", err)
			}
			if ve.Column != "v" || ve.Row != tt.row || ve.Source != "s.csv" {
				t.Errorf("ValueError = %+v; want column v row %d source s.csv", ve, tt.row)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "1234") {
				t.Errorf("error %q contains the value", err)
			}
		})
	}
}

func TestTimestampNanosTruncate(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := arrow.NewSchema([]arrow.Field{{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true}}, nil)
	plan, err := schemamatch.NewPlan(src, mustTable(t, "t TIMESTAMP_NTZ"), schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	rec := recordFromJSON(t, mem, src, `[{"t":1001},{"t":999},{"t":-1},{"t":-1000},{"t":-1001},{"t":9223372036854775807},{"t":null}]`)
	defer rec.Release()
	out, err := plan.Apply(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	got := out.Column(0).(*array.Timestamp)
	want := []arrow.Timestamp{1, 0, -1, -1, -2, 9223372036854775}
	for i, w := range want {
		if got.Value(i) != w {
			t.Errorf("ns %d -> us = %d; want %d (floor)", i, got.Value(i), w)
		}
	}
	if !got.IsNull(6) {
		t.Errorf("null not kept")
	}
}

func TestRescueColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := mustTable(t, "id BIGINT NOT NULL, price DECIMAL(5,2), _rescued_data STRING")
	src := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "price", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "extra", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	plan, err := schemamatch.NewPlan(src, table, schemamatch.WithRescueColumn("_rescued_data"), schemamatch.WithSource("in.csv"), schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatalf("NewPlan = %v", err)
	}
	if verr := zerobus.ValidateSchema(table, plan.Schema()); verr != nil {
		t.Fatal(verr)
	}
	rec := recordFromJSON(t, mem, src, `[{"id":1,"price":"1.5","extra":null,"f":null},{"id":2,"price":"oops","extra":7,"f":null},{"id":3,"price":null,"extra":null,"f":2.5}]`)
	defer rec.Release()
	out, err := plan.Apply(rec)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	defer out.Release()
	price := out.Column(1).(*array.LargeString)
	if price.Value(0) != "1.50" || !price.IsNull(1) || !price.IsNull(2) {
		t.Errorf("price = %v; want [1.50 null null]", price)
	}
	resc := out.Column(2).(*array.LargeString)
	if !resc.IsNull(0) {
		t.Errorf("row 0 rescued %q; want null", resc.Value(0))
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(resc.Value(1)), &got); err != nil {
		t.Fatalf("row 1 rescue %q: %v", resc.Value(1), err)
	}
	if got["extra"] != float64(7) || got["price"] != "oops" || got["_file_path"] != "in.csv" {
		t.Errorf("row 1 rescue = %v", got)
	}
	if want := `{"f":2.5,"_file_path":"in.csv"}`; resc.Value(2) != want {
		t.Errorf("row 2 rescue = %s; want %s", resc.Value(2), want)
	}

	// A rescue column the table lacks, or of the wrong type, is a problem.
	if _, err := schemamatch.NewPlan(src, mustTable(t, "id BIGINT"), schemamatch.WithRescueColumn("nope")); err == nil || !strings.Contains(err.Error(), "rescue column is not in the table") {
		t.Errorf("NewPlan with a missing rescue column = %v", err)
	}
	if _, err := schemamatch.NewPlan(src, mustTable(t, "id BIGINT, r INT"), schemamatch.WithRescueColumn("r")); err == nil || !strings.Contains(err.Error(), "nullable STRING") {
		t.Errorf("NewPlan with an INT rescue column = %v", err)
	}
}

func TestStrictMode(t *testing.T) {
	table := mustTable(t, "a BIGINT, s STRING, l ARRAY<BIGINT>, d DECIMAL(5,2)")
	canonical := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "l", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true},
		{Name: "d", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	if _, err := schemamatch.NewPlan(canonical, table, schemamatch.WithMode(schemamatch.ModeStrict)); err != nil {
		t.Errorf("strict NewPlan of canonical types (renamed list child, omitted column) = %v", err)
	}
	loose := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	_, err := schemamatch.NewPlan(loose, table, schemamatch.WithMode(schemamatch.ModeStrict))
	var me *schemamatch.MismatchError
	if !errors.As(err, &me) || len(me.Problems) != 2 || !strings.Contains(me.Problems[0].Reason, "strict schema mode") {
		t.Errorf("strict NewPlan(int32, utf8) = %v; want two strict-mode problems", err)
	}
	if _, err := schemamatch.NewPlan(loose, table); err != nil {
		t.Errorf("by-name NewPlan(int32, utf8) = %v", err)
	}
	for _, s := range []string{"strict", "by-name", ""} {
		if _, err := schemamatch.ParseMode(s); err != nil {
			t.Errorf("ParseMode(%q) = %v", s, err)
		}
	}
	if _, err := schemamatch.ParseMode("loose"); err == nil {
		t.Errorf("ParseMode(loose) = nil error")
	}
}

func TestApplyRefusesOtherSchema(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := mustTable(t, "a BIGINT")
	src := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	plan, err := schemamatch.NewPlan(src, table)
	if err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	rec := recordFromJSON(t, mem, other, `[{"a":1}]`)
	defer rec.Release()
	if _, err := plan.Apply(rec); err == nil || !errors.Is(err, schemamatch.ErrMismatch) {
		t.Errorf("Apply(batch of another schema) = %v; want ErrMismatch", err)
	}
}

func TestPlanConcurrentApply(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := mustTable(t, "a BIGINT, s STRING, d DECIMAL(10,2)")
	src := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "d", Type: &arrow.Decimal128Type{Precision: 9, Scale: 1}, Nullable: true},
	}, nil)
	plan, err := schemamatch.NewPlan(src, table, schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	rec := recordFromJSON(t, mem, src, `[{"a":1,"s":"x","d":"1.5"},{"a":null,"s":null,"d":null}]`)
	defer rec.Release()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				out, err := plan.Apply(rec)
				if err != nil {
					errs <- err
					return
				}
				v := out.Column(2).(*array.LargeString).Value(0)
				out.Release()
				if v != "1.50" {
					errs <- fmt.Errorf("d = %q", v)
					return // one error per goroutine: the channel holds them all
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestBinaryAsString(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary, arrow.BinaryTypes.BinaryView, &arrow.FixedSizeBinaryType{ByteWidth: 2}} {
		t.Run(dt.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src := arrow.NewSchema([]arrow.Field{{Name: "s", Type: dt, Nullable: true}, {Name: "r", Type: arrow.BinaryTypes.LargeString, Nullable: true}}, nil)
			table := mustTable(t, "s STRING, r STRING")
			if _, err := schemamatch.NewPlan(src, table); !errors.Is(err, schemamatch.ErrMismatch) {
				t.Fatalf("NewPlan without WithBinaryAsString = %v; want ErrMismatch", err)
			}
			plan, err := schemamatch.NewPlan(src, table, schemamatch.WithBinaryAsString(true), schemamatch.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			// "aGk=" is "hi"; "/w==" + "/w==" style bytes 0xff are not UTF-8
			good := `[{"s":"aGk=","r":null},{"s":null,"r":null},{"s":"b2s=","r":null}]`
			rec := recordFromJSON(t, mem, src, good)
			out, err := plan.Apply(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Column(0).(*array.LargeString); got.Value(0) != "hi" || !got.IsNull(1) || got.Value(2) != "ok" {
				t.Errorf("Apply = %v", got)
			}
			out.Release()
			rec = recordFromJSON(t, mem, src, `[{"s":"aGk=","r":null},{"s":"//8=","r":null}]`)
			_, err = plan.Apply(rec)
			rec.Release()
			var ve *schemamatch.ValueError
			if !errors.As(err, &ve) || ve.Row != 1 || ve.Reason != "not valid UTF-8" {
				t.Errorf("Apply(invalid UTF-8) = %v; want a ValueError at row 1", err)
			}
		})
	}
}
