package warehouse

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/loaderproject/loader/internal/delta"
	"github.com/loaderproject/loader/tableschema"
)

// StatsStringPrefix is how many characters of a string column's min and max go into the stats, as
// Delta's dataSkippingStringPrefixLength (32) does. A truncated max gets U+10FFFF appended so that it
// stays an upper bound.
const StatsStringPrefix = 32

// colStats accumulates the Delta statistics of one column (or struct field) over a data file.
type colStats struct {
	plan     *colPlan
	nulls    int64
	mm       minMax // nil when the type gets no min/max
	children []*colStats
}

// minMax accumulates the min and max of one leaf column's present, non-null values.
type minMax interface {
	update(arr arrow.Array, mask []bool)
	// values returns the JSON values for minValues and maxValues, ok false when there are none.
	values() (lo, hi any, ok bool)
}

func newFileStats(p *tablePlan) []*colStats {
	out := make([]*colStats, len(p.cols))
	for i, c := range p.cols {
		out[i] = newColStats(c)
	}
	return out
}

func newColStats(c *colPlan) *colStats {
	s := &colStats{plan: c}
	switch c.t.Kind {
	case tableschema.TinyInt, tableschema.SmallInt, tableschema.Int, tableschema.BigInt,
		tableschema.Date, tableschema.Timestamp, tableschema.TimestampNTZ:
		s.mm = &intMM{kind: c.t.Kind}
	case tableschema.Float, tableschema.Double:
		s.mm = &floatMM{bits: 64}
		if c.t.Kind == tableschema.Float {
			s.mm = &floatMM{bits: 32}
		}
	case tableschema.String:
		s.mm = &strMM{}
	case tableschema.Decimal:
		s.mm = &decMM{scale: c.t.Scale}
	case tableschema.Struct:
		for _, fc := range c.children {
			s.children = append(s.children, newColStats(fc))
		}
	}
	return s
}

// update adds a storage array's values; mask says which slots are present (nil: all).
func (s *colStats) update(arr arrow.Array, mask []bool) {
	if mask == nil {
		s.nulls += int64(arr.NullN())
	} else {
		nulls := arr.NullN() > 0
		for i, p := range mask {
			if !p || (nulls && arr.IsNull(i)) {
				s.nulls++
			}
		}
	}
	if s.children != nil {
		st := arr.(*array.Struct)
		cm := childMaskStruct(st, mask)
		for i, c := range s.children {
			c.update(st.Field(i), cm)
		}
		return
	}
	if s.mm != nil && arr.NullN() < arr.Len() {
		s.mm.update(arr, mask)
	}
}

// statsJSON renders the add action's stats string.
func statsJSON(rows int64, cols []*colStats) (string, error) {
	st := delta.Stats{NumRecords: rows, MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]any{}}
	for _, c := range cols {
		c.fill(st.MinValues, st.MaxValues, st.NullCount)
	}
	b, err := json.Marshal(st)
	return string(b), err
}

func (s *colStats) fill(minV, maxV, nulls map[string]any) {
	name := s.plan.name
	if s.children != nil {
		cmin, cmax, cnull := map[string]any{}, map[string]any{}, map[string]any{}
		for _, c := range s.children {
			c.fill(cmin, cmax, cnull)
		}
		if len(cmin) > 0 {
			minV[name] = cmin
		}
		if len(cmax) > 0 {
			maxV[name] = cmax
		}
		nulls[name] = cnull
		return
	}
	nulls[name] = s.nulls
	if s.mm == nil {
		return
	}
	if lo, hi, ok := s.mm.values(); ok {
		if lo != nil {
			minV[name] = lo
		}
		if hi != nil {
			maxV[name] = hi
		}
	}
}

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64
}

type intMM struct {
	kind     tableschema.Kind
	has      bool
	min, max int64
}

func minMaxInts[T integer](m *intMM, vals []T, arr arrow.Array, mask []bool) {
	lo, hi, has := m.min, m.max, m.has
	all := mask == nil && arr.NullN() == 0
	for i, v := range vals {
		if !all && (!present(mask, i) || arr.IsNull(i)) {
			continue
		}
		x := int64(v)
		if !has {
			lo, hi, has = x, x, true
		}
		lo, hi = min(lo, x), max(hi, x)
	}
	m.min, m.max, m.has = lo, hi, has
}

func (m *intMM) update(arr arrow.Array, mask []bool) {
	switch a := arr.(type) {
	case *array.Int8:
		minMaxInts(m, a.Int8Values(), arr, mask)
	case *array.Int16:
		minMaxInts(m, a.Int16Values(), arr, mask)
	case *array.Int32:
		minMaxInts(m, a.Int32Values(), arr, mask)
	case *array.Int64:
		minMaxInts(m, a.Int64Values(), arr, mask)
	case *array.Date32:
		minMaxInts(m, a.Date32Values(), arr, mask)
	case *array.Timestamp:
		minMaxInts(m, a.TimestampValues(), arr, mask)
	}
}

