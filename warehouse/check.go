package warehouse

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
)

// colPlan is the precomputed shape of one column (or nested field) of a table: its canonical and
// storage Arrow types and whether checking or converting it needs a walk over its values.
type colPlan struct {
	name     string
	path     string // "a.b", "tags.element", "attrs.key" (tableschema's naming)
	t        tableschema.Type
	nullable bool
	canon    arrow.DataType // the canonical Arrow type (tableschema)
	storage  arrow.DataType // the type written to Parquet: decimals become Decimal128
	// work is set when the subtree holds a decimal (to parse) or a NOT NULL field, element or map
	// key below the top (to check), so a walk cannot skip it.
	work     bool
	children []*colPlan // struct: fields; array: element; map: key, value
}

// tablePlan is the plan of every column of a table.
type tablePlan struct {
	schema  *tableschema.Schema
	cols    []*colPlan
	canon   *arrow.Schema
	storage *arrow.Schema
}

func newTablePlan(s *tableschema.Schema) *tablePlan {
	p := &tablePlan{schema: s, cols: make([]*colPlan, len(s.Fields))}
	canon := make([]arrow.Field, len(s.Fields))
	storage := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		p.cols[i] = newColPlan(f.Name, f.Name, f.Type, f.Nullable)
		canon[i] = arrow.Field{Name: f.Name, Type: p.cols[i].canon, Nullable: f.Nullable}
		storage[i] = arrow.Field{Name: f.Name, Type: p.cols[i].storage, Nullable: f.Nullable}
	}
	p.canon = arrow.NewSchema(canon, nil)
	p.storage = arrow.NewSchema(storage, nil)
	return p
}

func newColPlan(name, path string, t tableschema.Type, nullable bool) *colPlan {
	c := &colPlan{name: name, path: path, t: t, nullable: nullable, canon: t.Arrow()}
	switch t.Kind {
	case tableschema.Decimal:
		c.storage = &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}
		c.work = true
	case tableschema.Array:
		e := newColPlan(tableschema.ListItemName, path+".element", *t.Elem, t.ElemNullable)
		c.children = []*colPlan{e}
		c.storage = arrow.ListOfField(arrow.Field{Name: tableschema.ListItemName, Type: e.storage, Nullable: e.nullable})
		c.work = e.work || !e.nullable
	case tableschema.Map:
		k := newColPlan("key", path+".key", *t.Key, false)
		v := newColPlan("value", path+".value", *t.Value, t.ValueNullable)
		c.children = []*colPlan{k, v}
		c.storage = arrow.MapOfFields(
			arrow.Field{Name: "key", Type: k.storage},
			arrow.Field{Name: "value", Type: v.storage, Nullable: v.nullable})
		c.work = true // keys are never null
	case tableschema.Struct:
		fields := make([]arrow.Field, len(t.Fields))
		for i, f := range t.Fields {
			fc := newColPlan(f.Name, path+"."+f.Name, f.Type, f.Nullable)
			c.children = append(c.children, fc)
			fields[i] = arrow.Field{Name: f.Name, Type: fc.storage, Nullable: f.Nullable}
			c.work = c.work || fc.work || !fc.nullable
		}
		c.storage = arrow.StructOf(fields...)
	default:
		c.storage = c.canon
	}
	return c
}

// Checker checks batches against one table schema. It is made once per stream or call (its plan
// of the schema's columns is what makes checking batch after batch cheap) and is held by whoever
// owns that lifetime; when the table's schema changes, make a new one. A Checker is immutable and
// safe for concurrent use.
type Checker struct{ plan *tablePlan }

// NewChecker returns a Checker for the table schema.
func NewChecker(schema *tableschema.Schema) *Checker {
	return &Checker{plan: newTablePlan(schema)}
}

// Check verifies that rec's values fit the table: no nulls in NOT NULL columns or nested NOT NULL
// fields, decimal text that parses and fits. rec's schema must already pass zerobus.ValidateSchema
// against the Checker's schema. Errors wrap ErrBadValue and name the column and row index, never
// the value.
//
// Nested fields are checked only where they are present: a NOT NULL struct field may be null where
// its struct is null, and values under a null list or map are not looked at. Map keys are never null.
func (c *Checker) Check(rec arrow.RecordBatch) error {
	_, err := c.plan.convert(nil, rec, false)
	return err
}

