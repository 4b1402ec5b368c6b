package readers

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
)

// conv parses text fields of one column into a builder, in two steps so that a row is appended
// only when every field of it parses: parse checks a field and keeps its value pending, then
// commit appends it. Reasons never contain the field's text.
type conv interface {
	// parse checks field b; quoted says it was enclosed in quotes, which makes an empty text
	// field an empty string rather than a null.
	parse(b []byte, quoted bool) (reason string)
	commit()
	null()
}

type convOptions struct {
	nulls       [][]byte
	stringNulls bool
	tsLayout    string
	dateLayout  string
}

// isNull reports whether b is one of the null texts.
func (o *convOptions) isNull(b []byte) bool {
	for _, n := range o.nulls {
		if bytes.Equal(b, n) {
			return true
		}
	}
	return false
}

// isNullNonText reports whether b is null in a column that is not text: a null text, or empty
// whatever the null texts are (an empty field means nothing else in a number, boolean, date,
// timestamp or JSON column).
func (o *convOptions) isNullNonText(b []byte) bool { return len(b) == 0 || o.isNull(b) }

// unsafeString views b as a string for parsing; the string must not outlive b.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// csvType is the Arrow type a CSV column is parsed into for a table column: the canonical type.
func csvType(t tableschema.Type) arrow.DataType { return t.Arrow() }

// newConv returns the converter into builder b. dec is set for DECIMAL columns (text validated and
// normalised to the scale).
func newConv(mem memory.Allocator, b array.Builder, dec *tableschema.Type, o *convOptions) conv {
	base := convBase{o: o}
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		return &boolConv{convBase: base, b: bb}
	case *array.Int8Builder:
		return &intConv[int8]{convBase: base, app: bb.Append, nul: bb.AppendNull, bits: 8}
	case *array.Int16Builder:
		return &intConv[int16]{convBase: base, app: bb.Append, nul: bb.AppendNull, bits: 16}
	case *array.Int32Builder:
		return &intConv[int32]{convBase: base, app: bb.Append, nul: bb.AppendNull, bits: 32}
	case *array.Int64Builder:
		return &intConv[int64]{convBase: base, app: bb.Append, nul: bb.AppendNull, bits: 64}
	case *array.Float32Builder:
		return &floatConv[float32]{convBase: base, app: bb.Append, nul: bb.AppendNull, bits: 32}
	case *array.Float64Builder:
		return &floatConv[float64]{convBase: base, app: bb.Append, nul: bb.AppendNull, bits: 64}
	case *array.Date32Builder:
		return &dateConv{convBase: base, b: bb}
	case *array.TimestampBuilder:
		return &tsConv{convBase: base, b: bb}
	case *array.LargeStringBuilder:
		if dec != nil {
			return &decConv{convBase: base, b: bb.BinaryBuilder, prec: dec.Precision, scale: dec.Scale}
		}
		return &textConv{convBase: base, b: bb.BinaryBuilder, utf8: true}
	case *array.BinaryBuilder: // large_binary: the field's bytes as they are
		return &textConv{convBase: base, b: bb}
	}
	return &jsonConv{convBase: base, b: b, mem: mem}
}

type convBase struct {
	o      *convOptions
	isNull bool
}

type boolConv struct {
	convBase
	b *array.BooleanBuilder
	v bool
}

func (c *boolConv) null() { c.b.AppendNull() }
func (c *boolConv) parse(b []byte, _ bool) string {
	if c.isNull = c.o.isNullNonText(b); c.isNull {
		return ""
	}
	switch strings.ToLower(unsafeString(bytes.TrimSpace(b))) {
	case "true", "t", "yes", "y", "1":
		c.v = true
	case "false", "f", "no", "n", "0":
		c.v = false
	default:
		return "not a boolean (want true or false)"
	}
	return ""
}
func (c *boolConv) commit() {
	if c.isNull {
		c.b.AppendNull()
		return
	}
	c.b.Append(c.v)
}

