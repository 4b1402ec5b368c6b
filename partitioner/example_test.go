package partitioner_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/partitioner"
)

// Cut a batch into frames of at most 64 KiB, holding each frame's bytes in a budget until it would be
// acknowledged.
func ExampleEncoder() {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range int64(100_000) {
		b.Append(i)
	}
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()

	enc, err := partitioner.NewEncoder(schema, 64<<10)
	if err != nil {
		panic(err)
	}
	budget := partitioner.NewBudget(1 << 20)
	var frames, rows int64
	err = enc.Encode(rec, partitioner.Span{File: 0, Unit: 0}, func(f *partitioner.Frame) error {
		if err := budget.Acquire(context.Background(), int64(f.Size())); err != nil {
			return err
		}
		frames++
		rows += f.Rows
		budget.Release(int64(f.Size())) // when the target acknowledged the frame
		f.Release()                     // and the frame's buffers with it
		return nil
	})
	fmt.Println(err, frames > 1, rows, budget.InUse())
	// Output: <nil> true 100000 0
}
