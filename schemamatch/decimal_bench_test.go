package schemamatch_test

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/schemamatch"
)

// BenchmarkDecimal measures the decimal casts that parse text (text -> DECIMAL, in plain and
// exponent spellings, narrow and 38-digit) and the integer -> DECIMAL rendering, per batch size.
func BenchmarkDecimal(b *testing.B) {
	mem := memory.NewGoAllocator()
	texts := []struct {
		name, table string
		value       func(i int) string
	}{
		{"text-12-2", "DECIMAL(12,2)", func(i int) string { return fmt.Sprintf("%d.%02d", i, i%100) }},
		{"text-38-18", "DECIMAL(38,18)", func(i int) string { return fmt.Sprintf("-%d.%018d", i*7919, i*104729) }},
		{"text-exponent", "DECIMAL(12,2)", func(i int) string { return fmt.Sprintf(" %de-2 ", i*7919) }},
	}
	for _, c := range texts {
		for _, n := range []int{1 << 10, 1 << 16} {
			b.Run(fmt.Sprintf("%s/rows=%d", c.name, n), func(b *testing.B) {
				bl := array.NewStringBuilder(mem)
				for i := 0; i < n; i++ {
					bl.Append(c.value(i))
				}
				arr := bl.NewArray()
				bl.Release()
				defer arr.Release()
				benchApply(b, mem, arrow.BinaryTypes.String, c.table, arr)
			})
		}
	}
	for _, n := range []int{1 << 10, 1 << 16} {
		b.Run(fmt.Sprintf("decimal128-text/rows=%d", n), func(b *testing.B) {
			// DECIMAL(12,2) as frames carry it, text: the amount column of the demo data.
			dt := &arrow.Decimal128Type{Precision: 12, Scale: 2}
			bl := array.NewDecimal128Builder(mem, dt)
			for i := 0; i < n; i++ {
				if i%10 == 9 {
					bl.AppendNull()
					continue
				}
				bl.Append(decimal128.FromI64(int64(i*7919%100_000_000) - 25_000_000))
			}
			arr := bl.NewArray()
			bl.Release()
			defer arr.Release()
			benchApply(b, mem, dt, "DECIMAL(12,2)", arr)
		})
	}
	for _, n := range []int{1 << 10, 1 << 16} {
		b.Run(fmt.Sprintf("int32-decimal/rows=%d", n), func(b *testing.B) {
			bl := array.NewInt32Builder(mem)
			for i := 0; i < n; i++ {
				bl.Append(int32(i*7919 - 500_000))
			}
			arr := bl.NewArray()
			bl.Release()
			defer arr.Release()
			benchApply(b, mem, arrow.PrimitiveTypes.Int32, "DECIMAL(14,4)", arr)
		})
	}
}

// benchApply times plan.Apply of a one-column batch of arr into a table column of type table.
func benchApply(b *testing.B, mem memory.Allocator, src arrow.DataType, table string, arr arrow.Array, opts ...schemamatch.Option) {
	b.Helper()
	n := arr.Len()
	schema := arrow.NewSchema([]arrow.Field{{Name: "c", Type: src, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(n))
	defer rec.Release()
	plan, err := schemamatch.NewPlan(schema, mustTable(b, "c "+table), append(opts, schemamatch.WithAllocator(mem))...)
	if err != nil {
		b.Fatal(err)
	}
	var inBytes int64
	for _, buf := range arr.Data().Buffers() {
		if buf != nil {
			inBytes += int64(buf.Len())
		}
	}
	b.SetBytes(inBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := plan.Apply(rec)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
