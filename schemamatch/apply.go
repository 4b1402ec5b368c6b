package schemamatch

import (
	"context"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// applyCtx carries one Apply call's state.
type applyCtx struct {
	p       *Plan
	mem     memory.Allocator
	col     string       // table column being converted, for panics
	rescued map[int][]kv // row -> rescued values (nil when rescue is off)
	top     arrow.Array  // the source column being converted (for rescued values)
}

type kv struct {
	name  string
	value any
}

// Apply returns rec cast to the output schema. The caller keeps ownership of rec and must release the
// result. Arrays that need no change are shared, not copied. Errors are *ValueError.
func (p *Plan) Apply(rec arrow.RecordBatch) (out arrow.RecordBatch, err error) {
	if rec == nil {
		return nil, fmt.Errorf("schemamatch: Apply of a nil batch")
	}
	if err := p.checkSchema(rec.Schema()); err != nil {
		return nil, err
	}
	c := &applyCtx{p: p, mem: p.cfg.mem}
	if p.rescue != nil {
		c.rescued = map[int][]kv{}
	}
	n := int(rec.NumRows())
	cols := make([]arrow.Array, len(p.cols))
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			out = nil
			err = &ValueError{Source: p.cfg.source, Column: c.col, Row: -1, Reason: fmt.Sprintf("malformed array: %v", r)}
		}
	}()
	for i, cp := range p.cols {
		c.col = cp.name
		switch {
		case p.rescue != nil && i == p.rescue.col:
			// built below, once every cast has had its say
		case cp.src < 0:
			cols[i] = array.MakeArrayOfNull(c.mem, p.schema.Field(i).Type, n)
		case cp.node == nil:
			cols[i] = rec.Column(cp.src)
			cols[i].Retain()
		default:
			c.top = rec.Column(cp.src)
			a, err := c.apply(cp.node, rec.Column(cp.src), nil)
			if err != nil {
				return nil, err
			}
			cols[i] = a
		}
	}
	if p.rescue != nil {
		c.col = p.schema.Field(p.rescue.col).Name
		cols[p.rescue.col] = p.rescue.build(c, rec)
	}
	return array.NewRecordBatch(p.schema, cols, int64(n)), nil
}

func (p *Plan) checkSchema(s *arrow.Schema) error {
	if s == p.source {
		return nil
	}
	if s.NumFields() != p.source.NumFields() {
		return fmt.Errorf("%w: batch has %d columns, the plan was built for %d", ErrMismatch, s.NumFields(), p.source.NumFields())
	}
	for i, f := range s.Fields() {
		if !arrow.TypeEqual(f.Type, p.source.Field(i).Type) {
			return fmt.Errorf("%w: batch column %d %q is %s, the plan was built for %s", ErrMismatch, i, f.Name, f.Type, p.source.Field(i).Type)
		}
	}
	return nil
}

func (c *applyCtx) valueErr(path string, row int, reason string) error {
	return &ValueError{Source: c.p.cfg.source, Column: path, Row: int64(row), Reason: reason}
}

// fail handles a value at index i of in that cannot be converted. It returns nil when the slot
// should become null (the value is unreachable, or it was rescued), else the *ValueError.
func (c *applyCtx) fail(n *node, in arrow.Array, reach []int, i int, reason string) error {
	if reach != nil {
		if reach[i] < 0 {
			return nil
		}
		return c.valueErr(n.path, reach[i], reason)
	}
	if c.rescued != nil {
		c.rescued[i] = append(c.rescued[i], kv{name: n.path, value: marshalable(in, i)})
		return nil
	}
	return c.valueErr(n.path, i, reason)
}

// apply converts in by n, then checks NOT NULL. reach maps in's indexes to rows of the batch (-1:
// not reachable from a valid row); nil means index i is row i.
func (c *applyCtx) apply(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	out, err := c.convert(n, in, reach)
	if err != nil {
		return nil, err
	}
	if n.notNull && out.NullN() > 0 {
		for i := 0; i < out.Len(); i++ {
			if !out.IsNull(i) {
				continue
			}
			if reach != nil && reach[i] < 0 {
				continue
			}
			row := i
			if reach != nil {
				row = reach[i]
			}
			out.Release()
			return nil, c.valueErr(n.path, row, "null in a NOT NULL column")
		}
	}
	return out, nil
}