// convert checks rec against the plan and, when build is set, returns its columns in the full storage
// schema (omitted columns as nulls, decimal text as Decimal128, null lists and maps emptied of the
// values they may span: see dropHiddenValues). The arrays are the caller's to release. rec's schema
// must pass zerobus.ValidateSchema against p.schema.
func (p *tablePlan) convert(mem memory.Allocator, rec arrow.RecordBatch, build bool) ([]arrow.Array, error) {
	var out []arrow.Array
	if build {
		out = make([]arrow.Array, len(p.cols))
	}
	c := converter{mem: mem, build: build}
	recSchema := rec.Schema()
	for i, f := range recSchema.Fields() {
		idx := p.schema.FieldIndex(f.Name)
		if idx < 0 {
			releaseAll(out)
			return nil, fmt.Errorf("warehouse: column %q is not in the table", f.Name)
		}
		data, err := c.walk(p.cols[idx], rec.Column(i), nil, nil)
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		if build {
			out[idx] = array.MakeFromData(data)
			data.Release()
			d, err := c.dropHiddenValues(out[idx], nil)
			if err != nil {
				releaseAll(out)
				return nil, err
			}
			if d != nil {
				out[idx].Release()
				out[idx] = array.MakeFromData(d)
				d.Release()
			}
		}
	}
	return out, nil
}

// releaseAll releases every element of xs that is not nil.
func releaseAll[T interface{ Release() }](xs []T) {
	for _, x := range xs {
		if any(x) != nil {
			x.Release()
		}
	}
}

var (
	errNullInColumn = errors.New("null in a NOT NULL column")
	errNullInField  = errors.New("null in a NOT NULL field")
)

type converter struct {
	mem   memory.Allocator
	build bool
}

// badValue is the error for the value at row of the column or field at path; reason says what is
// wrong with it without quoting it.
func badValue(path string, row int, reason error) error {
	return fmt.Errorf("warehouse: column %q row %d: %w: %w", path, row, ErrBadValue, reason)
}

func rowOf(rows []int, i int) int {
	if rows == nil {
		return i
	}
	return rows[i]
}

func present(mask []bool, i int) bool { return mask == nil || mask[i] }

// walk checks arr, a column or nested field of plan c, and returns its storage data when building
// (retained: the caller releases it). mask, when not nil, says which slots are present (every
// ancestor valid); rows maps slots to the row of the batch, for errors.
func (cv *converter) walk(c *colPlan, arr arrow.Array, mask []bool, rows []int) (arrow.ArrayData, error) {
	if !c.nullable && arr.NullN() > 0 {
		for i := 0; i < arr.Len(); i++ {
			if arr.IsNull(i) && present(mask, i) {
				what := errNullInColumn
				if rows != nil || mask != nil {
					what = errNullInField
				}
				return nil, badValue(c.path, rowOf(rows, i), what)
			}
		}
	}
	if !c.work {
		if cv.build {
			d := arr.Data()
			d.Retain()
			return d, nil
		}
		return nil, nil
	}
	switch c.t.Kind {
	case tableschema.Decimal:
		return cv.decimal(c, arr, mask, rows)
	case tableschema.Array:
		l, ok := arr.(*array.List)
		if !ok {
			return nil, fmt.Errorf("warehouse: column %q: got Arrow %s, want %s", c.path, arr.DataType(), c.canon)
		}
		return cv.list(c, l, l.ListValues(), l.ValueOffsets, []*colPlan{c.children[0]}, mask, rows)
	case tableschema.Map:
		m, ok := arr.(*array.Map)
		if !ok {
			return nil, fmt.Errorf("warehouse: column %q: got Arrow %s, want %s", c.path, arr.DataType(), c.canon)
		}
		return cv.list(c, m, m.ListValues(), m.ValueOffsets, c.children, mask, rows)
	case tableschema.Struct:
		s, ok := arr.(*array.Struct)
		if !ok {
			return nil, fmt.Errorf("warehouse: column %q: got Arrow %s, want %s", c.path, arr.DataType(), c.canon)
		}
		return cv.strct(c, s, mask, rows)
	}
	return nil, fmt.Errorf("warehouse: column %q: no conversion for %s", c.path, c.t.SQL())
}

// childMaskStruct returns the presence mask of a struct's children (nil when every slot is present).
func childMaskStruct(arr arrow.Array, mask []bool) []bool {
	if arr.NullN() == 0 {
		return mask
	}
	m := make([]bool, arr.Len())
	for i := range m {
		m[i] = present(mask, i) && arr.IsValid(i)
	}
	return m
}

func (cv *converter) strct(c *colPlan, s *array.Struct, mask []bool, rows []int) (arrow.ArrayData, error) {
	if s.NumField() != len(c.children) {
		return nil, fmt.Errorf("warehouse: column %q: struct with %d fields, want %d", c.path, s.NumField(), len(c.children))
	}
	cm := childMaskStruct(s, mask)
	var children []arrow.ArrayData
	if cv.build {
		children = make([]arrow.ArrayData, len(c.children))
	}
	for i, fc := range c.children {
		d, err := cv.walk(fc, s.Field(i), cm, rows)
		if err != nil {
			releaseAll(children)
			return nil, err
		}
		if cv.build {
			children[i] = d
		}
	}
	if !cv.build {
		return nil, nil
	}
	defer releaseAll(children)
	// The children from Field(i) are sliced to the struct's window, so the result starts at offset 0.
	bufs := []*memory.Buffer{cv.copyValidity(s)}
	if bufs[0] != nil {
		defer bufs[0].Release()
	}
	return array.NewData(c.storage, s.Len(), bufs, children, s.NullN(), 0), nil
}

