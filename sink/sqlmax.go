package sink

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/loaderproject/loader/tableschema"
)

// committedMax returns max(col) over the table's committed rows as the SQL API renders it (text, or
// nil for no non-null value).
func (s *Server) committedMax(ctx context.Context, name tableschema.TableName, col string) (*string, error) {
	t, err := s.wh.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	schema, err := t.Schema(ctx)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, f := range schema.Fields {
		if equalFoldASCII(f.Name, col) {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("column %s is not in table %s", col, name)
	}
	isDecimal := schema.Fields[idx].Type.Kind == tableschema.Decimal
	var best *string
	var bestRat *big.Rat
	var bestNum float64
	var bestInt int64
	set := false
	keep := func(v string) { best = &v }
	err = t.Scan(ctx, func(rec arrow.RecordBatch) error {
		a := rec.Column(idx)
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				continue
			}
			switch a := a.(type) {
			case *array.Int8, *array.Int16, *array.Int32, *array.Int64, *array.Date32, *array.Timestamp:
				v := intValue(a, i)
				if !set || v > bestInt {
					bestInt, set = v, true
					keep(renderInt(a.DataType(), v))
				}
			case *array.Float32, *array.Float64:
				var v float64
				if f, ok := a.(*array.Float32); ok {
					v = float64(f.Value(i))
				} else {
					v = a.(*array.Float64).Value(i)
				}
				if !set || v > bestNum {
					bestNum, set = v, true
					keep(strconv.FormatFloat(v, 'g', -1, 64))
				}
			case *array.Boolean:
				if !set || a.Value(i) {
					set = true
					keep(strconv.FormatBool(a.Value(i)))
				}
			case *array.LargeString, *array.String:
				v := a.ValueStr(i)
				if isDecimal {
					r, ok := new(big.Rat).SetString(v)
					if !ok {
						return fmt.Errorf("column %s: %q is not a decimal", col, v)
					}
					if !set || r.Cmp(bestRat) > 0 {
						bestRat, set = r, true
						keep(v)
					}
				} else if !set || v > *best {
					set = true
					keep(v)
				}
			default:
				return fmt.Errorf("max over column %s of type %s is not supported", col, schema.Fields[idx].Type.SQL())
			}
		}
		return nil
	})
	return best, err
}

func intValue(a arrow.Array, i int) int64 {
	switch a := a.(type) {
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Date32:
		return int64(a.Value(i))
	case *array.Timestamp:
		return int64(a.Value(i))
	}
	return 0
}

func renderInt(dt arrow.DataType, v int64) string {
	switch dt.ID() {
	case arrow.DATE32:
		return time.Unix(v*86400, 0).UTC().Format("2006-01-02")
	case arrow.TIMESTAMP:
		return time.UnixMicro(v).UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	return strconv.FormatInt(v, 10)
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
