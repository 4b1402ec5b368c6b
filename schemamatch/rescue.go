package schemamatch

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// rescuePlan builds the rescue column.
type rescuePlan struct {
	col     int   // output column index
	unknown []int // source columns the table lacks
}

// marshalable returns a JSON-encodable form of value i of a.
func marshalable(a arrow.Array, i int) (v any) {
	defer func() {
		if recover() != nil {
			v = a.ValueStr(i)
		}
	}()
	v = a.GetOneForMarshal(i)
	if _, err := json.Marshal(v); err != nil {
		// NaN and infinities have no JSON number form
		return a.ValueStr(i)
	}
	return v
}

// FilePathKey is the key of the rescue object that names the source file.
const FilePathKey = "_file_path"

func (r *rescuePlan) build(c *applyCtx, rec arrow.RecordBatch) arrow.Array {
	n := int(rec.NumRows())
	b := array.NewLargeStringBuilder(c.mem)
	defer b.Release()
	b.Reserve(n)
	src := rec.Schema()
	var buf []byte
	for row := 0; row < n; row++ {
		buf = append(buf[:0], '{')
		count := 0
		add := func(name string, v any) {
			if count > 0 {
				buf = append(buf, ',')
			}
			count++
			k, _ := json.Marshal(name)
			buf = append(buf, k...)
			buf = append(buf, ':')
			val, err := json.Marshal(v)
			if err != nil {
				val, _ = json.Marshal(fmt.Sprint(v))
			}
			buf = append(buf, val...)
		}
		for _, si := range r.unknown {
			col := rec.Column(si)
			if col.IsNull(row) {
				continue
			}
			add(src.Field(si).Name, marshalable(col, row))
		}
		for _, kv := range c.rescued[row] {
			add(kv.name, kv.value)
		}
		if count == 0 {
			b.AppendNull()
			continue
		}
		if c.p.cfg.source != "" {
			add(FilePathKey, c.p.cfg.source)
		}
		buf = append(buf, '}')
		b.BinaryBuilder.Append(buf)
	}
	return b.NewArray()
}
