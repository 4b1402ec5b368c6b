package schemamatch_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// mutate turns a canonical type into one of the source types real files carry for it, chosen by
// rng: narrower integers, utf8, ns timestamps with zones, element-named lists, decimals, etc.
func mutate(rng *rand.Rand, dt arrow.DataType) arrow.DataType {
	if rng.IntN(3) == 0 {
		return dt
	}
	switch t := dt.(type) {
	case *arrow.Int64Type:
		return []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64, arrow.PrimitiveTypes.Float64}[rng.IntN(5)]
	case *arrow.Int32Type:
		return []arrow.DataType{arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Int64}[rng.IntN(3)]
	case *arrow.Float64Type:
		return []arrow.DataType{arrow.PrimitiveTypes.Float32, arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Int64}[rng.IntN(3)]
	case *arrow.LargeStringType:
		return []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.StringView, &arrow.Decimal128Type{Precision: int32(1 + rng.IntN(38)), Scale: int32(rng.IntN(5))},
			&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}}[rng.IntN(4)]
	case *arrow.LargeBinaryType:
		return []arrow.DataType{arrow.BinaryTypes.Binary, &arrow.FixedSizeBinaryType{ByteWidth: 2}}[rng.IntN(2)]
	case *arrow.TimestampType:
		units := []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond}
		zones := []string{"", "UTC", "Asia/Tokyo"}
		return &arrow.TimestampType{Unit: units[rng.IntN(4)], TimeZone: zones[rng.IntN(3)]}
	case *arrow.Date32Type:
		return arrow.FixedWidthTypes.Date64
	case *arrow.ListType:
		elem := t.ElemField()
		elem.Type = mutate(rng, elem.Type)
		elem.Nullable = rng.IntN(2) == 0
		switch rng.IntN(3) {
		case 0:
			elem.Name = "element"
			return arrow.ListOfField(elem)
		case 1:
			return arrow.LargeListOfField(elem)
		}
		return arrow.FixedSizeListOfField(2, elem)
	case *arrow.StructType:
		fields := append([]arrow.Field(nil), t.Fields()...)
		for i := range fields {
			fields[i].Type = mutate(rng, fields[i].Type)
		}
		rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		if len(fields) > 1 && rng.IntN(3) == 0 {
			fields = fields[1:]
		}
		return arrow.StructOf(fields...)
	case *arrow.MapType:
		return arrow.MapOf(mutate(rng, t.KeyType()), mutate(rng, t.ItemType()))
	}
	return dt
}

// FuzzPlan checks NewPlan and Apply on random schema pairs and rows: a plan is either refused
// with a *MismatchError or produces the canonical schema; Apply either fails with an error wrapping
// ErrValue or returns a valid batch of that schema with the same row count; nothing leaks or panics.
func FuzzPlan(f *testing.F) {
	f.Add("id BIGINT NOT NULL, name STRING, price DECIMAL(10,2)", "name STRING, id BIGINT, price STRING", `[{"id":1,"name":"a","price":"1.5"},{"id":2,"name":null,"price":null}]`, uint64(1), uint8(0))
	f.Add("t TIMESTAMP, d DATE, l ARRAY<INT>", "t TIMESTAMP, d DATE, l ARRAY<INT>", `[{"t":1,"d":1,"l":[1,2]},{"t":null,"d":null,"l":null}]`, uint64(7), uint8(1))
	f.Add("s STRUCT<a: INT, b: STRING>, m MAP<STRING, DOUBLE>", "s STRUCT<b: STRING, a: INT>, m MAP<STRING, DOUBLE>", `[{"s":{"a":1,"b":"x"},"m":[{"key":"k","value":1.5}]}]`, uint64(3), uint8(2))
	f.Add("a TINYINT NOT NULL, r STRING", "a BIGINT, z BINARY", `[{"a":5,"z":"AA=="}]`, uint64(9), uint8(4))
	f.Fuzz(func(t *testing.T, tableCols, srcCols, rows string, seed uint64, flags uint8) {
		if len(tableCols) > 512 || len(srcCols) > 512 || len(rows) > 4096 {
			return
		}
		table, err := tableschema.ParseColumns(tableCols)
		if err != nil {
			return
		}
		srcTable, err := tableschema.ParseColumns(srcCols)
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, uint64(flags)))
		fields := srcTable.Arrow().Fields()
		for i := range fields {
			fields[i].Type = mutate(rng, fields[i].Type)
			if rng.IntN(4) == 0 {
				fields[i].Nullable = !fields[i].Nullable
			}
		}
		src := arrow.NewSchema(fields, nil)
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		rec, err := recordFromJSONSafe(mem, src, rows)
		if err != nil {
			return
		}
		defer rec.Release()
		opts := []schemamatch.Option{schemamatch.WithAllocator(mem), schemamatch.WithSource("fuzz")}
		if flags&1 != 0 {
			opts = append(opts, schemamatch.WithCaseInsensitive(true))
		}
		if flags&2 != 0 {
			opts = append(opts, schemamatch.WithMode(schemamatch.ModeStrict))
		}
		if flags&4 != 0 {
			opts = append(opts, schemamatch.WithRescueColumn("r"))
		}
		plan, err := schemamatch.NewPlan(src, table, opts...)
		if err != nil {
			var me *schemamatch.MismatchError
			if !errors.As(err, &me) || len(me.Problems) == 0 {
				t.Fatalf("NewPlan error %v is not a *MismatchError with problems", err)
			}
			return
		}
		if verr := zerobus.ValidateSchema(table, plan.Schema()); verr != nil {
			t.Fatalf("Plan.Schema() fails ValidateSchema: %v", verr)
		}
		out, err := plan.Apply(rec)
		if err != nil {
			if !errors.Is(err, schemamatch.ErrValue) {
				t.Fatalf("Apply error %v does not wrap ErrValue", err)
			}
			return
		}
		defer out.Release()
		if out.NumRows() != rec.NumRows() || !out.Schema().Equal(plan.Schema()) {
			t.Fatalf("Apply = %d rows of %s; want %d rows of %s", out.NumRows(), out.Schema(), rec.NumRows(), plan.Schema())
		}
		if err := array.ValidateRecordFull(out); err != nil {
			t.Fatalf("Apply output invalid: %v", err)
		}
		for i, col := range out.Columns() {
			if d := zerobus.TypeDiff(out.ColumnName(i), col.DataType(), table.Fields[i].Type.Arrow()); d != "" {
				t.Fatalf("column %s array type differs from canonical: %s", out.ColumnName(i), d)
			}
		}
	})
}

// recordFromJSONSafe builds the fuzz batch; arrow-go's JSON reader panics on some malformed input,
// which is the harness's input problem, not the plan's.
func recordFromJSONSafe(mem memory.Allocator, s *arrow.Schema, js string) (rec arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = nil, errors.New("bad JSON")
		}
	}()
	rec, _, err = array.RecordFromJSON(mem, s, strings.NewReader(js))
	return rec, err
}
