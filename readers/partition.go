package readers

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
)

// partSource appends a file's Hive partition values as constant columns.
type partSource struct {
	Source
	schema *arrow.Schema
	vals   []arrow.Array // one-row arrays holding each partition value
	mem    memory.Allocator
}

// withPartitions wraps src when its file has partition values that are not already columns.
func withPartitions(src Source, cfg *config) (Source, error) {
	f := src.File()
	if !cfg.partitionCols || len(f.Partitions) == 0 {
		return src, nil
	}
	base := src.Schema()
	fields := append([]arrow.Field(nil), base.Fields()...)
	p := &partSource{Source: src, mem: cfg.mem}
	seen := map[string]bool{}
	for _, fl := range fields {
		seen[fl.Name] = true
	}
	for _, part := range f.Partitions {
		if seen[part.Key] {
			cfg.logger.Debug("readers: the file has a column named like a partition; keeping the file's", "file", f.Path, "column", part.Key)
			continue
		}
		seen[part.Key] = true
		arr, dt, err := partitionValue(cfg, part)
		if err != nil {
			p.release()
			src.Close()
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		fields = append(fields, arrow.Field{Name: part.Key, Type: dt, Nullable: true})
		p.vals = append(p.vals, arr)
	}
	if len(p.vals) == 0 {
		return src, nil
	}
	meta := base.Metadata()
	p.schema = arrow.NewSchema(fields, &meta)
	return p, nil
}

// partitionValue parses a partition value into a one-row array of its table column's type (text
// without a table).
func partitionValue(cfg *config, part Partition) (arrow.Array, arrow.DataType, error) {
	var dt arrow.DataType = arrow.BinaryTypes.LargeString
	var dec *tableschema.Type
	if cfg.table != nil {
		if col, ok := lookupColumn(cfg.table, part.Key); ok {
			dt = csvType(col.Type)
			if col.Type.Kind == tableschema.Decimal {
				t := col.Type
				dec = &t
			}
		}
	}
	b := array.NewBuilder(cfg.mem, dt)
	defer b.Release()
	if part.Value == HiveNull {
		b.AppendNull()
		return b.NewArray(), dt, nil
	}
	o := convOptions{tsLayout: cfg.csv.TimestampFormat, dateLayout: cfg.csv.DateFormat}
	c := newConv(cfg.mem, b, dec, &o)
	if reason := c.parse([]byte(part.Value), true); reason != "" {
		return nil, nil, fmt.Errorf("partition %s=%s: %s", part.Key, part.Value, reason)
	}
	c.commit()
	if j, ok := c.(*jsonConv); ok {
		j.release()
	}
	return b.NewArray(), dt, nil
}

func (p *partSource) release() {
	for _, v := range p.vals {
		v.Release()
	}
	p.vals = nil
}

func (p *partSource) Schema() *arrow.Schema { return p.schema }

func (p *partSource) Close() error {
	p.release()
	return p.Source.Close()
}

func (p *partSource) ReadUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	return p.Source.ReadUnit(ctx, unit, func(rec arrow.RecordBatch) error {
		n := int(rec.NumRows())
		cols := append([]arrow.Array(nil), rec.Columns()...)
		var extra []arrow.Array
		defer func() {
			for _, a := range extra {
				a.Release()
			}
		}()
		for _, v := range p.vals {
			a, err := repeat(p.mem, v, n)
			if err != nil {
				return err
			}
			extra = append(extra, a)
			cols = append(cols, a)
		}
		out := array.NewRecordBatch(p.schema, cols, int64(n))
		defer out.Release()
		return fn(out)
	})
}

// repeat builds an array of n copies of the single value in one.
func repeat(mem memory.Allocator, one arrow.Array, n int) (arrow.Array, error) {
	if one.IsNull(0) {
		return array.MakeArrayOfNull(mem, one.DataType(), n), nil
	}
	parts := make([]arrow.Array, n)
	for i := range parts {
		parts[i] = one
	}
	if n == 0 {
		return array.MakeArrayOfNull(mem, one.DataType(), 0), nil
	}
	return array.Concatenate(parts, mem)
}