// copyValidity returns arr's validity bitmap moved to offset 0, or nil without nulls.
func (cv *converter) copyValidity(arr arrow.Array) *memory.Buffer {
	if arr.NullN() == 0 {
		return nil
	}
	d := arr.Data()
	src := d.Buffers()[0]
	if d.Offset() == 0 {
		src.Retain()
		return src
	}
	buf := memory.NewResizableBuffer(cv.mem)
	buf.Resize(int(bitutil.BytesForBits(int64(arr.Len()))))
	bitutil.CopyBitmap(src.Bytes(), d.Offset(), arr.Len(), buf.Bytes(), 0)
	return buf
}

// list walks a list or map: values is the child array (list elements, or the map's entries struct),
// offsets gives each slot's range in it.
func (cv *converter) list(c *colPlan, arr arrow.Array, values arrow.Array, offsets func(int) (int64, int64),
	childPlans []*colPlan, mask []bool, rows []int) (arrow.ArrayData, error) {
	n := values.Len()
	cm := make([]bool, n)
	cr := make([]int, n)
	for i := 0; i < arr.Len(); i++ {
		if !present(mask, i) || arr.IsNull(i) {
			continue
		}
		start, end := offsets(i)
		if start < 0 || end > int64(n) || start > end {
			return nil, fmt.Errorf("warehouse: column %q row %d: list offsets out of range", c.path, rowOf(rows, i))
		}
		r := rowOf(rows, i)
		for j := start; j < end; j++ {
			cm[j] = true
			cr[j] = r
		}
	}
	var newChild arrow.ArrayData
	if c.t.Kind == tableschema.Map {
		entries, ok := values.(*array.Struct)
		if !ok || entries.NumField() != 2 {
			return nil, fmt.Errorf("warehouse: column %q: map entries are not a key/value struct", c.path)
		}
		// Entries themselves are never null; walk key and value with the entries' presence.
		em := childMaskStruct(entries, cm)
		var kv [2]arrow.ArrayData
		for k := range 2 {
			d, err := cv.walk(childPlans[k], entries.Field(k), em, cr)
			if err != nil {
				if kv[0] != nil {
					kv[0].Release()
				}
				return nil, err
			}
			kv[k] = d
		}
		if cv.build {
			entryType := c.storage.(*arrow.MapType).Elem()
			vb := cv.copyValidity(entries)
			newChild = array.NewData(entryType, entries.Len(), []*memory.Buffer{vb}, kv[:], entries.NullN(), 0)
			if vb != nil {
				vb.Release()
			}
			kv[0].Release()
			kv[1].Release()
		}
	} else {
		d, err := cv.walk(childPlans[0], values, cm, cr)
		if err != nil {
			return nil, err
		}
		newChild = d
	}
	if !cv.build {
		return nil, nil
	}
	defer newChild.Release()
	d := arr.Data()
	return array.NewData(c.storage, d.Len(), d.Buffers(), []arrow.ArrayData{newChild}, d.NullN(), d.Offset()), nil
}

func (cv *converter) decimal(c *colPlan, arr arrow.Array, mask []bool, rows []int) (arrow.ArrayData, error) {
	s, ok := arr.(*array.LargeString)
	if !ok {
		return nil, fmt.Errorf("warehouse: column %q: got Arrow %s, want %s (decimal text)", c.path, arr.DataType(), c.canon)
	}
	n := s.Len()
	var out []decimal128.Num
	var vals *memory.Buffer
	if cv.build {
		vals = memory.NewResizableBuffer(cv.mem)
		vals.Resize(arrow.Decimal128Traits.BytesRequired(n))
		out = arrow.Decimal128Traits.CastFromBytes(vals.Bytes())
		clear(out)
	}
	p, sc := c.t.Precision, c.t.Scale
	nulls := s.NullN() > 0
	for i := 0; i < n; i++ {
		if (nulls && s.IsNull(i)) || !present(mask, i) {
			continue
		}
		num, err := tableschema.ParseDecimal(s.Value(i), p, sc, tableschema.DecimalPlain)
		if err != nil {
			if vals != nil {
				vals.Release()
			}
			return nil, badValue(c.path, rowOf(rows, i), err)
		}
		if out != nil {
			out[i] = num
		}
	}
	if !cv.build {
		return nil, nil
	}
	defer vals.Release()
	vb := cv.copyValidity(s)
	if vb != nil {
		defer vb.Release()
	}
	return array.NewData(c.storage, n, []*memory.Buffer{vb, vals}, nil, s.NullN(), 0), nil
}
