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

// BenchmarkApply measures the common casts per batch size: utf8 -> large_utf8 (offsets only),
// timestamp ns -> us, decimal -> text (64-bit and wider unscaled values), text -> decimal, and a
// plan that only shares (the floor).
func BenchmarkApply(b *testing.B) {
	mem := memory.NewGoAllocator()
	type cast struct {
		name  string
		src   arrow.DataType
		table string
		build func(n int) arrow.Array
	}
	casts := []cast{
		{name: "copy-int64", src: arrow.PrimitiveTypes.Int64, table: "BIGINT", build: func(n int) arrow.Array {
			bl := array.NewInt64Builder(mem)
			defer bl.Release()
			for i := 0; i < n; i++ {
				bl.Append(int64(i))
			}
			return bl.NewArray()
		}},
		{name: "utf8-large_utf8", src: arrow.BinaryTypes.String, table: "STRING", build: func(n int) arrow.Array {
			bl := array.NewStringBuilder(mem)
			defer bl.Release()
			for i := 0; i < n; i++ {
				bl.Append(fmt.Sprintf("customer-%08d@example.com", i))
			}
			return bl.NewArray()
		}},
		{name: "timestamp-ns-us", src: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, table: "TIMESTAMP", build: func(n int) arrow.Array {
			bl := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"})
			defer bl.Release()
			for i := 0; i < n; i++ {
				bl.Append(arrow.Timestamp(1_700_000_000_000_000_000 + int64(i)*1_234_567))
			}
			return bl.NewArray()
		}},
		{name: "decimal128-text", src: &arrow.Decimal128Type{Precision: 18, Scale: 2}, table: "DECIMAL(18,2)", build: func(n int) arrow.Array {
			bl := array.NewDecimal128Builder(mem, &arrow.Decimal128Type{Precision: 18, Scale: 2})
			defer bl.Release()
			for i := 0; i < n; i++ {
				bl.Append(decimal128.FromI64(int64(i)*7919 - 500_000))
			}
			return bl.NewArray()
		}},
		{name: "decimal128-38-18-text", src: &arrow.Decimal128Type{Precision: 38, Scale: 18}, table: "DECIMAL(38,18)", build: func(n int) arrow.Array {
			// Spark's default decimal: unscaled values past 64 bits from 9.22 up
			bl := array.NewDecimal128Builder(mem, &arrow.Decimal128Type{Precision: 38, Scale: 18})
			defer bl.Release()
			for i := 0; i < n; i++ {
				bl.Append(decimal128.FromI64(int64(i)*7919 - 500_000).IncreaseScaleBy(16))
			}
			return bl.NewArray()
		}},
		{name: "text-decimal", src: arrow.BinaryTypes.String, table: "DECIMAL(12,2)", build: func(n int) arrow.Array {
			bl := array.NewStringBuilder(mem)
			defer bl.Release()
			for i := 0; i < n; i++ {
				bl.Append(fmt.Sprintf("%d.%02d", i, i%100))
			}
			return bl.NewArray()
		}},
	}
	for _, c := range casts {
		for _, n := range []int{1 << 10, 1 << 16} {
			b.Run(fmt.Sprintf("%s/rows=%d", c.name, n), func(b *testing.B) {
				arr := c.build(n)
				defer arr.Release()
				benchApply(b, mem, c.src, c.table, arr)
			})
		}
	}
}

// BenchmarkFastCasts compares the casts that have a fast path with the general path they replace
// (path=slow, schemamatch's test-only WithSlowCasts), per batch size, on columns with nulls:
// timestamp ns -> us (a constant division), s -> us (checked scaling), and a 12-value dictionary of
// utf8 -> large_utf8 (values cast once, then gathered). Bytes are the input's buffers.
func BenchmarkFastCasts(b *testing.B) {
	mem := memory.NewGoAllocator()
	tsType := func(u arrow.TimeUnit) *arrow.TimestampType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	timestamps := func(u arrow.TimeUnit, scale int64) func(n int) arrow.Array {
		return func(n int) arrow.Array {
			bl := array.NewTimestampBuilder(mem, tsType(u))
			defer bl.Release()
			for i := 0; i < n; i++ {
				if i%10 == 3 {
					bl.AppendNull()
					continue
				}
				bl.Append(arrow.Timestamp((1_700_000_000_000_000_000 + int64(i)*1_234_567_891) / scale))
			}
			return bl.NewArray()
		}
	}
	casts := []struct {
		name  string
		src   arrow.DataType
		table string
		build func(n int) arrow.Array
	}{
		{"timestamp-ns-us", tsType(arrow.Nanosecond), "TIMESTAMP", timestamps(arrow.Nanosecond, 1)},
		{"timestamp-s-us", tsType(arrow.Second), "TIMESTAMP", timestamps(arrow.Second, 1_000_000_000)},
		{"dictionary-utf8-large_utf8", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, "STRING",
			func(n int) arrow.Array {
				bl := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
				defer bl.Release()
				cats := []string{"electronics", "books", "garden", "toys", "grocery", "fashion", "sports", "automotive", "health", "music", "movies", "office"}
				for i := 0; i < n; i++ {
					if i%12 == 5 {
						bl.AppendNull()
						continue
					}
					if err := bl.AppendString(cats[(i*7)%len(cats)]); err != nil {
						panic(err)
					}
				}
				return bl.NewArray()
			}},
	}
	for _, c := range casts {
		for _, n := range []int{1 << 10, 1 << 16} {
			for _, path := range []string{"fast", "slow"} {
				b.Run(fmt.Sprintf("%s/rows=%d/path=%s", c.name, n, path), func(b *testing.B) {
					arr := c.build(n)
					defer arr.Release()
					var opts []schemamatch.Option
					if path == "slow" {
						opts = append(opts, schemamatch.WithSlowCasts())
					}
					benchApply(b, mem, c.src, c.table, arr, opts...)
				})
			}
		}
	}
}