type intConv[T int8 | int16 | int32 | int64] struct {
	convBase
	app  func(T)
	nul  func()
	bits int
	v    T
}

func (c *intConv[T]) null() { c.nul() }
func (c *intConv[T]) parse(b []byte, _ bool) string {
	if c.isNull = c.o.isNullNonText(b); c.isNull {
		return ""
	}
	v, err := strconv.ParseInt(unsafeString(bytes.TrimSpace(b)), 10, c.bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Sprintf("integer out of range for %d bits", c.bits)
		}
		return "not an integer"
	}
	c.v = T(v)
	return ""
}
func (c *intConv[T]) commit() {
	if c.isNull {
		c.nul()
		return
	}
	c.app(c.v)
}

type floatConv[T float32 | float64] struct {
	convBase
	app  func(T)
	nul  func()
	bits int
	v    T
}

func (c *floatConv[T]) null() { c.nul() }
func (c *floatConv[T]) parse(b []byte, _ bool) string {
	if c.isNull = c.o.isNullNonText(b); c.isNull {
		return ""
	}
	v, err := strconv.ParseFloat(unsafeString(bytes.TrimSpace(b)), c.bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Sprintf("number out of range for a %d-bit float", c.bits)
		}
		return "not a number"
	}
	c.v = T(v)
	return ""
}
func (c *floatConv[T]) commit() {
	if c.isNull {
		c.nul()
		return
	}
	c.app(c.v)
}

type textConv struct {
	convBase
	b    *array.BinaryBuilder
	v    []byte
	utf8 bool // a STRING column: its values must be UTF-8 (a BINARY column takes any bytes)
}

// errNotUTF8 is the reason of a STRING field whose bytes are not UTF-8.
const errNotUTF8 = "not valid UTF-8 text (a STRING column holds UTF-8; a BINARY column would keep the bytes as they are)"

func (c *textConv) null() { c.b.AppendNull() }
func (c *textConv) parse(b []byte, quoted bool) string {
	c.isNull = (!quoted || c.o.stringNulls) && c.o.isNull(b)
	c.v = b
	if c.utf8 && !c.isNull && !utf8.Valid(b) {
		return errNotUTF8
	}
	return ""
}
func (c *textConv) commit() {
	if c.isNull {
		c.b.AppendNull()
		return
	}
	c.b.Append(c.v)
}

type decConv struct {
	convBase
	b           *array.BinaryBuilder
	prec, scale int
	v           []byte
}

func (c *decConv) null() { c.b.AppendNull() }
func (c *decConv) parse(b []byte, _ bool) string {
	if c.isNull = c.o.isNullNonText(b); c.isNull {
		return ""
	}
	var err error
	if c.v, err = tableschema.AppendDecimal(c.v[:0], unsafeString(b), c.prec, c.scale, tableschema.DecimalLoose); err != nil {
		return err.Error()
	}
	return ""
}
func (c *decConv) commit() {
	if c.isNull {
		c.b.AppendNull()
		return
	}
	c.b.Append(c.v)
}

type dateConv struct {
	convBase
	b *array.Date32Builder
	v arrow.Date32
}

func (c *dateConv) null() { c.b.AppendNull() }
func (c *dateConv) parse(b []byte, _ bool) string {
	if c.isNull = c.o.isNullNonText(b); c.isNull {
		return ""
	}
	layout := c.o.dateLayout
	if layout == "" {
		layout = time.DateOnly
	}
	t, err := time.Parse(layout, unsafeString(bytes.TrimSpace(b)))
	if err != nil {
		return fmt.Sprintf("not a date (want the layout %s)", layout)
	}
	days := math.Floor(float64(t.Unix()) / 86400)
	if days > math.MaxInt32 || days < math.MinInt32 {
		return "date out of range"
	}
	c.v = arrow.Date32(int32(days))
	return ""
}
func (c *dateConv) commit() {
	if c.isNull {
		c.b.AppendNull()
		return
	}
	c.b.Append(c.v)
}

