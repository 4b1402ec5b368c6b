package demodata

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// csvWriter writes batches as CSV rows under a header of the schema's field names.
type csvWriter struct {
	f      *os.File
	buf    *bufio.Writer
	w      *csv.Writer
	header bool
	row    []string
}

func newCSVWriter(f *os.File) *csvWriter {
	buf := bufio.NewWriterSize(f, 1<<20)
	return &csvWriter{f: f, buf: buf, w: csv.NewWriter(buf)}
}

func (c *csvWriter) Write(rec arrow.RecordBatch) error {
	if !c.header {
		for _, f := range rec.Schema().Fields() {
			c.row = append(c.row, f.Name)
		}
		if err := c.w.Write(c.row); err != nil {
			return err
		}
		c.header = true
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		for j, col := range rec.Columns() {
			v, err := cellText(col, i)
			if err != nil {
				return fmt.Errorf("column %s: %w", rec.ColumnName(j), err)
			}
			c.row[j] = v
		}
		if err := c.w.Write(c.row); err != nil {
			return err
		}
	}
	return nil
}

func (c *csvWriter) Close() error {
	c.w.Flush()
	err := c.w.Error()
	if err == nil {
		err = c.buf.Flush()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cellText is value i of a as a CSV field: empty for a null, JSON for lists and structs.
func cellText(a arrow.Array, i int) (string, error) {
	if a.IsNull(i) {
		return "", nil
	}
	switch c := a.(type) {
	case *array.List, *array.Struct:
		b, err := appendJSON(nil, a, i)
		return string(b), err
	case *array.Binary:
		return string(c.Value(i)), nil
	}
	return scalarText(a, i)
}

// scalarText renders a non-null scalar value as the loader's CSV reader parses it back.
func scalarText(a arrow.Array, i int) (string, error) {
	switch c := a.(type) {
	case *array.Int64:
		return strconv.FormatInt(c.Value(i), 10), nil
	case *array.Int32:
		return strconv.FormatInt(int64(c.Value(i)), 10), nil
	case *array.Float64:
		return strconv.FormatFloat(c.Value(i), 'g', -1, 64), nil
	case *array.Float32:
		return strconv.FormatFloat(float64(c.Value(i)), 'g', -1, 32), nil
	case *array.Boolean:
		return strconv.FormatBool(c.Value(i)), nil
	case *array.String:
		return c.Value(i), nil
	case *array.Date32:
		return c.Value(i).FormattedString(), nil
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return c.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano), nil
	case *array.Decimal128:
		return c.Value(i).ToString(c.DataType().(*arrow.Decimal128Type).Scale), nil
	}
	return "", fmt.Errorf("no CSV text for %s", a.DataType())
}

// appendJSON appends value i of a as JSON: lists as arrays, structs as objects in field order.
func appendJSON(b []byte, a arrow.Array, i int) ([]byte, error) {
	if a.IsNull(i) {
		return append(b, "null"...), nil
	}
	switch c := a.(type) {
	case *array.List:
		from, to := c.ValueOffsets(i)
		b = append(b, '[')
		for k := from; k < to; k++ {
			if k > from {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, c.ListValues(), int(k)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case *array.Struct:
		st := c.DataType().(*arrow.StructType)
		b = append(b, '{')
		for k := 0; k < c.NumField(); k++ {
			if k > 0 {
				b = append(b, ',')
			}
			name, err := json.Marshal(st.Field(k).Name)
			if err != nil {
				return nil, err
			}
			b = append(append(b, name...), ':')
			if b, err = appendJSON(b, c.Field(k), i); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case *array.String:
		q, err := json.Marshal(c.Value(i))
		return append(b, q...), err
	case *array.Int32, *array.Int64, *array.Boolean:
		s, err := scalarText(a, i)
		return append(b, s...), err
	}
	return nil, fmt.Errorf("no JSON for %s", a.DataType())
}
