package warehouse

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// hasList reports whether storage type dt holds a list or map at any depth.
func hasList(dt arrow.DataType) bool {
	switch dt := dt.(type) {
	case *arrow.ListType, *arrow.MapType:
		return true
	case *arrow.StructType:
		for _, f := range dt.Fields() {
			if hasList(f.Type) {
				return true
			}
		}
	}
	return false
}

// dropHiddenValues returns storage array arr with every list or map slot that is null, or lies under
// a null struct, emptied of its values, at any depth. Arrow lets such slots span values, and IPC
// writers produce them (a FixedSizeList's null slots always do), but arrow-go's Parquet writer
// refuses them ("lists with non-zero length null components are not supported"). hidden, when not
// nil, marks the slots under a null ancestor. It returns nil when arr needs no change, else new data
// (the caller releases it) at offset 0.
func (cv *converter) dropHiddenValues(arr arrow.Array, hidden []bool) (arrow.ArrayData, error) {
	if !hasList(arr.DataType()) {
		return nil, nil
	}
	gone := func(i int) bool { return arr.IsNull(i) || hidden != nil && hidden[i] }
	switch a := arr.(type) {
	case *array.Struct:
		h := hidden
		if a.NullN() > 0 {
			h = make([]bool, a.Len())
			for i := range h {
				h[i] = gone(i)
			}
		}
		children := make([]arrow.ArrayData, a.NumField())
		defer releaseAll(children)
		changed := false
		for k := range children {
			f := a.Field(k) // sliced to the struct's window
			d, err := cv.dropHiddenValues(f, h)
			if err != nil {
				return nil, err
			}
			if d != nil {
				changed = true
			} else {
				d = f.Data()
				d.Retain()
			}
			children[k] = d
		}
		if !changed {
			return nil, nil
		}
		validity := cv.copyValidity(a)
		if validity != nil {
			defer validity.Release()
		}
		return array.NewData(a.DataType(), a.Len(), []*memory.Buffer{validity}, children, a.NullN(), 0), nil
	case *array.List:
		return cv.dropHiddenListValues(a, a.ListValues(), a.ValueOffsets, gone)
	case *array.Map:
		return cv.dropHiddenListValues(a, a.ListValues(), a.ValueOffsets, gone)
	}
	return nil, fmt.Errorf("warehouse: no list walk for %s", arr.DataType())
}

// dropHiddenListValues is dropHiddenValues for a list or map: values is its child array, offsets
// gives each slot's range in it, gone says which slots are null or hidden.
func (cv *converter) dropHiddenListValues(arr, values arrow.Array, offsets func(int) (int64, int64),
	gone func(int) bool) (arrow.ArrayData, error) {
	n := arr.Len()
	compact := false
	for i := 0; i < n && !compact; i++ {
		if s, e := offsets(i); e > s && gone(i) {
			compact = true
		}
	}
	if !compact {
		// Every value in the slots' range belongs to a visible slot: look below.
		child, err := cv.dropHiddenValues(values, nil)
		if child == nil || err != nil {
			return nil, err
		}
		defer child.Release()
		d := arr.Data()
		return array.NewData(arr.DataType(), n, d.Buffers(), []arrow.ArrayData{child}, d.NullN(), d.Offset()), nil
	}
	// Keep the values of visible slots only, in runs, with new offsets from 0.
	offBuf := memory.NewResizableBuffer(cv.mem)
	defer offBuf.Release()
	offBuf.Resize((n + 1) * arrow.Int32SizeBytes)
	ob := offBuf.Bytes()
	var parts []arrow.Array
	defer func() { releaseAll(parts) }()
	runStart, runEnd := int64(-1), int64(-1)
	flush := func() {
		if runEnd > runStart {
			parts = append(parts, array.NewSlice(values, runStart, runEnd))
		}
	}
	var cur int64
	binary.LittleEndian.PutUint32(ob, 0)
	for i := 0; i < n; i++ {
		if s, e := offsets(i); e > s && !gone(i) {
			if s != runEnd {
				flush()
				runStart = s
			}
			runEnd = e
			cur += e - s
		}
		binary.LittleEndian.PutUint32(ob[(i+1)*arrow.Int32SizeBytes:], uint32(cur))
	}
	flush()
	var kept arrow.Array
	switch len(parts) {
	case 0:
		kept = array.NewSlice(values, 0, 0)
	case 1:
		kept = parts[0]
		kept.Retain()
	default:
		var err error
		if kept, err = array.Concatenate(parts, cv.mem); err != nil {
			return nil, fmt.Errorf("warehouse: dropping values of null lists: %w", err)
		}
	}
	defer kept.Release()
	child, err := cv.dropHiddenValues(kept, nil)
	if err != nil {
		return nil, err
	}
	if child == nil {
		child = kept.Data()
		child.Retain()
	}
	defer child.Release()
	validity := cv.copyValidity(arr)
	if validity != nil {
		defer validity.Release()
	}
	return array.NewData(arr.DataType(), n, []*memory.Buffer{validity, offBuf}, []arrow.ArrayData{child}, arr.NullN(), 0), nil
}
