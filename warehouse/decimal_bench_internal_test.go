package warehouse

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
)

// BenchmarkDecimal measures checking (check) and converting to Decimal128 (convert) canonical
// decimal text, narrow and 38 digits wide, per batch size.
func BenchmarkDecimal(b *testing.B) {
	mem := memory.NewGoAllocator()
	cases := []struct {
		name, cols string
		value      func(i int) string
	}{
		{"10-2", "d DECIMAL(10,2)", func(i int) string { return fmt.Sprintf("%d.%02d", i%100000, i%100) }},
		{"38-18", "d DECIMAL(38,18)", func(i int) string { return fmt.Sprintf("-%d.%018d", i*7919, i*104729) }},
	}
	for _, c := range cases {
		schema, err := tableschema.ParseColumns(c.cols)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1 << 10, 1 << 16} {
			rb := array.NewRecordBuilder(mem, schema.Arrow())
			col := rb.Field(0).(*array.LargeStringBuilder)
			var bytes int64
			for i := 0; i < n; i++ {
				v := c.value(i)
				bytes += int64(len(v))
				col.Append(v)
			}
			rec := rb.NewRecordBatch()
			rb.Release()
			plan := newTablePlan(schema)
			for _, build := range []bool{false, true} {
				mode := map[bool]string{false: "check", true: "convert"}[build]
				b.Run(fmt.Sprintf("%s/%s/rows=%d", mode, c.name, n), func(b *testing.B) {
					b.SetBytes(bytes)
					b.ReportAllocs()
					for b.Loop() {
						out, err := plan.convert(mem, rec, build)
						if err != nil {
							b.Fatal(err)
						}
						releaseAll(out)
					}
					b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
				})
			}
			rec.Release()
		}
	}
}