func (m *intMM) values() (any, any, bool) {
	if !m.has {
		return nil, nil, false
	}
	switch m.kind {
	case tableschema.Date:
		return formatDate(m.min), formatDate(m.max), true
	case tableschema.Timestamp:
		return formatMicros(m.min, true), formatMicros(m.max, true), true
	case tableschema.TimestampNTZ:
		return formatMicros(m.min, false), formatMicros(m.max, false), true
	}
	return m.min, m.max, true
}

func formatDate(days int64) string {
	return time.Unix(days*86400, 0).UTC().Format(time.DateOnly)
}

// formatMicros renders a timestamp as Delta stats do: ISO-8601 truncated to milliseconds, with Z for
// TIMESTAMP and without a zone for TIMESTAMP_NTZ.
func formatMicros(us int64, utc bool) string {
	t := time.UnixMicro(us).UTC().Truncate(time.Millisecond)
	if utc {
		return t.Format("2006-01-02T15:04:05.000Z")
	}
	return t.Format("2006-01-02T15:04:05.000")
}

// floatMM tracks float min and max. NaN and infinities cannot be written as JSON numbers, and
// leaving them out would make the bounds wrong, so a column holding one gets no min/max.
type floatMM struct {
	bits     int
	has, bad bool
	min, max float64
}

func (m *floatMM) add(x float64) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		m.bad = true
		return
	}
	if !m.has {
		m.min, m.max, m.has = x, x, true
		return
	}
	m.min, m.max = min(m.min, x), max(m.max, x)
}

func (m *floatMM) update(arr arrow.Array, mask []bool) {
	all := mask == nil && arr.NullN() == 0
	switch a := arr.(type) {
	case *array.Float32:
		for i, v := range a.Float32Values() {
			if all || (present(mask, i) && a.IsValid(i)) {
				m.add(float64(v))
			}
		}
	case *array.Float64:
		for i, v := range a.Float64Values() {
			if all || (present(mask, i) && a.IsValid(i)) {
				m.add(v)
			}
		}
	}
}

func (m *floatMM) values() (any, any, bool) {
	if !m.has || m.bad {
		return nil, nil, false
	}
	f := func(x float64) json.Number {
		if x == 0 {
			x = 0 // no "-0"
		}
		return json.Number(strconv.FormatFloat(x, 'g', -1, m.bits))
	}
	return f(m.min), f(m.max), true
}

// strMM tracks the byte-wise (UTF-8 code point order) min and max string.
type strMM struct {
	has      bool
	min, max string
}

func (m *strMM) update(arr arrow.Array, mask []bool) {
	a, ok := arr.(*array.LargeString)
	if !ok {
		return
	}
	all := mask == nil && a.NullN() == 0
	lo, hi := -1, -1
	var los, his string
	for i := 0; i < a.Len(); i++ {
		if !all && (!present(mask, i) || a.IsNull(i)) {
			continue
		}
		v := a.Value(i)
		if lo < 0 || v < los {
			lo, los = i, v
		}
		if hi < 0 || v > his {
			hi, his = i, v
		}
	}
	if lo < 0 {
		return
	}
	// The values point into the batch's memory: copy the winners only.
	if !m.has || los < m.min {
		m.min = strings.Clone(los)
	}
	if !m.has || his > m.max {
		m.max = strings.Clone(his)
	}
	m.has = true
}

func (m *strMM) values() (any, any, bool) {
	if !m.has {
		return nil, nil, false
	}
	var lo, hi any
	if utf8.ValidString(m.min) {
		lo, _ = truncateString(m.min, false)
	}
	if utf8.ValidString(m.max) {
		if h, ok := truncateString(m.max, true); ok {
			hi = h
		}
	}
	return lo, hi, lo != nil || hi != nil
}

// truncateString cuts s to StatsStringPrefix characters. For a max it appends U+10FFFF when it cuts,
// so that the result still bounds every string with that prefix; ok is false when no such bound
// exists (the cut falls before a U+10FFFF).
func truncateString(s string, isMax bool) (string, bool) {
	n := 0
	for i, r := range s {
		if n == StatsStringPrefix {
			if !isMax {
				return s[:i], true
			}
			if r == utf8.MaxRune {
				return "", false
			}
			return s[:i] + string(utf8.MaxRune), true
		}
		n++
	}
	return s, true
}

type decMM struct {
	scale    int
	has      bool
	min, max decimal128.Num
}

func (m *decMM) update(arr arrow.Array, mask []bool) {
	a, ok := arr.(*array.Decimal128)
	if !ok {
		return
	}
	all := mask == nil && a.NullN() == 0
	for i := 0; i < a.Len(); i++ {
		if !all && (!present(mask, i) || a.IsNull(i)) {
			continue
		}
		v := a.Value(i)
		if !m.has {
			m.min, m.max, m.has = v, v, true
			continue
		}
		if v.Less(m.min) {
			m.min = v
		}
		if m.max.Less(v) {
			m.max = v
		}
	}
}

func (m *decMM) values() (any, any, bool) {
	if !m.has {
		return nil, nil, false
	}
	return json.Number(appendDecimal(nil, m.min, m.scale)), json.Number(appendDecimal(nil, m.max, m.scale)), true
}
