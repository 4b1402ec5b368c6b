package warehouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/loaderproject/loader/warehouse"
)

const benchCols = "id BIGINT NOT NULL, name STRING, price DECIMAL(10,2), qty INT, at TIMESTAMP, tags ARRAY<STRING>"

// benchRecord builds n rows of benchCols.
func benchRecord(mem memory.Allocator, schema *arrow.Schema, from, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	id := b.Field(0).(*array.Int64Builder)
	name := b.Field(1).(*array.LargeStringBuilder)
	price := b.Field(2).(*array.LargeStringBuilder)
	qty := b.Field(3).(*array.Int32Builder)
	at := b.Field(4).(*array.TimestampBuilder)
	tags := b.Field(5).(*array.ListBuilder)
	tag := tags.ValueBuilder().(*array.LargeStringBuilder)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := from; i < from+n; i++ {
		id.Append(int64(i))
		name.Append(fmt.Sprintf("customer-%08d", i%100000))
		price.Append(fmt.Sprintf("%d.%02d", i%100000, i%100))
		if i%10 == 0 {
			qty.AppendNull()
		} else {
			qty.Append(int32(i % 1000))
		}
		at.Append(arrow.Timestamp(base + int64(i)*1000))
		tags.Append(true)
		tag.Append("t" + fmt.Sprint(i%7))
		tag.Append("u" + fmt.Sprint(i%3))
	}
	return b.NewRecordBatch()
}

// benchTable creates a table of benchCols in a new warehouse allocating from mem, and returns it
// with the Arrow schema its batches take.
func benchTable(b *testing.B, mem memory.Allocator) (*warehouse.Table, *arrow.Schema) {
	b.Helper()
	wh, err := warehouse.Open(b.TempDir(), warehouse.WithAllocator(mem))
	if err != nil {
		b.Fatal(err)
	}
	return createTable(b, wh, "c.s.bench", benchCols), mustColumns(b, benchCols).Arrow()
}

// BenchmarkWriterCommit measures a commit interval of the sink: a Writer fed batches of 4096 rows,
// then committed (fsyncs included), by rows per commit.
func BenchmarkWriterCommit(b *testing.B) {
	for _, rows := range []int{4 << 10, 64 << 10, 512 << 10} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := context.Background()
			mem := memory.NewGoAllocator()
			tbl, schema := benchTable(b, mem)
			const batchRows = 4096
			var batches []arrow.RecordBatch
			var bytes int64
			for from := 0; from < rows; from += batchRows {
				rec := benchRecord(mem, schema, from, min(batchRows, rows-from))
				batches = append(batches, rec)
				bytes += util.TotalRecordSize(rec)
			}
			defer func() {
				for _, r := range batches {
					r.Release()
				}
			}()
			b.SetBytes(bytes)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w := tbl.NewWriter()
				for _, rec := range batches {
					if err := w.Write(ctx, rec); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkScan measures reading a table back in the canonical schema.
func BenchmarkScan(b *testing.B) {
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	tbl, schema := benchTable(b, mem)
	const rows = 512 << 10
	w := tbl.NewWriter()
	var bytes int64
	for from := 0; from < rows; from += 8192 {
		rec := benchRecord(mem, schema, from, 8192)
		bytes += util.TotalRecordSize(rec)
		if err := w.Write(ctx, rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := tbl.Scan(ctx, func(rec arrow.RecordBatch) error { n += int(rec.NumRows()); return nil }); err != nil {
			b.Fatal(err)
		}
		if n != rows {
			b.Fatalf("scanned %d rows; want %d", n, rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkCount measures Count on a table with many versions when one new version arrived. The
// version comes from another Warehouse on the directory (another process): a Table applies its own
// commits to its cached state, so they would leave Count nothing to read.
func BenchmarkCount(b *testing.B) {
	ctx := context.Background()
	wh, err := warehouse.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tbl := createTable(b, wh, "c.s.bench", benchCols)
	other, err := warehouse.Open(wh.Dir())
	if err != nil {
		b.Fatal(err)
	}
	writer, err := other.Table(ctx, tbl.Name())
	if err != nil {
		b.Fatal(err)
	}
	commit := func() int64 {
		res, err := writer.NewWriter().Commit(ctx, warehouse.CommitOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return res.Version
	}
	for range 200 {
		commit()
	}
	if _, _, err := tbl.Count(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		want := commit()
		b.StartTimer()
		if _, v, err := tbl.Count(ctx); err != nil || v != want {
			b.Fatalf("Count() = version %d, %v; want %d", v, err, want)
		}
	}
}
