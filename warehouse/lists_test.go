package warehouse_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/warehouse"
)

// withNulls returns d (at offset 0, without nulls) with the slots rows made null, keeping their
// offsets and values, and with children replacing d's when given.
func withNulls(mem memory.Allocator, d arrow.ArrayData, children []arrow.ArrayData, rows ...int) arrow.ArrayData {
	validity := memory.NewResizableBuffer(mem)
	defer validity.Release()
	validity.Resize(int(bitutil.BytesForBits(int64(d.Len()))))
	bitutil.SetBitsTo(validity.Bytes(), 0, int64(d.Len()), true)
	for _, r := range rows {
		bitutil.ClearBit(validity.Bytes(), r)
	}
	if children == nil {
		children = d.Children()
	}
	bufs := append([]*memory.Buffer{validity}, d.Buffers()[1:]...)
	return array.NewData(d.DataType(), d.Len(), bufs, children, len(rows), 0)
}

// TestNullListsWithValues writes lists and maps whose null slots, or slots under a null struct or
// list, still span values, as Arrow allows and IPC writers produce (a FixedSizeList's null slots
// always do; arrow-testing's generated_nested holds some). arrow-go's Parquet writer refuses such
// lists ("lists with non-zero length null components are not supported"), which left rows
// acknowledged by the sink that could never be committed.
func TestNullListsWithValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	wh := openWH(t, warehouse.WithAllocator(mem))
	schema := mustColumns(t, "id INT, a ARRAY<INT>, m MAP<STRING, INT>, st STRUCT<l: ARRAY<INT>>, aa ARRAY<ARRAY<INT>>, d ARRAY<DECIMAL(5,2)>")
	tbl, err := wh.CreateTable(ctx, mustName(t, "c.s.lists"), schema)
	if err != nil {
		t.Fatal(err)
	}
	full := recordFromJSON(t, mem, schema.Arrow(), `[
		{"id": 0, "a": [1, 2], "m": [{"key": "k1", "value": 1}], "st": {"l": [1]}, "aa": [[1], [2]], "d": ["1.00"]},
		{"id": 1, "a": [3, 4], "m": [{"key": "k2", "value": 2}], "st": {"l": [2, 3]}, "aa": [[3, 4]], "d": ["2.00", "bad"]},
		{"id": 2, "a": [5], "m": [{"key": "k3", "value": 3}], "st": {"l": [4]}, "aa": [[5], [6]], "d": ["3.00"]}
	]`)
	defer full.Release()
	// Null out row 1 everywhere, st.l in row 2, and the first inner list of aa in row 2, keeping
	// their values. The hidden decimal "bad" is never looked at.
	var cols []arrow.Array
	add := func(d arrow.ArrayData) {
		cols = append(cols, array.MakeFromData(d))
		d.Release()
	}
	data := func(i int) arrow.ArrayData { return full.Column(i).Data() }
	id := data(0)
	id.Retain()
	add(id)
	add(withNulls(mem, data(1), nil, 1))
	add(withNulls(mem, data(2), nil, 1))
	l := withNulls(mem, data(3).Children()[0], nil, 2)
	add(withNulls(mem, data(3), []arrow.ArrayData{l}, 1))
	l.Release()
	inner := withNulls(mem, data(4).Children()[0], nil, 3)
	add(withNulls(mem, data(4), []arrow.ArrayData{inner}, 1))
	inner.Release()
	add(withNulls(mem, data(5), nil, 1))
	rec := array.NewRecordBatch(full.Schema(), cols, 3)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()

	w := tbl.NewWriter()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatalf("Write: %v", err)
	}
	sl := rec.NewSlice(1, 3) // at an offset too
	defer sl.Release()
	if err := w.Write(ctx, sl); err != nil {
		t.Fatalf("Write(slice): %v", err)
	}
	if _, err := w.Commit(ctx, warehouse.CommitOptions{}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := scanAll(t, mem, tbl)
	defer got.Release()
	want := recordFromJSON(t, mem, schema.Arrow(), `[
		{"id": 0, "a": [1, 2], "m": [{"key": "k1", "value": 1}], "st": {"l": [1]}, "aa": [[1], [2]], "d": ["1.00"]},
		{"id": 1, "a": null, "m": null, "st": null, "aa": null, "d": null},
		{"id": 2, "a": [5], "m": [{"key": "k3", "value": 3}], "st": {"l": null}, "aa": [null, [6]], "d": ["3.00"]},
		{"id": 1, "a": null, "m": null, "st": null, "aa": null, "d": null},
		{"id": 2, "a": [5], "m": [{"key": "k3", "value": 3}], "st": {"l": null}, "aa": [null, [6]], "d": ["3.00"]}
	]`)
	defer want.Release()
	assertRecordsEqual(t, got, want)
}
