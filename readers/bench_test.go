package readers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// wideRecord builds rows of cols int64 and cols string columns.
func wideRecord(b *testing.B, cols, rows int) arrow.RecordBatch {
	var fields []arrow.Field
	for i := 0; i < cols; i++ {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("i%d", i), Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: fmt.Sprintf("s%d", i), Type: arrow.BinaryTypes.String, Nullable: true})
	}
	s := arrow.NewSchema(fields, nil)
	bld := array.NewRecordBuilder(memory.NewGoAllocator(), s)
	defer bld.Release()
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			bld.Field(2 * c).(*array.Int64Builder).Append(int64(r * (c + 1)))
			bld.Field(2*c + 1).(*array.StringBuilder).Append(fmt.Sprintf("value-%d-%d", c, r%5000))
		}
	}
	return bld.NewRecordBatch()
}

// BenchmarkParquetReadUnit decodes a 16-column-pair file row group by row group, at several column
// parallelisms. Bytes are the file's on-disk size.
func BenchmarkParquetReadUnit(b *testing.B) {
	rec := wideRecord(b, 16, 200_000)
	defer rec.Release()
	path := filepath.Join(b.TempDir(), "wide.parquet")
	if err := fixture.WriteParquetRecord(path, rec, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(50_000))); err != nil {
		b.Fatal(err)
	}
	for _, par := range []int{1, 4} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			benchReadUnits(b, path, readers.WithParquetParallelism(par))
		})
	}
}

// BenchmarkCSVReadUnit parses a CSV file into a table's types. Bytes are the file's size.
func BenchmarkCSVReadUnit(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("id,name,price,ts,ok,score\n")
	for i := 0; i < 100_000; i++ {
		fmt.Fprintf(&sb, "%d,\"customer %d, ltd\",%d.%02d,2024-01-02T03:04:%02d.123456Z,%t,%d.25\n", i, i, i, i%100, i%60, i%2 == 0, i)
	}
	path := filepath.Join(b.TempDir(), "t.csv")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	table, _ := tableschema.ParseColumns("id BIGINT, name STRING, price DECIMAL(12,2), ts TIMESTAMP, ok BOOLEAN, score DOUBLE")
	benchReadUnits(b, path, readers.WithTable(table))
}

// BenchmarkIPCFileReadUnit reads Arrow IPC files of many small record batches unit by unit (a unit
// groups batches up to WithBatchBytes), so the work each unit repeats (footer, dictionaries, checks)
// shows up as the batch count grows. Bytes are the file's size.
func BenchmarkIPCFileReadUnit(b *testing.B) {
	for _, batches := range []int{100, 2000} {
		b.Run(fmt.Sprintf("batches=%d", batches), func(b *testing.B) {
			gen := memory.NewGoAllocator()
			recs := make([]arrow.RecordBatch, batches)
			for i := range recs {
				recs[i] = testRecord(b, gen, i*20, 20)
				defer recs[i].Release()
			}
			path := filepath.Join(b.TempDir(), "many.arrow")
			writeIPC(b, path, recs, false)
			benchReadUnits(b, path, readers.WithBatchBytes(64<<10))
		})
	}
}

// benchReadUnits opens path with opts and reads all its units b.N times, with the file's size as
// the bytes of an iteration and the rows read per second as a metric.
func benchReadUnits(b *testing.B, path string, opts ...readers.Option) {
	b.Helper()
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	src, err := readers.Open(context.Background(), readers.File{Path: path}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	b.SetBytes(st.Size())
	b.ReportAllocs()
	b.ResetTimer()
	var rows int64
	for i := 0; i < b.N; i++ {
		for _, u := range src.Units() {
			if err := src.ReadUnit(context.Background(), u.Index, func(r arrow.RecordBatch) error { rows += r.NumRows(); return nil }); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
