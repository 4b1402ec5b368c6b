package warehouse

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderproject/loader/internal/delta"
	"github.com/loaderproject/loader/tableschema"
)

// scanBatchRows is how many rows a Scan batch holds at most.
const scanBatchRows = 64 << 10

// Scan calls fn with every committed row of the latest snapshot, in batches of the table's canonical
// Arrow schema. fn must not keep a batch after it returns unless it retains it.
//
// Files are read in the order they were committed, each file's rows in order. Scan stops at the
// first error from fn (returned as is) or from reading, and checks ctx between batches.
func (t *Table) Scan(ctx context.Context, fn func(arrow.RecordBatch) error) error {
	var (
		files  []delta.File
		schema *tableschema.Schema
	)
	err := t.update(ctx, func(st *delta.State, s *tableschema.Schema) error {
		files, schema = st.Files(), s
		return nil
	})
	if err != nil {
		return fmt.Errorf("warehouse: table %s: scan: %w", t.name, err)
	}
	plan := newTablePlan(schema)
	for _, f := range files {
		rel, err := localPath(f.Path)
		if err != nil {
			return fmt.Errorf("warehouse: table %s: scan: %w", t.name, err)
		}
		if err := t.scanFile(ctx, plan, rel, fn); err != nil {
			return err
		}
	}
	return nil
}

func (t *Table) scanFile(ctx context.Context, plan *tablePlan, rel string, fn func(arrow.RecordBatch) error) (err error) {
	mem := t.wh.cfg.mem
	wrap := func(err error) error {
		return fmt.Errorf("warehouse: table %s: scan: data file %s: %w", t.name, rel, err)
	}
	if err := ctx.Err(); err != nil {
		return wrap(err)
	}
	pf, err := file.OpenParquetFile(filepath.Join(t.dir, filepath.FromSlash(rel)), false, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return wrap(err)
	}
	defer pf.Close()
	if pf.NumRows() == 0 {
		return nil
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: scanBatchRows}, mem)
	if err != nil {
		return wrap(err)
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return wrap(err)
	}
	defer rr.Release()
	// Map the file's top-level fields to the table's columns by name.
	fileSchema := rr.Schema()
	src := make([]int, len(plan.cols))
	for i, c := range plan.cols {
		idx := fileSchema.FieldIndices(c.name)
		if len(idx) != 1 {
			if !c.nullable {
				return wrap(fmt.Errorf("column %q: missing from the file", c.name))
			}
			src[i] = -1
			continue
		}
		src[i] = idx[0]
	}
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return wrap(err)
		}
		rec := rr.RecordBatch()
		out, err := plan.fromStorage(mem, rec, src)
		if err != nil {
			return wrap(err)
		}
		err = fn(out)
		out.Release()
		if err != nil {
			return err // as is (Scan's doc)
		}
	}
	if err := rr.Err(); err != nil {
		return wrap(err)
	}
	return nil
}

// fromStorage turns a batch read from a data file into the canonical schema. src[i] is the index of
// column i in rec, or -1 to fill it with nulls.
func (p *tablePlan) fromStorage(mem memory.Allocator, rec arrow.RecordBatch, src []int) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	cols := make([]arrow.Array, len(p.cols))
	defer releaseAll(cols)
	for i, c := range p.cols {
		if src[i] < 0 {
			cols[i] = array.MakeArrayOfNull(mem, c.canon, int(n))
			continue
		}
		d, err := toCanonical(mem, c, rec.Column(src[i]).Data())
		if err != nil {
			return nil, err
		}
		cols[i] = array.MakeFromData(d)
		d.Release()
	}
	return array.NewRecordBatch(p.canon, cols, n), nil
}

