package readers

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
)

// Run-end encoded and view columns are decoded here, at any depth, so that Schema() and every batch
// carry plain types: run-end encoded<e, v> becomes v, list_view<e> list<e>, large_list_view<e>
// large_list<e>, string_view large_utf8 and binary_view large_binary (the STRING and BINARY
// canonical types, so schemamatch then shares them). They are encodings of the same values, not
// other types: decoding them where they are read keeps schemamatch's rules, tableschema's mapping,
// the rescue column's JSON and the partition columns free of them. Only Arrow IPC files carry them
// today, but the wrapper serves every format. arrow-go's kernels do the copying: take for run-end
// encoded values and list view elements, a cast for string and binary views.

// plainType returns dt with its encodings and views replaced, and whether anything changed.
func plainType(dt arrow.DataType) (arrow.DataType, bool) {
	switch t := dt.(type) {
	case *arrow.RunEndEncodedType:
		v, _ := plainType(t.Encoded())
		return v, true
	case *arrow.StringViewType:
		return arrow.BinaryTypes.LargeString, true
	case *arrow.BinaryViewType:
		return arrow.BinaryTypes.LargeBinary, true
	case *arrow.ListViewType:
		e, _ := plainField(t.ElemField())
		return arrow.ListOfField(e), true
	case *arrow.LargeListViewType:
		e, _ := plainField(t.ElemField())
		return arrow.LargeListOfField(e), true
	case *arrow.MapType: // before ListType, which it embeds
		k, kc := plainField(t.KeyField())
		v, vc := plainField(t.ItemField())
		if !kc && !vc {
			return dt, false
		}
		m := arrow.MapOfFields(k, v)
		m.KeysSorted = t.KeysSorted
		return m, true
	case *arrow.ListType:
		e, c := plainField(t.ElemField())
		if !c {
			return dt, false
		}
		return arrow.ListOfField(e), true
	case *arrow.LargeListType:
		e, c := plainField(t.ElemField())
		if !c {
			return dt, false
		}
		return arrow.LargeListOfField(e), true
	case *arrow.FixedSizeListType:
		e, c := plainField(t.ElemField())
		if !c {
			return dt, false
		}
		return arrow.FixedSizeListOfField(t.Len(), e), true
	case *arrow.StructType:
		fields, c := plainFields(t.Fields())
		if !c {
			return dt, false
		}
		return arrow.StructOf(fields...), true
	case *arrow.DictionaryType:
		v, c := plainType(t.ValueType)
		if !c {
			return dt, false
		}
		return &arrow.DictionaryType{IndexType: t.IndexType, ValueType: v, Ordered: t.Ordered}, true
	case arrow.ExtensionType:
		// An extension's storage cannot change under it: the column becomes its plain storage.
		if s, c := plainType(t.StorageType()); c {
			return s, true
		}
	}
	return dt, false
}

func plainField(f arrow.Field) (arrow.Field, bool) {
	t, c := plainType(f.Type)
	f.Type = t
	return f, c
}

func plainFields(in []arrow.Field) ([]arrow.Field, bool) {
	out := make([]arrow.Field, len(in))
	changed := false
	for i, f := range in {
		var c bool
		out[i], c = plainField(f)
		changed = changed || c
	}
	return out, changed
}

// plainSchema returns s with plain types, or nil when it has no encodings or views.
func plainSchema(s *arrow.Schema) *arrow.Schema {
	fields, changed := plainFields(s.Fields())
	if !changed {
		return nil
	}
	meta := s.Metadata()
	return arrow.NewSchema(fields, &meta)
}

