package readers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestParquetParallelismLimit: with WithParquetParallelism(3) and 12 columns, exactly 3 column
// decodes run at once. Each decode waits until 3 are in flight, so fewer would stall (and the
// context deadline fails the test) and more would be counted.
func TestParquetParallelismLimit(t *testing.T) {
	const cols, limit = 12, 3
	var fields []arrow.Field
	for i := 0; i < cols; i++ {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	s := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), s)
	for r := 0; r < 100; r++ {
		for i := 0; i < cols; i++ {
			b.Field(i).(*array.Int64Builder).Append(int64(r))
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "w.parquet")
	f, _ := os.Create(path)
	w, err := pqarrow.NewFileWriter(s, f, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	w.Write(rec)
	w.Close()

	var inflight, peak atomic.Int32
	full := make(chan struct{})
	var once sync.Once
	hook := func(start bool) {
		if !start {
			inflight.Add(-1)
			return
		}
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == limit {
			once.Do(func() { close(full) })
		}
		<-full
	}
	src, err := Open(context.Background(), File{Path: path}, WithParquetParallelism(limit), withDecodeHook(hook))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a failure guard, not a measure
	defer cancel()
	if err := src.ReadUnit(ctx, 0, func(arrow.RecordBatch) error { return nil }); err != nil {
		t.Fatalf("ReadUnit = %v (fewer than %d decodes ran at once?)", err, limit)
	}
	if got := peak.Load(); got != limit {
		t.Errorf("peak column decodes in flight = %d; want %d", got, limit)
	}
}
