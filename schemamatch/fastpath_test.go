package schemamatch_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/schemamatch"
)

// TestFastCastsMatchSlowPaths checks every cast with a fast path (ns -> µs division, checked
// scaling of s, ms and dates to µs, dictionaries cast before they are unpacked) against the general
// path it replaces: the same values, nulls, errors (and rows) and rescued values, for whole and
// sliced inputs, with a checked allocator that must end empty.
func TestFastCastsMatchSlowPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ts := func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	// edges are values every integer column gets, whatever else it holds.
	edges := []int64{0, 1, -1, 999, -999, 1000, -1000, 1001, -1001, math.MaxInt64, math.MinInt64, math.MaxInt64 / 1000, math.MinInt64 / 1000,
		math.MaxInt64/1_000_000 + 1, math.MinInt64/1_000_000 - 1, math.MaxInt64 / 1_000_000, math.MinInt64 / 1_000_000}
	ints := func(n int, small bool) []int64 {
		out := make([]int64, n)
		for i := range out {
			switch {
			case i < len(edges) && !small:
				out[i] = edges[i]
			case small:
				out[i] = r.Int64N(2_000_000) - 1_000_000
			default:
				out[i] = r.Int64() - math.MaxInt64/2
			}
		}
		return out
	}
	cases := []struct {
		name  string
		table string
		build func(mem memory.Allocator, n int, nulls bool) arrow.Array
	}{
		{"timestamp ns to us", "c TIMESTAMP", func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			return timestamps(mem, ts(arrow.Nanosecond), ints(n, false), nulls, r)
		}},
		{"timestamp s to us, overflowing", "c TIMESTAMP", func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			return timestamps(mem, ts(arrow.Second), ints(n, false), nulls, r)
		}},
		{"timestamp s to us, in range", "c TIMESTAMP", func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			return timestamps(mem, ts(arrow.Second), ints(n, true), nulls, r)
		}},
		{"timestamp ms to us, in range", "c TIMESTAMP", func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			return timestamps(mem, ts(arrow.Millisecond), ints(n, true), nulls, r)
		}},
		{"date32 to timestamp_ntz", "c TIMESTAMP_NTZ", func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			b := array.NewDate32Builder(mem)
			defer b.Release()
			for i, v := range ints(n, false) {
				if nulls && i%5 == 1 {
					b.AppendNull()
					continue
				}
				b.Append(arrow.Date32(int32(v)))
			}
			return b.NewArray()
		}},
		{"date64 to timestamp_ntz", "c TIMESTAMP_NTZ", func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			b := array.NewDate64Builder(mem)
			defer b.Release()
			for i, v := range ints(n, false) {
				if nulls && i%5 == 1 {
					b.AppendNull()
					continue
				}
				b.Append(arrow.Date64(v))
			}
			return b.NewArray()
		}},
	}
	for _, idx := range []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32,
		arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64} {
		cases = append(cases, struct {
			name  string
			table string
			build func(mem memory.Allocator, n int, nulls bool) arrow.Array
		}{fmt.Sprintf("dictionary<%s, utf8> to STRING", idx), "c STRING", func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			return dictionary(mem, idx, arrow.BinaryTypes.String, 12, n, nulls, r)
		}})
	}
	for _, vt := range []struct {
		table string
		dt    arrow.DataType
		size  int
	}{
		{"c STRING", arrow.BinaryTypes.LargeString, 12},     // the values shared as they are
		{"c BINARY", arrow.BinaryTypes.Binary, 12},          // binary values
		{"c STRING", arrow.BinaryTypes.String, 1},           // one value
		{"c STRING", arrow.BinaryTypes.String, 100_000},     // more values than rows: unpacked first
		{"c BIGINT", arrow.PrimitiveTypes.Int16, 12},        // not binary: cast, then taken
		{"c TIMESTAMP", ts(arrow.Nanosecond), 12},           // a timestamp dictionary
		{"c STRING NOT NULL", arrow.BinaryTypes.String, 12}, // NOT NULL checked after the gather
	} {
		cases = append(cases, struct {
			name  string
			table string
			build func(mem memory.Allocator, n int, nulls bool) arrow.Array
		}{fmt.Sprintf("dictionary<int32, %s> of %d to %s", vt.dt, vt.size, vt.table), vt.table, func(mem memory.Allocator, n int, nulls bool) arrow.Array {
			return dictionary(mem, arrow.PrimitiveTypes.Int32, vt.dt, vt.size, n, nulls, r)
		}})
	}
	for _, tc := range cases {
		for _, nulls := range []bool{false, true} {
			for _, rescue := range []bool{false, true} {
				name := fmt.Sprintf("%s/nulls=%v/rescue=%v", tc.name, nulls, rescue)
				t.Run(name, func(t *testing.T) {
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					defer mem.AssertSize(t, 0)
					arr := tc.build(mem, 2000, nulls)
					defer arr.Release()
					compareFastSlow(t, mem, tc.table, arr, rescue)
				})
			}
		}
	}
}