func (c *applyCtx) convert(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	if in.Len() == 0 && n.kind != kShare {
		// empty arrays may come without buffers (IPC writers omit them)
		return array.MakeArrayOfNull(c.mem, n.out, 0), nil
	}
	switch n.kind {
	case kShare:
		in.Retain()
		return in, nil
	case kRetype:
		d := in.Data()
		nd := array.NewData(n.out, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
		defer nd.Release()
		return array.MakeFromData(nd), nil
	case kNull:
		return array.MakeArrayOfNull(c.mem, n.out, in.Len()), nil
	case kExtension:
		return c.apply(n.children[0], in.(array.ExtensionArray).Storage(), reach)
	case kDict:
		d := in.(*array.Dictionary)
		if dl := d.Dictionary().Len(); !c.p.cfg.slowCasts && !n.children[0].fallible && dl > 0 && dl <= d.Len() {
			return c.dictValuesFirst(n, d)
		}
		ctx := compute.WithAllocator(context.Background(), c.mem)
		vals, err := compute.TakeArray(ctx, d.Dictionary(), d.Indices())
		if err != nil {
			return nil, c.valueErr(n.path, -1, fmt.Sprintf("unpacking the dictionary: %v", err))
		}
		defer vals.Release()
		return c.apply(n.children[0], vals, reach)
	case kInt, kFloat:
		return c.widen(n, in), nil
	case kTimestamp:
		return c.timestamp(n, in, reach)
	case kDate64:
		return c.date64(n, in, reach)
	case kDateTs:
		return c.dateTs(n, in, reach)
	case kLargeOffs:
		return c.largeOffsets(n, in), nil
	case kView:
		return c.fromView(n, in), nil
	case kFixedBin:
		return c.fixedBinary(n, in), nil
	case kDecText:
		return c.decimalText(n, in, reach)
	case kIntDecText:
		return c.intDecimalText(n, in), nil
	case kTextDec:
		return c.textDecimal(n, in, reach)
	case kList:
		return c.list(n, in, reach)
	case kMap:
		return c.mapArray(n, in, reach)
	case kStruct:
		return c.structArray(n, in, reach)
	case kBinText:
		return c.binaryText(n, in, reach)
	}
	return nil, fmt.Errorf("schemamatch: unknown node kind %d", n.kind)
}

// validity returns in's validity bitmap re-based to offset 0 (shared when it already is), or nil
// when in has no nulls.
func validity(mem memory.Allocator, d arrow.ArrayData) *memory.Buffer {
	if d.NullN() == 0 || d.Buffers()[0] == nil {
		return nil
	}
	b := d.Buffers()[0]
	if d.Offset() == 0 {
		b.Retain()
		return b
	}
	nb := memory.NewResizableBuffer(mem)
	nb.Resize(int(bitutil.BytesForBits(int64(d.Len()))))
	bitutil.CopyBitmap(b.Bytes(), d.Offset(), d.Len(), nb.Bytes(), 0)
	return nb
}

// newFixed builds an output array of fixed-width values from a validity bitmap (may be nil) and
// a values buffer, consuming both references.
func newFixed(dt arrow.DataType, n int, valid, values *memory.Buffer, nulls int) arrow.Array {
	d := array.NewData(dt, n, []*memory.Buffer{valid, values}, nil, nulls, 0)
	release(valid, values)
	defer d.Release()
	return array.MakeFromData(d)
}

func release(bufs ...*memory.Buffer) {
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
}

func alloc(mem memory.Allocator, n int, size int) (*memory.Buffer, []byte) {
	b := memory.NewResizableBuffer(mem)
	b.Resize(n * size)
	return b, b.Bytes()
}

func widenSlice[S, D int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64](src []S, dst []D) {
	for i, v := range src {
		dst[i] = D(v)
	}
}

// widen converts integers and floats to the wider integer or float type n.out, exactly.
func (c *applyCtx) widen(n *node, in arrow.Array) arrow.Array {
	ln := in.Len()
	buf, raw := alloc(c.mem, ln, n.out.(arrow.FixedWidthDataType).BitWidth()/8)
	switch n.out.ID() {
	case arrow.INT8:
		widenInto(in, arrow.Int8Traits.CastFromBytes(raw))
	case arrow.INT16:
		widenInto(in, arrow.Int16Traits.CastFromBytes(raw))
	case arrow.INT32:
		widenInto(in, arrow.Int32Traits.CastFromBytes(raw))
	case arrow.INT64:
		widenInto(in, arrow.Int64Traits.CastFromBytes(raw))
	case arrow.FLOAT32:
		widenInto(in, arrow.Float32Traits.CastFromBytes(raw))
	case arrow.FLOAT64:
		widenInto(in, arrow.Float64Traits.CastFromBytes(raw))
	default:
		panic(fmt.Sprintf("schemamatch: no widening to %s", n.out))
	}
	return newFixed(n.out, ln, validity(c.mem, in.Data()), buf, in.NullN())
}

func widenInto[D int8 | int16 | int32 | int64 | float32 | float64](in arrow.Array, dst []D) {
	switch a := in.(type) {
	case *array.Int8:
		widenSlice(a.Int8Values(), dst)
	case *array.Int16:
		widenSlice(a.Int16Values(), dst)
	case *array.Int32:
		widenSlice(a.Int32Values(), dst)
	case *array.Int64:
		widenSlice(a.Int64Values(), dst)
	case *array.Uint8:
		widenSlice(a.Uint8Values(), dst)
	case *array.Uint16:
		widenSlice(a.Uint16Values(), dst)
	case *array.Uint32:
		widenSlice(a.Uint32Values(), dst)
	case *array.Uint64:
		widenSlice(a.Uint64Values(), dst)
	case *array.Float32:
		widenSlice(a.Float32Values(), dst)
	case *array.Float64:
		widenSlice(a.Float64Values(), dst)
	case *array.Float16:
		for i, v := range a.Values() {
			dst[i] = D(v.Float32())
		}
	default:
		panic(fmt.Sprintf("schemamatch: no widening from %s", in.DataType()))
	}
}

// floorDiv divides rounding toward negative infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// mulCheck multiplies, reporting overflow.
func mulCheck(a, m int64) (int64, bool) {
	if m == 1 {
		return a, true
	}
	if a > math.MaxInt64/m || a < math.MinInt64/m {
		return 0, false
	}
	return a * m, true
}

func (c *applyCtx) timestamp(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	src := in.(*array.Timestamp).TimestampValues()
	if n.div == 1 {
		return scaleChecked(c, n, in, reach, src, n.mul, "timestamp out of range for microseconds")
	}
	// Truncation cannot fail; null slots get whatever their garbage divides to.
	ln := in.Len()
	buf, raw := alloc(c.mem, ln, 8)
	dst := arrow.Int64Traits.CastFromBytes(raw)
	if n.div == 1000 && !c.p.cfg.slowCasts {
		floorDiv1000(src, dst)
	} else {
		d := n.div
		for i, v := range src {
			q := int64(v) / d
			if int64(v)%d < 0 {
				q--
			}
			dst[i] = q
		}
	}
	return newFixed(n.out, ln, validity(c.mem, in.Data()), buf, in.NullN()), nil
}

// floorDiv1000 floor-divides src by 1000 into dst (nanoseconds to microseconds): a constant divisor
// the compiler turns into a multiplication, and a branch-free correction for negative remainders.
func floorDiv1000(src []arrow.Timestamp, dst []int64) {
	dst = dst[:len(src)]
	for i, v := range src {
		q := int64(v) / 1000
		r := int64(v) - q*1000
		dst[i] = q + r>>63 // -1 when the remainder is negative
	}
}

// scaleChecked multiplies the valid values of in (src, its values) by mul into n.out's 64-bit
// values. A product that overflows fails with reason (or becomes a null when it is rescued or
// unreachable).
func scaleChecked[T ~int32 | ~int64](c *applyCtx, n *node, in arrow.Array, reach []int, src []T, mul int64, reason string) (arrow.Array, error) {
	buf, raw := alloc(c.mem, in.Len(), 8)
	dst := arrow.Int64Traits.CastFromBytes(raw)
	var extraNulls []int
	if !c.p.cfg.slowCasts {
		// Every slot is scaled, null or not, against bounds computed once; only a slot out of
		// range looks at its validity, so the common case checks no bit and divides nothing.
		lo, hi := math.MinInt64/mul, math.MaxInt64/mul
		dst = dst[:len(src)]
		var over []int
		for i, v := range src {
			x := int64(v)
			if x > hi || x < lo {
				over = append(over, i)
				continue
			}
			dst[i] = x * mul
		}
		for _, i := range over {
			if in.IsNull(i) {
				continue // the slot stays zero
			}
			if err := c.fail(n, in, reach, i, reason); err != nil {
				buf.Release()
				return nil, err
			}
			extraNulls = append(extraNulls, i)
		}
		return newFixedWithNulls(c.mem, n.out, in, buf, extraNulls), nil
	}
	noNulls := in.NullN() == 0
	for i, v := range src {
		if !noNulls && in.IsNull(i) {
			continue
		}
		r, ok := mulCheck(int64(v), mul)
		if !ok {
			if err := c.fail(n, in, reach, i, reason); err != nil {
				buf.Release()
				return nil, err
			}
			extraNulls = append(extraNulls, i)
			continue
		}
		dst[i] = r
	}
	return newFixedWithNulls(c.mem, n.out, in, buf, extraNulls), nil
}

// newFixedWithNulls builds a fixed-width output whose validity is in's plus extra null slots.
func newFixedWithNulls(mem memory.Allocator, dt arrow.DataType, in arrow.Array, values *memory.Buffer, extra []int) arrow.Array {
	valid, nulls := validityWithNulls(mem, in, extra)
	return newFixed(dt, in.Len(), valid, values, nulls)
}

// validityWithNulls returns in's validity re-based to offset 0 plus extra null slots, and its null
// count (nil, 0 when there are no nulls).
func validityWithNulls(mem memory.Allocator, in arrow.Array, extra []int) (*memory.Buffer, int) {
	if len(extra) == 0 {
		return validity(mem, in.Data()), in.NullN()
	}
	valid := ownValidity(mem, in)
	for _, i := range extra {
		bitutil.ClearBit(valid.Bytes(), i)
	}
	return valid, in.Len() - bitutil.CountSetBits(valid.Bytes(), 0, in.Len())
}

// ownValidity returns a fresh copy of in's validity at offset 0 (all valid when in has none).
func ownValidity(mem memory.Allocator, in arrow.Array) *memory.Buffer {
	ln := in.Len()
	nb := memory.NewResizableBuffer(mem)
	nb.Resize(int(bitutil.BytesForBits(int64(ln))))
	d := in.Data()
	if d.NullN() == 0 || d.Buffers()[0] == nil {
		bitutil.SetBitsTo(nb.Bytes(), 0, int64(ln), true)
	} else {
		bitutil.CopyBitmap(d.Buffers()[0].Bytes(), d.Offset(), ln, nb.Bytes(), 0)
	}
	return nb
}

const msPerDay = 86_400_000

func (c *applyCtx) date64(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	src := in.(*array.Date64).Date64Values()
	ln := in.Len()
	buf, raw := alloc(c.mem, ln, 4)
	dst := arrow.Int32Traits.CastFromBytes(raw)
	var extra []int
	for i, v := range src {
		if in.IsNull(i) {
			continue
		}
		d := floorDiv(int64(v), msPerDay)
		if d > math.MaxInt32 || d < math.MinInt32 {
			if err := c.fail(n, in, reach, i, "date out of range"); err != nil {
				buf.Release()
				return nil, err
			}
			extra = append(extra, i)
			continue
		}
		dst[i] = int32(d)
	}
	return newFixedWithNulls(c.mem, n.out, in, buf, extra), nil
}

func (c *applyCtx) dateTs(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	const reason = "date out of range for a timestamp"
	switch a := in.(type) {
	case *array.Date32:
		return scaleChecked(c, n, in, reach, a.Date32Values(), msPerDay*1000, reason)
	case *array.Date64:
		return scaleChecked(c, n, in, reach, a.Date64Values(), 1000, reason)
	}
	return nil, fmt.Errorf("schemamatch: %s is not a date", in.DataType())
}

// largeOffsets widens utf8/binary offsets to int64 and shares the data buffer.
func (c *applyCtx) largeOffsets(n *node, in arrow.Array) arrow.Array {
	d := in.Data()
	ln, off := d.Len(), d.Offset()
	src := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[off : off+ln+1]
	buf, raw := alloc(c.mem, ln+1, 8)
	widenSlice(src, arrow.Int64Traits.CastFromBytes(raw))
	data := d.Buffers()[2]
	if data == nil {
		data = memory.NewBufferBytes(nil)
	} else {
		data.Retain()
	}
	valid := validity(c.mem, d)
	nd := array.NewData(n.out, ln, []*memory.Buffer{valid, buf, data}, nil, d.NullN(), 0)
	release(valid, buf, data)
	defer nd.Release()
	return array.MakeFromData(nd)
}

// fixedBinary turns fixed_size_binary into large_binary with offsets over the shared data buffer.
func (c *applyCtx) fixedBinary(n *node, in arrow.Array) arrow.Array {
	d := in.Data()
	ln, off := d.Len(), d.Offset()
	w := int64(in.DataType().(*arrow.FixedSizeBinaryType).ByteWidth)
	buf, raw := alloc(c.mem, ln+1, 8)
	offs := arrow.Int64Traits.CastFromBytes(raw)
	for i := range offs {
		offs[i] = (int64(off) + int64(i)) * w
	}
	data := d.Buffers()[1]
	if data == nil || ln == 0 {
		data = memory.NewBufferBytes(nil)
		for i := range offs {
			offs[i] = 0
		}
	} else {
		data.Retain()
	}
	valid := validity(c.mem, d)
	nd := array.NewData(n.out, ln, []*memory.Buffer{valid, buf, data}, nil, d.NullN(), 0)
	release(valid, buf, data)
	defer nd.Release()
	return array.MakeFromData(nd)
}

// fromView copies string_view/binary_view values into a large array.
func (c *applyCtx) fromView(n *node, in arrow.Array) arrow.Array {
	b := array.NewBinaryBuilder(c.mem, arrow.BinaryTypes.LargeBinary)
	defer b.Release()
	b.Reserve(in.Len())
	for i := 0; i < in.Len(); i++ {
		if in.IsNull(i) {
			b.AppendNull()
			continue
		}
		switch a := in.(type) {
		case *array.StringView:
			b.AppendString(a.Value(i))
		case *array.BinaryView:
			b.Append(a.Value(i))
		}
	}
	arr := b.NewArray()
	defer arr.Release()
	nd := array.NewData(n.out, arr.Len(), arr.Data().Buffers(), nil, arr.NullN(), 0)
	defer nd.Release()
	return array.MakeFromData(nd)
}

// physValid reports whether physical slot j of d is valid.
func physValid(d arrow.ArrayData, j int) bool {
	if d.NullN() == 0 || d.Buffers()[0] == nil {
		return true
	}
	return bitutil.BitIsSet(d.Buffers()[0].Bytes(), j)
}

// list converts list, large_list and fixed_size_list into a list with the canonical child.
func (c *applyCtx) list(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	d := in.Data()
	ln, off := d.Len(), d.Offset()
	child := array.MakeFromData(d.Children()[0])
	defer child.Release()

	var valid, offsets *memory.Buffer
	outOff := 0
	switch a := in.(type) {
	case *array.List:
		valid, offsets, outOff = d.Buffers()[0], d.Buffers()[1], off
		if valid != nil {
			valid.Retain()
		}
		offsets.Retain()
	case *array.LargeList:
		buf, raw := alloc(c.mem, ln+1, 4)
		dst := arrow.Int32Traits.CastFromBytes(raw)
		src := arrow.Int64Traits.CastFromBytes(d.Buffers()[1].Bytes())[off : off+ln+1]
		for i, o := range src {
			if o > math.MaxInt32 || o < 0 {
				buf.Release()
				row := i
				if i == ln {
					row = ln - 1
				}
				if reach != nil {
					row = reach[row]
				}
				return nil, c.valueErr(n.path, row, "list too large: more than 2^31-1 elements in one batch")
			}
			dst[i] = int32(o)
		}
		offsets = buf
		valid = validity(c.mem, d)
	case *array.FixedSizeList:
		size := int64(a.DataType().(*arrow.FixedSizeListType).Len())
		buf, raw := alloc(c.mem, ln+1, 4)
		dst := arrow.Int32Traits.CastFromBytes(raw)
		for i := range dst {
			o := (int64(off) + int64(i)) * size
			if o > math.MaxInt32 {
				buf.Release()
				return nil, c.valueErr(n.path, -1, "list too large: more than 2^31-1 elements in one batch")
			}
			dst[i] = int32(o)
		}
		offsets = buf
		valid = validity(c.mem, d)
	default:
		return nil, fmt.Errorf("schemamatch: %s is not a list", in.DataType())
	}

	cn := n.children[0]
	var childReach []int
	if cn.fallible {
		childReach = listReach(in.(array.ListLike), reach, child.Len())
	}
	cout, err := c.apply(cn, child, childReach)
	if err != nil {
		release(valid, offsets)
		return nil, err
	}
	defer cout.Release()
	nd := array.NewData(n.out, ln, []*memory.Buffer{valid, offsets}, []arrow.ArrayData{cout.Data()}, d.NullN(), outOff)
	release(valid, offsets)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// listReach maps each child index of a list-like array to the batch row of the valid list slot
// that holds it, or -1.
func listReach(a array.ListLike, reach []int, childLen int) []int {
	out := make([]int, childLen)
	for k := range out {
		out[k] = -1
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			continue
		}
		row := i
		if reach != nil {
			if row = reach[i]; row < 0 {
				continue
			}
		}
		s, e := a.ValueOffsets(i)
		for k := s; k < e && k < int64(childLen); k++ {
			if k >= 0 {
				out[k] = row
			}
		}
	}
	return out
}

// structReach maps the physical child slots of struct data d to batch rows (-1 when the struct slot
// is null, outside the slice, or unreachable).
func structReach(d arrow.ArrayData, reach []int, childLen int) []int {
	out := make([]int, childLen)
	off, ln := d.Offset(), d.Len()
	for j := range out {
		out[j] = -1
		i := j - off
		if i < 0 || i >= ln || !physValid(d, j) {
			continue
		}
		if reach != nil {
			out[j] = reach[i]
		} else {
			out[j] = i
		}
	}
	return out
}

// structChildren converts the children of struct data d to the output fields.
func (c *applyCtx) structChildren(n *node, d arrow.ArrayData, reach []int, outFields []arrow.Field) ([]arrow.ArrayData, error) {
	phys := d.Offset() + d.Len()
	out := make([]arrow.ArrayData, len(outFields))
	fail := func(err error) ([]arrow.ArrayData, error) {
		for _, o := range out {
			if o != nil {
				o.Release()
			}
		}
		return nil, err
	}
	var sreach []int
	for i, f := range outFields {
		if n.fill[i] {
			a := array.MakeArrayOfNull(c.mem, f.Type, phys)
			out[i] = a.Data()
			out[i].Retain()
			a.Release()
			continue
		}
		raw := array.MakeFromData(d.Children()[n.childSrc[i]])
		cn := n.children[i]
		var cr []int
		if cn.fallible {
			if sreach == nil {
				sreach = structReach(d, reach, phys)
			}
			cr = sreach
			if raw.Len() > len(cr) {
				cr = append(append([]int(nil), cr...), make([]int, raw.Len()-len(cr))...)
				for j := phys; j < raw.Len(); j++ {
					cr[j] = -1
				}
			} else {
				cr = cr[:raw.Len()]
			}
		}
		a, err := c.apply(cn, raw, cr)
		raw.Release()
		if err != nil {
			return fail(err)
		}
		out[i] = a.Data()
		out[i].Retain()
		a.Release()
	}
	return out, nil
}

func (c *applyCtx) structArray(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	d := in.Data()
	st := n.out.(*arrow.StructType)
	children, err := c.structChildren(n, d, reach, st.Fields())
	if err != nil {
		return nil, err
	}
	nd := array.NewData(n.out, d.Len(), []*memory.Buffer{d.Buffers()[0]}, children, d.NullN(), d.Offset())
	for _, ch := range children {
		ch.Release()
	}
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// mapArray converts a map's keys and values and relabels it with the canonical map type.
func (c *applyCtx) mapArray(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	d := in.Data()
	m := in.(*array.Map)
	entries := d.Children()[0]
	outType := n.out.(*arrow.MapType)
	entryType := outType.Elem().(*arrow.StructType)
	var entriesReach []int
	if n.descendant {
		// ValueOffsets index the entries logically, as structChildren expects.
		entriesReach = listReach(m, reach, entries.Len())
	}
	sn := &node{kind: kStruct, children: n.children, fill: []bool{false, false}, childSrc: []int{0, 1}}
	children, err := c.structChildren(sn, entries, entriesReach, entryType.Fields())
	if err != nil {
		return nil, err
	}
	ed := array.NewData(entryType, entries.Len(), []*memory.Buffer{entries.Buffers()[0]}, children, entries.NullN(), entries.Offset())
	for _, ch := range children {
		ch.Release()
	}
	defer ed.Release()
	nd := array.NewData(n.out, d.Len(), []*memory.Buffer{d.Buffers()[0], d.Buffers()[1]}, []arrow.ArrayData{ed}, d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// binaryText turns binary values into large_utf8 after checking each is UTF-8. The bytes are shared
// where the layout allows (binary, large_binary, fixed_size_binary).
func (c *applyCtx) binaryText(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	var lb arrow.Array // the values as large_binary
	bn := &node{out: arrow.BinaryTypes.LargeBinary}
	switch in.DataType().ID() {
	case arrow.LARGE_BINARY:
		in.Retain()
		lb = in
	case arrow.BINARY:
		lb = c.largeOffsets(bn, in)
	case arrow.BINARY_VIEW:
		lb = c.fromView(bn, in)
	case arrow.FIXED_SIZE_BINARY:
		lb = c.fixedBinary(bn, in)
	default:
		return nil, fmt.Errorf("schemamatch: %s is not binary", in.DataType())
	}
	defer lb.Release()
	bin := lb.(*array.LargeBinary)
	var bad []int
	for i := 0; i < bin.Len(); i++ {
		if bin.IsValid(i) && !utf8.Valid(bin.Value(i)) {
			if err := c.fail(n, in, reach, i, "not valid UTF-8"); err != nil {
				return nil, err
			}
			bad = append(bad, i)
		}
	}
	d := lb.Data()
	bufs := append([]*memory.Buffer(nil), d.Buffers()...)
	nulls := d.NullN()
	if len(bad) > 0 && d.Offset() != 0 {
		// a sliced input with bad values: copy (rare)
		b := array.NewLargeStringBuilder(c.mem)
		defer b.Release()
		k := 0
		for i := 0; i < bin.Len(); i++ {
			if k < len(bad) && bad[k] == i {
				k++
				b.AppendNull()
				continue
			}
			if bin.IsNull(i) {
				b.AppendNull()
				continue
			}
			b.BinaryBuilder.Append(bin.Value(i))
		}
		return b.NewArray(), nil
	}
	if len(bad) > 0 {
		valid := ownValidity(c.mem, lb)
		defer valid.Release()
		for _, i := range bad {
			bitutil.ClearBit(valid.Bytes(), i)
		}
		bufs[0] = valid
		nulls = d.Len() - bitutil.CountSetBits(valid.Bytes(), 0, d.Len())
	}
	nd := array.NewData(n.out, d.Len(), bufs, nil, nulls, d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// dictValuesFirst converts a dictionary array by casting its dictionary's values once, then
// gathering them by index, instead of unpacking every row to the source value type and casting
// the rows: the cast then costs the dictionary's size, not the batch's, and the rows are copied once.
// It serves children that cannot fail on a value (an unused dictionary value must not fail a batch,
// and a failure must name a row); Apply checks NOT NULL on the result as before.
func (c *applyCtx) dictValuesFirst(n *node, d *array.Dictionary) (arrow.Array, error) {
	vals, err := c.convert(n.children[0], d.Dictionary(), nil)
	if err != nil {
		return nil, err
	}
	defer vals.Release()
	switch vals.DataType().ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		switch ix := d.Indices().(type) {
		case *array.Int8:
			return gatherLarge(c, n, vals, ix, ix.Int8Values())
		case *array.Int16:
			return gatherLarge(c, n, vals, ix, ix.Int16Values())
		case *array.Int32:
			return gatherLarge(c, n, vals, ix, ix.Int32Values())
		case *array.Int64:
			return gatherLarge(c, n, vals, ix, ix.Int64Values())
		case *array.Uint8:
			return gatherLarge(c, n, vals, ix, ix.Uint8Values())
		case *array.Uint16:
			return gatherLarge(c, n, vals, ix, ix.Uint16Values())
		case *array.Uint32:
			return gatherLarge(c, n, vals, ix, ix.Uint32Values())
		case *array.Uint64:
			return gatherLarge(c, n, vals, ix, ix.Uint64Values())
		}
	}
	ctx := compute.WithAllocator(context.Background(), c.mem)
	out, err := compute.TakeArray(ctx, vals, d.Indices())
	if err != nil {
		return nil, c.valueErr(n.path, -1, fmt.Sprintf("unpacking the dictionary: %v", err))
	}
	return out, nil
}

// gatherLarge builds the large_utf8 or large_binary array n.out whose slot i is value idx[i] of
// vals (a large_utf8 or large_binary array), null where the index (of indices, whose values idx
// are) or the value it points to is null. The bytes are copied once, into a buffer sized first.
func gatherLarge[I int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64](c *applyCtx, n *node, vals, indices arrow.Array, idx []I) (arrow.Array, error) {
	vd := vals.Data()
	voff := vd.Offset()
	offs := arrow.Int64Traits.CastFromBytes(vd.Buffers()[1].Bytes())[voff : voff+vd.Len()+1]
	var data []byte
	if b := vd.Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	ln, dictLen := len(idx), uint64(vd.Len())
	var ibits, vbits []byte
	if indices.NullN() > 0 {
		ibits = indices.NullBitmapBytes()
	}
	if vals.NullN() > 0 {
		vbits = vals.NullBitmapBytes()
	}
	ioff := indices.Data().Offset()
	// Pass 1: check the indices, write the validity, count the bytes and the nulls.
	var vbuf *memory.Buffer
	var bits []byte
	if ibits != nil || vbits != nil {
		vbuf, bits = alloc(c.mem, int(bitutil.BytesForBits(int64(ln))), 1)
		bitutil.SetBitsTo(bits, 0, int64(ln), true)
	}
	var total int64
	nulls := 0
	for i, v := range idx {
		if ibits != nil && !bitutil.BitIsSet(ibits, ioff+i) {
			bitutil.ClearBit(bits, i)
			nulls++
			continue
		}
		j := uint64(v) // a negative index wraps past dictLen
		if j >= dictLen {
			release(vbuf)
			return nil, c.valueErr(n.path, -1, fmt.Sprintf("unpacking the dictionary: index %d out of range for a dictionary of %d values", v, dictLen))
		}
		if vbits != nil && !bitutil.BitIsSet(vbits, voff+int(j)) {
			bitutil.ClearBit(bits, i)
			nulls++
			continue
		}
		total += offs[j+1] - offs[j]
	}
	if nulls == 0 && vbuf != nil {
		vbuf.Release()
		vbuf, bits = nil, nil
	}
	// Pass 2: copy the values of the valid slots.
	obuf, oraw := alloc(c.mem, ln+1, 8)
	dst := arrow.Int64Traits.CastFromBytes(oraw)[: ln+1 : ln+1]
	dbuf, draw := alloc(c.mem, int(total), 1)
	var pos int64
	for i, v := range idx {
		dst[i] = pos
		if bits != nil && bits[i>>3]&(1<<(i&7)) == 0 {
			continue
		}
		j := uint64(v)
		pos += int64(copy(draw[pos:], data[offs[j]:offs[j+1]]))
	}
	dst[ln] = pos
	nd := array.NewData(n.out, ln, []*memory.Buffer{vbuf, obuf, dbuf}, nil, nulls, 0)
	release(vbuf, obuf, dbuf)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}