// toCanonical converts storage data to plan c's canonical type, keeping its offset and length and
// sharing every buffer it can. The result is the caller's to release.
func toCanonical(mem memory.Allocator, c *colPlan, d arrow.ArrayData) (arrow.ArrayData, error) {
	got := d.DataType()
	mismatch := func() error {
		return fmt.Errorf("column %q: stored as Arrow %s, want %s", c.path, got, c.storage)
	}
	switch c.t.Kind {
	case tableschema.Decimal:
		if got.ID() != arrow.DECIMAL128 {
			return nil, mismatch()
		}
		return decimalToText(mem, c, d), nil
	case tableschema.String, tableschema.Binary:
		switch got.ID() {
		case arrow.LARGE_STRING, arrow.LARGE_BINARY:
			return retype(c.canon, d, nil), nil
		case arrow.STRING, arrow.BINARY:
			return widenOffsets(mem, c.canon, d), nil
		}
		return nil, mismatch()
	case tableschema.Array, tableschema.Map:
		if got.ID() != c.canon.ID() || len(d.Children()) != 1 {
			return nil, mismatch()
		}
		child := d.Children()[0]
		var newChild arrow.ArrayData
		if c.t.Kind == tableschema.Array {
			var err error
			if newChild, err = toCanonical(mem, c.children[0], child); err != nil {
				return nil, err
			}
		} else {
			if len(child.Children()) != 2 {
				return nil, mismatch()
			}
			k, err := toCanonical(mem, c.children[0], child.Children()[0])
			if err != nil {
				return nil, err
			}
			v, err := toCanonical(mem, c.children[1], child.Children()[1])
			if err != nil {
				k.Release()
				return nil, err
			}
			newChild = retype(c.canon.(*arrow.MapType).Elem(), child, []arrow.ArrayData{k, v})
			k.Release()
			v.Release()
		}
		defer newChild.Release()
		return retype(c.canon, d, []arrow.ArrayData{newChild}), nil
	case tableschema.Struct:
		if got.ID() != arrow.STRUCT || len(d.Children()) != len(c.children) {
			return nil, mismatch()
		}
		children := make([]arrow.ArrayData, len(c.children))
		defer releaseAll(children)
		for i, fc := range c.children {
			ch, err := toCanonical(mem, fc, d.Children()[i])
			if err != nil {
				return nil, err
			}
			children[i] = ch
		}
		return retype(c.canon, d, children), nil
	}
	if got.ID() != c.canon.ID() {
		return nil, mismatch()
	}
	if ts, ok := got.(*arrow.TimestampType); ok && ts.Unit != arrow.Microsecond {
		return nil, mismatch()
	}
	return retype(c.canon, d, nil), nil
}

// retype returns d with another (layout-compatible) type and, when given, other children.
func retype(dt arrow.DataType, d arrow.ArrayData, children []arrow.ArrayData) arrow.ArrayData {
	if children == nil {
		children = d.Children()
	}
	return array.NewData(dt, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
}

// widenOffsets converts utf8/binary data to large_utf8/large_binary (for data files written without
// the Arrow schema), sharing the validity and value buffers.
func widenOffsets(mem memory.Allocator, dt arrow.DataType, d arrow.ArrayData) arrow.ArrayData {
	bufs := d.Buffers()
	total := d.Offset() + d.Len()
	off := memory.NewResizableBuffer(mem)
	off.Resize((total + 1) * 8)
	defer off.Release()
	out := off.Bytes()
	in := bufs[1].Bytes()
	for i := 0; i <= total; i++ {
		binary.LittleEndian.PutUint64(out[i*8:], uint64(int64(int32(binary.LittleEndian.Uint32(in[i*4:])))))
	}
	return array.NewData(dt, d.Len(), []*memory.Buffer{bufs[0], off, bufs[2]}, nil, d.NullN(), d.Offset())
}

// decimalToText renders Decimal128 data as large_utf8 text with exactly scale fractional digits. The
// result has d's offset and shares its validity bitmap.
func decimalToText(mem memory.Allocator, c *colPlan, d arrow.ArrayData) arrow.ArrayData {
	arr := array.NewDecimal128Data(d)
	defer arr.Release()
	off0, n := d.Offset(), d.Len()
	offsets := memory.NewResizableBuffer(mem)
	offsets.Resize((off0 + n + 1) * 8)
	defer offsets.Release()
	ob := offsets.Bytes()
	clear(ob[:(off0+1)*8])
	text := make([]byte, 0, n*(c.t.Precision/2+3))
	hasNulls := d.NullN() > 0
	for i := 0; i < n; i++ {
		if !hasNulls || arr.IsValid(i) {
			text = appendDecimal(text, arr.Value(i), c.t.Scale)
		}
		binary.LittleEndian.PutUint64(ob[(off0+i+1)*8:], uint64(len(text)))
	}
	values := memory.NewResizableBuffer(mem)
	values.Resize(len(text))
	copy(values.Bytes(), text)
	defer values.Release()
	return array.NewData(c.canon, n, []*memory.Buffer{d.Buffers()[0], offsets, values}, nil, d.NullN(), off0)
}