type tsConv struct {
	convBase
	b       *array.TimestampBuilder
	v       arrow.Timestamp
	scratch []byte
}

func (c *tsConv) null() { c.b.AppendNull() }
func (c *tsConv) parse(b []byte, _ bool) string {
	if c.isNull = c.o.isNullNonText(b); c.isNull {
		return ""
	}
	b = bytes.TrimSpace(b)
	if c.o.tsLayout == "" {
		if us, ok := fastTimestamp(b); ok {
			c.v = arrow.Timestamp(us)
			return ""
		}
	}
	var t time.Time
	var ok bool
	t, ok, c.scratch = parseTimestamp(b, c.o.tsLayout, c.scratch)
	if !ok {
		if c.o.tsLayout != "" {
			return fmt.Sprintf("not a timestamp (want the layout %s)", c.o.tsLayout)
		}
		return "not a timestamp (want RFC 3339, such as 2006-01-02T15:04:05.999999Z)"
	}
	us, ok := timeMicros(t)
	if !ok {
		return "timestamp out of range"
	}
	c.v = arrow.Timestamp(us)
	return ""
}
func (c *tsConv) commit() {
	if c.isNull {
		c.b.AppendNull()
		return
	}
	c.b.Append(c.v)
}

// timeMicros converts t to microseconds since the epoch (UTC), truncating toward the past.
func timeMicros(t time.Time) (int64, bool) {
	sec := t.Unix()
	if sec > math.MaxInt64/1_000_000-1 || sec < math.MinInt64/1_000_000+1 {
		return 0, false
	}
	return sec*1_000_000 + int64(t.Nanosecond()/1000), true
}

// fastTimestamp reads the common forms of timestamps without a layout in microseconds since the
// epoch (UTC): 2006-01-02T15:04:05, T or a space, with a fraction of 1 to 9 digits or none, and Z,
// ±hh:mm or no zone (UTC). It accepts only texts parseTimestamp reads, and gives the same value
// (timeMicros of its time), without time.Parse's cost; ok is false for anything else, which
// parseTimestamp then decides.
func fastTimestamp(b []byte) (us int64, ok bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != ' ') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	year, ok := digitsAt(b, 0, 4)
	month, ok2 := digitsAt(b, 5, 2)
	day, ok3 := digitsAt(b, 8, 2)
	hour, ok4 := digitsAt(b, 11, 2)
	minute, ok5 := digitsAt(b, 14, 2)
	sec, ok6 := digitsAt(b, 17, 2)
	if !ok || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	rest := b[19:]
	var nsec int64
	if len(rest) > 0 && rest[0] == '.' {
		n := 1
		for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
			nsec = nsec*10 + int64(rest[n]-'0')
			n++
		}
		if n == 1 || n > 10 {
			return 0, false
		}
		for i := n; i < 10; i++ {
			nsec *= 10
		}
		rest = rest[n:]
	}
	var offset int64
	switch {
	case len(rest) == 0, len(rest) == 1 && rest[0] == 'Z':
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		hh, ok := digitsAt(rest, 1, 2)
		mm, ok2 := digitsAt(rest, 4, 2)
		if !ok || !ok2 || hh > 23 || mm > 59 {
			return 0, false
		}
		offset = int64(hh*3600 + mm*60)
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	unix := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec) - offset
	return unix*1_000_000 + nsec/1000, true
}

