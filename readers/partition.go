package readers

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"

	"github.com/loaderproject/loader/tableschema"
)

// partSource appends a file's Hive partition values as constant columns.
type partSource struct {
	unitSource
	schema *arrow.Schema
	vals   []scalar.Scalar // each partition value
	mem    memory.Allocator
}

func (s *partSource) readAhead(units []int) { planAhead(s.unitSource, units) }

// withPartitions wraps src when its file has partition values that are not already columns.
func withPartitions(src unitSource, cfg *config) (unitSource, error) {
	f := src.File()
	if !cfg.partitionCols || len(f.Partitions) == 0 {
		return src, nil
	}
	base := src.Schema()
	fields := append([]arrow.Field(nil), base.Fields()...)
	p := &partSource{unitSource: src, mem: cfg.mem}
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
		v, err := partitionValue(cfg, part)
		if err != nil {
			p.release()
			src.Close()
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: part.Key, Type: v.DataType(), Nullable: true})
		p.vals = append(p.vals, v)
	}
	if len(p.vals) == 0 {
		return src, nil
	}
	meta := base.Metadata()
	p.schema = arrow.NewSchema(fields, &meta)
	return p, nil
}

// partitionValue parses a partition value into a scalar of its table column's type (text without a
// table).
func partitionValue(cfg *config, part Partition) (scalar.Scalar, error) {
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
	if part.Value == HiveNull {
		return scalar.MakeNullScalar(dt), nil
	}
	b := array.NewBuilder(cfg.mem, dt)
	defer b.Release()
	o := convOptions{tsLayout: cfg.csv.TimestampFormat, dateLayout: cfg.csv.DateFormat}
	c := newConv(cfg.mem, b, dec, &o)
	if j, ok := c.(*jsonConv); ok {
		defer j.release()
	}
	if reason := c.parse([]byte(part.Value), true); reason != "" {
		return nil, fmt.Errorf("partition %s=%s: %s", part.Key, part.Value, reason)
	}
	c.commit()
	one := b.NewArray()
	defer one.Release()
	return scalar.GetScalar(one, 0)
}

func (p *partSource) release() {
	for _, v := range p.vals {
		if r, ok := v.(scalar.Releasable); ok {
			r.Release()
		}
	}
	p.vals = nil
}

func (p *partSource) Schema() *arrow.Schema { return p.schema }

func (p *partSource) Close() error {
	p.release()
	return p.unitSource.Close()
}

func (p *partSource) readUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	return p.unitSource.readUnit(ctx, unit, func(rec arrow.RecordBatch) error {
		n := int(rec.NumRows())
		cols := append([]arrow.Array(nil), rec.Columns()...)
		var extra []arrow.Array
		defer func() {
			for _, a := range extra {
				a.Release()
			}
		}()
		for _, v := range p.vals {
			a, err := scalar.MakeArrayFromScalar(v, n, p.mem)
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