// compareFastSlow applies the plan for arr into table with and without the fast paths, to arr whole
// and to slices of it, and compares the results.
func compareFastSlow(t *testing.T, mem memory.Allocator, table string, arr arrow.Array, rescue bool) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "c", Type: arr.DataType(), Nullable: true}}, nil)
	tbl := table
	var opts []schemamatch.Option
	if rescue {
		tbl += ", _rescued_data STRING"
		opts = append(opts, schemamatch.WithRescueColumn("_rescued_data"))
	}
	target := mustTable(t, tbl)
	fast, err := schemamatch.NewPlan(schema, target, append(opts, schemamatch.WithAllocator(mem))...)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := schemamatch.NewPlan(schema, target, append(opts, schemamatch.WithAllocator(mem), schemamatch.WithSlowCasts())...)
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range [][2]int{{0, arr.Len()}, {3, arr.Len()}, {17, 1000}, {arr.Len() - 1, arr.Len()}, {5, 5}} {
		a := array.NewSlice(arr, int64(sl[0]), int64(sl[1]))
		rec := array.NewRecordBatch(schema, []arrow.Array{a}, int64(a.Len()))
		a.Release()
		got, gerr := fast.Apply(rec)
		want, werr := slow.Apply(rec)
		rec.Release()
		switch {
		case werr != nil || gerr != nil:
			var gv, wv *schemamatch.ValueError
			if !errors.As(gerr, &gv) || !errors.As(werr, &wv) || gv.Row != wv.Row || gv.Reason != wv.Reason {
				t.Errorf("slice [%d:%d]: fast Apply = %v; slow Apply = %v", sl[0], sl[1], gerr, werr)
			}
		default:
			if !array.RecordEqual(got, want) {
				t.Errorf("slice [%d:%d]: fast Apply differs from slow Apply:\n got %v\nwant %v", sl[0], sl[1], got, want)
			}
			checkOffsets(t, got.Column(0))
		}
		for _, r := range []arrow.RecordBatch{got, want} {
			if r != nil {
				r.Release()
			}
		}
	}
}

// checkOffsets checks a large binary or string array's offsets: from 0 (at the array's offset),
// never decreasing, within the data buffer.
func checkOffsets(t *testing.T, a arrow.Array) {
	t.Helper()
	var offs []int64
	switch a := a.(type) {
	case *array.LargeString:
		offs = a.ValueOffsets()
	case *array.LargeBinary:
		offs = a.ValueOffsets()
	default:
		return
	}
	data := a.Data().Buffers()[2]
	size := int64(0)
	if data != nil {
		size = int64(data.Len())
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] || offs[i] > size || offs[i-1] < 0 {
			t.Fatalf("offsets[%d:%d] = %d, %d with %d data bytes", i-1, i+1, offs[i-1], offs[i], size)
		}
	}
}

func timestamps(mem memory.Allocator, dt arrow.DataType, vals []int64, nulls bool, r *rand.Rand) arrow.Array {
	b := array.NewTimestampBuilder(mem, dt.(*arrow.TimestampType))
	defer b.Release()
	for _, v := range vals {
		if nulls && r.IntN(4) == 0 {
			b.AppendNull()
			continue
		}
		b.Append(arrow.Timestamp(v))
	}
	return b.NewArray()
}

// dictionary builds n rows of a dictionary of size values of type vt (with a null value when
// nulls), indexed by idx, with null indices when nulls.
func dictionary(mem memory.Allocator, idx, vt arrow.DataType, size, n int, nulls bool, r *rand.Rand) arrow.Array {
	vb := array.NewBuilder(mem, vt)
	defer vb.Release()
	for i := range size {
		if nulls && i == 1 {
			vb.AppendNull()
			continue
		}
		switch b := vb.(type) {
		case *array.StringBuilder:
			b.Append(fmt.Sprintf("value-%d-%s", i, string(make([]byte, i%7))))
		case *array.LargeStringBuilder:
			b.Append(fmt.Sprintf("large-%d", i))
		case *array.BinaryBuilder:
			b.Append([]byte{byte(i), 0xff, byte(i >> 8)})
		case *array.Int16Builder:
			b.Append(int16(i*37 - 200))
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(int64(i)*1_000_001 - 5_000_000))
		}
	}
	vals := vb.NewArray()
	defer vals.Release()
	ib := array.NewBuilder(mem, idx)
	defer ib.Release()
	limit := min(size, 100) // a subset of the values, even of a dictionary bigger than the batch
	for i := 0; i < n; i++ {
		if nulls && r.IntN(6) == 0 {
			ib.AppendNull()
			continue
		}
		k := r.IntN(limit)
		switch b := ib.(type) {
		case *array.Int8Builder:
			b.Append(int8(k))
		case *array.Int16Builder:
			b.Append(int16(k))
		case *array.Int32Builder:
			b.Append(int32(k))
		case *array.Int64Builder:
			b.Append(int64(k))
		case *array.Uint8Builder:
			b.Append(uint8(k))
		case *array.Uint16Builder:
			b.Append(uint16(k))
		case *array.Uint32Builder:
			b.Append(uint32(k))
		case *array.Uint64Builder:
			b.Append(uint64(k))
		}
	}
	indices := ib.NewArray()
	defer indices.Release()
	return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: idx, ValueType: vt}, indices, vals)
}