// plainArray decodes a of type dt (which plainType changes) into out, its plain type. The result
// has a's length, and row i holds a's row i: nested arrays keep their parents' offsets valid.
func plainArray(ctx context.Context, a arrow.Array, out arrow.DataType) (arrow.Array, error) {
	if a.Len() == 0 {
		// empty arrays may come without buffers (IPC writers omit them)
		return array.MakeArrayOfNull(compute.GetAllocator(ctx), out, 0), nil
	}
	switch a := a.(type) {
	case *array.RunEndEncoded:
		return plainRunEnds(ctx, a, out)
	case *array.StringView, *array.BinaryView:
		return compute.CastArray(ctx, a, compute.NewCastOptions(out, true))
	case *array.ListView, *array.LargeListView:
		return plainListView(ctx, a.(array.VarLenListLike), out)
	case array.ExtensionArray:
		return plainArray(ctx, a.Storage(), out)
	case *array.Dictionary:
		vals, err := plainArray(ctx, a.Dictionary(), out.(*arrow.DictionaryType).ValueType)
		if err != nil {
			return nil, err
		}
		defer vals.Release()
		d := a.Data()
		nd := array.NewDataWithDictionary(out, d.Len(), d.Buffers(), d.NullN(), d.Offset(), vals.Data().(*array.Data))
		defer nd.Release()
		return array.MakeFromData(nd), nil
	}
	// A nested type whose children change: the same buffers over decoded children.
	d := a.Data()
	var outChildren []arrow.DataType
	switch t := out.(type) {
	case *arrow.MapType:
		outChildren = []arrow.DataType{t.Elem()}
	case arrow.ListLikeType: // list, large_list, fixed_size_list
		outChildren = []arrow.DataType{t.Elem()}
	case *arrow.StructType:
		for _, f := range t.Fields() {
			outChildren = append(outChildren, f.Type)
		}
	default:
		return nil, fmt.Errorf("readers: no plain form of %s as %s", a.DataType(), out)
	}
	if len(outChildren) != len(d.Children()) {
		return nil, fmt.Errorf("readers: %s has %d children, %s %d", a.DataType(), len(d.Children()), out, len(outChildren))
	}
	children := make([]arrow.ArrayData, len(outChildren))
	defer func() {
		for _, c := range children {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, ct := range outChildren {
		child := array.MakeFromData(d.Children()[i])
		if arrow.TypeEqual(child.DataType(), ct) {
			children[i] = child.Data()
			children[i].Retain()
			child.Release()
			continue
		}
		pc, err := plainArray(ctx, child, ct)
		child.Release()
		if err != nil {
			return nil, err
		}
		children[i] = pc.Data()
		children[i].Retain()
		pc.Release()
	}
	nd := array.NewData(out, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// plainRunEnds decodes a run-end encoded array: its values first (they may hold views or
// encodings), then each row takes its run's value. arrow-go's run_end_decode is not used: in
// v18.8.0 it decodes every run after a slice's start, past the slice's length (it panics on the
// slices a batch is decoded in), and it has no kernels for nested values; take has both right.
func plainRunEnds(ctx context.Context, a *array.RunEndEncoded, out arrow.DataType) (arrow.Array, error) {
	mem := compute.GetAllocator(ctx)
	vals := a.LogicalValuesArray() // the runs of this slice only
	defer func() { vals.Release() }()
	if !arrow.TypeEqual(vals.DataType(), out) {
		pv, err := plainArray(ctx, vals, out)
		if err != nil {
			return nil, err
		}
		vals.Release()
		vals = pv
	}
	// Run ends relative to the slice; the last one may pass its end when the slice starts at 0.
	ends := a.LogicalRunEndsArray(mem)
	defer ends.Release()
	n := a.Len()
	idx := array.NewInt64Builder(mem)
	defer idx.Release()
	idx.Reserve(n)
	row := 0
	for run := 0; run < ends.Len() && row < n; run++ {
		var end int
		switch e := ends.(type) {
		case *array.Int16:
			end = int(e.Value(run))
		case *array.Int32:
			end = int(e.Value(run))
		case *array.Int64:
			end = int(e.Value(run))
		default:
			return nil, fmt.Errorf("run ends of type %s", ends.DataType())
		}
		for ; row < min(end, n); row++ {
			idx.UnsafeAppend(int64(run))
		}
	}
	if row != n {
		return nil, fmt.Errorf("%w: the runs cover %d of %d rows", ErrCorrupt, row, n)
	}
	indices := idx.NewArray()
	defer indices.Release()
	return compute.TakeArray(ctx, vals, indices)
}

// plainListView turns a list view into a list of its kind (list_view -> list, large_list_view ->
// large_list): each valid row's elements, wherever the view puts them (out of order, overlapping),
// are taken into place in order.
func plainListView(ctx context.Context, a array.VarLenListLike, out arrow.DataType) (arrow.Array, error) {
	mem := compute.GetAllocator(ctx)
	n := a.Len()
	large := out.ID() == arrow.LARGE_LIST
	var total int64
	for i := 0; i < n; i++ {
		if a.IsValid(i) {
			s, e := a.ValueOffsets(i)
			total += e - s
		}
	}
	if !large && total > math.MaxInt32 {
		return nil, fmt.Errorf("a list view of %d elements in one batch is too large for a list (at most %d)", total, math.MaxInt32)
	}
	idx := array.NewInt64Builder(mem)
	defer idx.Release()
	idx.Reserve(int(total))
	width := 4
	if large {
		width = 8
	}
	offs := memory.NewResizableBuffer(mem)
	defer offs.Release()
	offs.Resize((n + 1) * width)
	o32, o64 := arrow.Int32Traits.CastFromBytes(offs.Bytes()), arrow.Int64Traits.CastFromBytes(offs.Bytes())
	pos := int64(0)
	for i := 0; i < n; i++ {
		if large {
			o64[i] = pos
		} else {
			o32[i] = int32(pos)
		}
		if !a.IsValid(i) {
			continue
		}
		s, e := a.ValueOffsets(i)
		for k := s; k < e; k++ {
			idx.UnsafeAppend(k)
		}
		pos += e - s
	}
	if large {
		o64[n] = pos
	} else {
		o32[n] = int32(pos)
	}
	indices := idx.NewArray()
	defer indices.Release()

	elem := out.(arrow.ListLikeType).Elem()
	child := a.ListValues()
	child.Retain()
	defer func() { child.Release() }()
	if !arrow.TypeEqual(child.DataType(), elem) {
		pc, err := plainArray(ctx, child, elem)
		if err != nil {
			return nil, err
		}
		child.Release()
		child = pc
	}
	taken, err := compute.TakeArray(ctx, child, indices)
	if err != nil {
		return nil, err
	}
	defer taken.Release()
	valid := validity(mem, a)
	if valid != nil {
		defer valid.Release()
	}
	nd := array.NewData(out, n, []*memory.Buffer{valid, offs}, []arrow.ArrayData{taken.Data()}, a.NullN(), 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// validity returns a's validity bitmap starting at its offset (shared when it is 0), or nil when a
// has no nulls.
func validity(mem memory.Allocator, a arrow.Array) *memory.Buffer {
	d := a.Data()
	b := d.Buffers()[0]
	if a.NullN() == 0 || b == nil {
		return nil
	}
	if d.Offset() == 0 {
		b.Retain()
		return b
	}
	out := memory.NewResizableBuffer(mem)
	out.Resize(int(bitutil.BytesForBits(int64(a.Len()))))
	bitutil.CopyBitmap(b.Bytes(), d.Offset(), a.Len(), out.Bytes(), 0)
	return out
}

// plainSource decodes the encodings and views of a source's batches (see plainType).
type plainSource struct {
	unitSource
	schema *arrow.Schema
	mem    memory.Allocator
	cfg    *config
}

func (s *plainSource) readAhead(units []int) { planAhead(s.unitSource, units) }

// withPlain wraps src when its schema has encodings or views.
func withPlain(src unitSource, cfg *config) (unitSource, error) {
	ps := plainSchema(src.Schema())
	if ps == nil {
		return src, nil
	}
	mem := limitAllocator(cfg, src.File().Size)
	return &plainSource{unitSource: src, schema: ps, mem: mem, cfg: cfg}, nil
}

func (p *plainSource) Schema() *arrow.Schema { return p.schema }

func (p *plainSource) readUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	cctx := compute.WithAllocator(ctx, p.mem)
	return p.unitSource.readUnit(ctx, unit, func(rec arrow.RecordBatch) error {
		// Decode in slices of about the batch size decoded (a run-end encoded column may hold many
		// rows in a few bytes), and hand them out in slices of the batch size.
		step := decodeRows(rec, p.cfg.batchBytes)
		for off := int64(0); off < rec.NumRows() || off == 0; off += step {
			end := min(rec.NumRows(), off+step)
			var out arrow.RecordBatch
			err := guard(func() error {
				var err error
				out, err = p.decode(cctx, rec, off, end)
				return err
			})
			if err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				return corrupt(fmt.Errorf("decoding rows %d to %d: %w", off, end, err))
			}
			err = sliceBatches(out, p.cfg.batchBytes, fn)
			out.Release()
			if err != nil || end == rec.NumRows() {
				return err
			}
		}
		return nil
	})
}

// decode returns rows [off, end) of rec with plain types.
func (p *plainSource) decode(ctx context.Context, rec arrow.RecordBatch, off, end int64) (arrow.RecordBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	part := rec.NewSlice(off, end)
	defer part.Release()
	cols := make([]arrow.Array, part.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range part.Columns() {
		want := p.schema.Field(i).Type
		if arrow.TypeEqual(c.DataType(), want) {
			c.Retain()
			cols[i] = c
			continue
		}
		pc, err := plainArray(ctx, c, want)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", p.schema.Field(i).Name, err)
		}
		cols[i] = pc
	}
	return array.NewRecordBatch(p.schema, cols, end-off), nil
}

// decodeRows is how many rows of rec to decode at once for slices of about batchBytes: a run-end
// encoded column takes its values' average size per row, anything else its own.
func decodeRows(rec arrow.RecordBatch, batchBytes int64) int64 {
	n := rec.NumRows()
	if n <= 1 {
		return max(n, 1)
	}
	perRow := 0.0
	for _, c := range rec.Columns() {
		if ree, ok := c.(*array.RunEndEncoded); ok {
			if v := ree.Values(); v.Len() > 0 {
				perRow += float64(util.TotalArraySize(v)) / float64(v.Len())
			}
			continue
		}
		perRow += float64(util.TotalArraySize(c)) / float64(n)
	}
	return max(1, min(n, int64(float64(batchBytes)/max(perRow, 1))))
}