// digitsAt parses the n decimal digits of b at i.
func digitsAt(b []byte, i, n int) (int, bool) {
	v := 0
	for _, c := range b[i : i+n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// daysIn is the number of days of month (1-12) in year, in the proleptic Gregorian calendar.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to a date of the proleptic Gregorian
// calendar (year >= 0), by Howard Hinnant's days_from_civil.
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	doy := (153*m+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// tsLayouts are the forms parseTimestamp reads without a layout. Each text fits at most one of
// them (a "Z" fits the three zone forms alike, with the same result), which tsLayoutOf tells from
// its shape.
var tsLayouts = []string{
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999Z07",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04",
	time.DateOnly,
}

// tsLayoutOf returns the index in tsLayouts of the layout s has the shape of, or -1. The zone is
// told from the end of s: beyond the 19 bytes of date and time, a sign can only start a zone.
func tsLayoutOf(s string) int {
	n := len(s)
	switch {
	case n == 10:
		return 5
	case n == 16:
		return 4
	case n < 19:
		return -1
	case s[n-1] == 'Z':
		return 0
	case n >= 25 && (s[n-6] == '+' || s[n-6] == '-') && s[n-3] == ':':
		return 0
	case n >= 24 && (s[n-5] == '+' || s[n-5] == '-'):
		return 1
	case n >= 22 && (s[n-3] == '+' || s[n-3] == '-'):
		return 2
	}
	return 3
}

// parseTimestamp parses RFC 3339 and its common variants (a space for the T, no zone meaning UTC,
// a zone without a colon, a bare date), or layout when given. A value without a zone is UTC. The
// layout its shape names is tried first, so a valid value is parsed once; the others follow (a
// failed time.Parse costs allocations, and bad values are rare).
func parseTimestamp(b []byte, layout string, scratch []byte) (time.Time, bool, []byte) {
	if layout != "" {
		t, err := time.Parse(layout, unsafeString(b))
		return t, err == nil, scratch
	}
	if len(b) > 10 && b[10] == ' ' {
		scratch = append(scratch[:0], b...)
		scratch[10] = 'T'
		b = scratch
	}
	s := unsafeString(b)
	guess := tsLayoutOf(s)
	if guess >= 0 {
		if t, err := time.Parse(tsLayouts[guess], s); err == nil {
			return t, true, scratch
		}
	}
	for i, l := range tsLayouts {
		if i == guess {
			continue
		}
		if t, err := time.Parse(l, s); err == nil {
			return t, true, scratch
		}
	}
	return time.Time{}, false, scratch
}

// layoutHasZone reports whether a Go time layout reads a zone: an offset (Z07, -07, with or without
// minutes) or a zone name (MST).
func layoutHasZone(layout string) bool {
	return strings.Contains(layout, "Z07") || strings.Contains(layout, "-07") || strings.Contains(layout, "MST")
}

// hasZone reports whether a timestamp text carries a zone (Z or an offset after the time).
func hasZone(s string) bool {
	if len(s) <= 10 {
		return false
	}
	rest := s[10:]
	return strings.ContainsAny(rest, "Zz+") || strings.LastIndexByte(rest, '-') > 0
}

// jsonConv parses ARRAY, MAP and STRUCT fields as JSON. A field is parsed twice: once on a
// scratch builder to check it, then into the column when its row commits (arrow-go's builders
// cannot take a value back).
type jsonConv struct {
	convBase
	b       array.Builder
	mem     memory.Allocator
	scratch array.Builder
	v       []byte
}

func (c *jsonConv) null() { c.b.AppendNull() }
func (c *jsonConv) parse(b []byte, _ bool) string {
	if c.isNull = c.o.isNullNonText(b); c.isNull {
		return ""
	}
	// Try the value on a scratch builder first, so a bad one never half-fills the real one.
	if c.scratch == nil {
		c.scratch = array.NewBuilder(c.mem, c.b.Type())
	}
	// The builders decode the text into their own buffers, so it may view the field.
	err := c.scratch.AppendValueFromString(unsafeString(b))
	c.scratch.NewArray().Release()
	if err != nil {
		return fmt.Sprintf("not JSON for %s", c.b.Type())
	}
	c.v = b
	return ""
}
func (c *jsonConv) commit() {
	if c.isNull {
		c.b.AppendNull()
		return
	}
	if err := c.b.AppendValueFromString(unsafeString(c.v)); err != nil {
		panic(fmt.Errorf("a JSON value that parsed once does not parse again: %w", err))
	}
}

func (c *jsonConv) release() {
	if c.scratch != nil {
		c.scratch.Release()
		c.scratch = nil
	}
}
