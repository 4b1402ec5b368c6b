package readers

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/klauspost/compress/zstd"

	"github.com/loaderproject/loader/tableschema"
)

// CSVOptions is a CSV dialect. The zero value is RFC 4180 with a header row: comma-delimited
// (tab-delimited for .tsv files), '"' quotes doubled inside quoted fields, LF or CRLF line ends,
// empty fields null in every column that is not text.
type CSVOptions struct {
	// Delimiter separates fields. 0 means ',' (or '\t' for .tsv). It must be one ASCII byte.
	Delimiter rune
	// Quote encloses fields. 0 means '"'. NoQuote turns quoting off.
	Quote   rune
	NoQuote bool
	// Escape, when set, makes the next byte literal inside quoted fields (such as '\\' for \").
	// 0 means none: a quote inside a quoted field is written twice.
	Escape rune
	// Comment, when set, skips lines starting with it. Default 0: none.
	Comment rune
	// NoHeader says the first line is data. Columns then names the columns; without Columns they
	// are named _c0, _c1, ... as Spark names them.
	NoHeader bool
	// Columns names the columns. With a header row, it replaces the header's names and must have as
	// many names.
	Columns []string
	// NullValues are the texts read as null. nil means [""] (an empty field). In STRING and
	// BINARY columns they apply to unquoted fields only, so an unquoted empty field is null and a
	// quoted one ("") is an empty string, as PostgreSQL and Spark read CSV; StringNulls applies
	// them to quoted fields too. In every other column an empty field is null whatever
	// NullValues holds: it means nothing else in a number, boolean, date, timestamp or JSON column.
	NullValues  []string
	StringNulls bool
	// TimestampFormat is a Go time layout for TIMESTAMP columns, such as "2006-01-02 15:04:05".
	// "" accepts RFC 3339 and its common variants: a space for the T, fractions to nanoseconds
	// (truncated to microseconds), a zone with or without colon, no zone (read as UTC), or a bare
	// date. A value with a zone bound for TIMESTAMP_NTZ is converted to UTC wall time.
	TimestampFormat string
	// DateFormat is a Go time layout for DATE columns. "" means 2006-01-02.
	DateFormat string
	// AllowRagged pads rows with too few fields with nulls. Rows with too many fields are always
	// bad rows: nothing is dropped silently.
	AllowRagged bool
	// LazyQuotes accepts a quote inside an unquoted field, and text after a closing quote, as
	// literal text.
	LazyQuotes bool
	// OnBadRow, when set, receives each row that cannot be parsed (wrong field count, a value that
	// does not parse into its column) and the row is skipped; an error it returns stops the read.
	// When nil, the first bad row fails the unit with a *RowError. Calls for one ReadUnit never
	// overlap and come in file order, from a goroutine ReadUnit waits on; calls for different units
	// (of one file too: an uncompressed file has several) may overlap.
	OnBadRow func(BadRow) error
	// MaxRecordBytes bounds one record (an unterminated quote must not swallow the file). 0
	// means 64 MiB.
	MaxRecordBytes int
	// InferRows is how many rows type inference samples when no table is given (and at most 4 MiB
	// of them). 0 means 1000. A row past the sample that does not parse as its column's inferred type
	// is a bad row like any other.
	InferRows int
}

// BadRow is a CSV row that could not be parsed.
type BadRow struct {
	File   string
	Line   int64    // the line the row starts on, 1-based
	Column string   // "" when the row as a whole is wrong (its field count)
	Reason string   // never contains the row's values
	Fields []string // the row's raw fields, for a dead-letter file; never put in errors or logs
}

// RowError is the error for a bad CSV row when no OnBadRow is set. It names the file, line and
// column, never the value.
type RowError struct {
	File   string
	Line   int64
	Column string
	Reason string
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("%s: line %d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s: line %d, column %q: %s", e.File, e.Line, e.Column, e.Reason)
}

func (e *RowError) Unwrap() error { return ErrBadRow }

func (e *RowError) filePath() string { return e.File }

func asciiByte(name string, r rune, def byte) (byte, error) {
	if r == 0 {
		return def, nil
	}
	if r < 0 || r > 127 {
		return 0, fmt.Errorf("CSV %s %q: %w", name, r, errNotASCII)
	}
	return byte(r), nil
}

// dialect is CSVOptions checked and resolved for one file.
type dialect struct {
	delim, quote, esc, cmnt byte
	conv                    convOptions
	o                       CSVOptions
}

// Check reports an invalid combination of options.
func (o CSVOptions) Check() error {
	_, err := o.resolve("x.csv")
	return err
}

func (o CSVOptions) resolve(path string) (*dialect, error) {
	d := &dialect{o: o}
	def := byte(',')
	n := strings.ToLower(path)
	for _, c := range []string{".gz", ".gzip", ".zst", ".zstd"} {
		n = strings.TrimSuffix(n, c)
	}
	if filepath.Ext(n) == ".tsv" {
		def = '\t'
	}
	var err error
	if d.delim, err = asciiByte("delimiter", o.Delimiter, def); err != nil {
		return nil, err
	}
	if d.quote, err = asciiByte("quote", o.Quote, '"'); err != nil {
		return nil, err
	}
	if d.esc, err = asciiByte("escape", o.Escape, 0); err != nil {
		return nil, err
	}
	if d.cmnt, err = asciiByte("comment", o.Comment, 0); err != nil {
		return nil, err
	}
	if d.delim == '\n' || d.delim == '\r' || (!o.NoQuote && d.delim == d.quote) || d.delim == d.esc || (d.cmnt != 0 && d.cmnt == d.delim) {
		return nil, fmt.Errorf("CSV options: the delimiter %q clashes with the quote, escape, comment or line end", d.delim)
	}
	if d.quote == '\n' || d.quote == '\r' {
		return nil, fmt.Errorf("CSV options: the quote cannot be a line end")
	}
	if o.MaxRecordBytes < 0 || o.InferRows < 0 {
		return nil, fmt.Errorf("CSV options: MaxRecordBytes and InferRows must not be negative")
	}
	nulls := o.NullValues
	if nulls == nil {
		nulls = []string{""}
	}
	for _, s := range nulls {
		d.conv.nulls = append(d.conv.nulls, []byte(s))
	}
	d.conv.stringNulls = o.StringNulls
	d.conv.tsLayout = o.TimestampFormat
	d.conv.dateLayout = o.DateFormat
	return d, nil
}

func (d *dialect) maxRecord() int {
	if d.o.MaxRecordBytes > 0 {
		return d.o.MaxRecordBytes
	}
	return 64 << 20
}

func (d *dialect) tokenizer(r io.Reader) *tokenizer {
	return &tokenizer{
		br: bufio.NewReaderSize(r, 256<<10), delim: d.delim, quote: d.quote, esc: d.esc, cmnt: d.cmnt,
		noQuote: d.o.NoQuote, lazy: d.o.LazyQuotes, max: d.maxRecord(), limit: -1,
	}
}

// csvText is a CSV file opened for reading.
type csvText struct {
	r io.Reader
	// close closes the file; its error is the first of its closers', and wraps ErrCorrupt when
	// the decompressor has met corrupt data.
	close func() error
	// splittable says the text is the file's own bytes, at offsets that can be read at: a regular
	// file, not compressed (see csvSplit).
	splittable bool
	bom        int64 // bytes of a UTF-8 byte-order mark skipped at the start
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// openText opens a CSV file, undoing gzip or zstd compression (told by magic bytes) and skipping a
// UTF-8 byte-order mark; whole, when not nil, is the file's bytes, already read.
// An object is read in order and not split into units: with one GET and read-ahead, or when
// sample (Open reads the first rows only) in small blocks, so the unread rest is never fetched.
func openText(ctx context.Context, f File, sample bool, whole []byte) (*csvText, error) {
	if whole != nil {
		return openSequential(bytes.NewReader(whole), func() error { return nil })
	}
	if f.Store != nil {
		obj, err := openObject(ctx, f, nil)
		if err != nil {
			return nil, err
		}
		if sample {
			return openSequential(io.NewSectionReader(obj.Blocks(256<<10, 1), 0, f.Size), func() error { return nil })
		}
		rd, err := obj.Stream(ctx, 0)
		if err != nil {
			return nil, err
		}
		return openSequential(rd, rd.Close)
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	if st.Mode().IsRegular() {
		head := make([]byte, 4)
		n, err := fh.ReadAt(head, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			fh.Close()
			return nil, err
		}
		if head = head[:n]; !bytes.HasPrefix(head, magicGzip) && !bytes.HasPrefix(head, magicZstd) {
			// Uncompressed: the tokenizer buffers the file itself.
			t := &csvText{r: fh, close: fh.Close, splittable: true}
			if bytes.HasPrefix(head, utf8BOM) {
				t.bom = int64(len(utf8BOM))
				if _, err := fh.Seek(t.bom, io.SeekStart); err != nil {
					fh.Close()
					return nil, err
				}
			}
			return t, nil
		}
	}
	return openSequential(fh, fh.Close)
}

// openSequential reads CSV text from src in order (compressed, a pipe, an object), undoing gzip
// or zstd compression and skipping a byte-order mark. closeSrc closes src.
func openSequential(src io.Reader, closeSrc func() error) (*csvText, error) {
	br := bufio.NewReaderSize(src, 64<<10)
	head, _ := br.Peek(8)
	var r io.Reader = br
	closers := []func() error{closeSrc}
	switch fm := sniffBytes(head, int64(len(head))); {
	case fm == FormatParquet || fm == FormatIPCFile:
		// named CSV, but Parquet or Arrow: its magic decides, as for a local file (see detectFormat)
		_ = closeSrc()
		return nil, &otherFormatError{fm}
	case bytes.HasPrefix(head, magicGzip):
		zr, err := gzip.NewReader(br)
		if err != nil {
			_ = closeSrc()
			return nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
		}
		r = zr
		closers = append([]func() error{func() error {
			if err := zr.Close(); err != nil {
				return fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
			}
			return nil
		}}, closers...)
	case bytes.HasPrefix(head, magicZstd):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(256<<20))
		if err != nil {
			_ = closeSrc()
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		r = zr.IOReadCloser()
		closers = append([]func() error{func() error { zr.Close(); return nil }}, closers...)
	}
	bom := bufio.NewReaderSize(r, 64<<10)
	if b, err := bom.Peek(3); err == nil && bytes.Equal(b, utf8BOM) {
		// Peek has buffered the three bytes, so Discard cannot fail.
		_, _ = bom.Discard(3)
	}
	closeAll := func() error {
		var first error
		for _, c := range closers {
			if err := c(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	return &csvText{r: bom, close: closeAll}, nil
}

// openTextAt opens an uncompressed CSV file at byte off.
func openTextAt(path string, off int64) (*csvText, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		fh.Close()
		return nil, err
	}
	return &csvText{r: fh, close: fh.Close, splittable: true}, nil
}

// csvSource reads a CSV file: a compressed file as one unit, an uncompressed one in units of byte
// ranges (see csvSplit).
type csvSource struct {
	f        File
	cfg      *config
	d        *dialect
	schema   *arrow.Schema
	names    []string
	decimals []*tableschema.Type // per column, for DECIMAL columns
	batch    int                 // rows per batch
	split    *csvSplit           // nil when the file is one unit
	// whole holds a small object's bytes, read whole by Open (one GET) and read again from memory
	// by its unit, instead of with a GET of its own: a load of many small objects would otherwise
	// wait a round trip per object for each.
	whole []byte
	// fieldBytes is the mean length of each column's fields in the last batch of any unit (the
	// sample's at first), to size a unit's first batch's text buffers; rowBytes the mean length of
	// a row's text in the sample.
	mu         sync.Mutex
	fieldBytes []float64
	rowBytes   float64
}

func openCSV(ctx context.Context, f File, cfg *config) (_ unitSource, err error) {
	d, err := cfg.csv.resolve(f.Path)
	if err != nil {
		return nil, err
	}
	s := &csvSource{f: f, cfg: cfg, d: d}
	if s.whole, err = readSmall(ctx, f, cfg); err != nil {
		return nil, err
	}
	text, err := openText(ctx, f, true, s.whole)
	if err != nil {
		return nil, err
	}
	defer func() {
		// The sample read stops early, so the decompressor may have met corruption the rows read so
		// far do not show: report it now rather than from ReadUnit.
		if cerr := text.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t := d.tokenizer(text.r)
	// header
	if !d.o.NoHeader {
		if _, err := t.next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: empty file, no header row", ErrCorrupt)
			}
			return nil, s.readErr(err)
		}
		s.names = t.strings()
		if len(d.o.Columns) > 0 {
			if len(d.o.Columns) != len(s.names) {
				return nil, fmt.Errorf("%d column names given for a header of %d columns", len(d.o.Columns), len(s.names))
			}
			s.names = append([]string(nil), d.o.Columns...)
		}
	} else {
		s.names = append([]string(nil), d.o.Columns...)
	}
	// sample rows: to infer types, to size batches and, without a header or names, to count columns
	sampleN := d.o.InferRows
	if sampleN == 0 {
		sampleN = 1000
	}
	var sample [][]string
	var sampleBytes int64
	for len(sample) < sampleN && sampleBytes < 4<<20 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := t.next(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, s.readErr(err)
		}
		row := t.strings()
		for _, v := range row {
			sampleBytes += int64(len(v)) + 1
		}
		sample = append(sample, row)
	}
	if s.names == nil {
		width := 0
		if len(sample) > 0 {
			width = len(sample[0])
		}
		for i := 0; i < width; i++ {
			s.names = append(s.names, "_c"+strconv.Itoa(i))
		}
	}
	seen := map[string]int{}
	for i, n := range s.names {
		if n == "" {
			n = "_c" + strconv.Itoa(i)
			s.names[i] = n
		}
		if j, dup := seen[n]; dup {
			return nil, fmt.Errorf("columns %d and %d are both named %q", j+1, i+1, n)
		}
		seen[n] = i
	}
	if len(s.names) == 0 {
		return nil, fmt.Errorf("%w: no columns", ErrCorrupt)
	}
	fields := make([]arrow.Field, len(s.names))
	s.decimals = make([]*tableschema.Type, len(s.names))
	for i, n := range s.names {
		fields[i] = arrow.Field{Name: n, Nullable: true}
		if cfg.table != nil {
			if col, ok := lookupColumn(cfg.table, n); ok {
				fields[i].Type = csvType(col.Type)
				if col.Type.Kind == tableschema.Decimal {
					tcopy := col.Type
					s.decimals[i] = &tcopy
				}
				continue
			}
			fields[i].Type = arrow.BinaryTypes.LargeString
			continue
		}
		fields[i].Type = inferType(sample, i, &d.conv)
	}
	s.schema = arrow.NewSchema(fields, nil)
	per := int64(8 * len(fields))
	if len(sample) > 0 {
		per += sampleBytes / int64(len(sample))
	}
	s.batch = int(max(1, min(cfg.batchBytes/max(per, 1), 1<<24)))
	s.rowBytes = float64(max(per-int64(8*len(fields)), 1))
	s.fieldBytes = make([]float64, len(fields))
	for _, row := range sample {
		for i := range min(len(row), len(fields)) {
			s.fieldBytes[i] += float64(len(row[i]))
		}
	}
	for i := range s.fieldBytes {
		s.fieldBytes[i] /= float64(max(1, len(sample)))
	}
	// An escape byte that is a line end would make the scan's byte view and the tokenizer's line
	// view of the text differ: such a file stays one unit, as compressed files and pipes do.
	if text.splittable && d.esc != '\n' {
		if starts := csvUnitStarts(f.Size, cfg.csvUnitBytes); len(starts) > 1 {
			s.split = newCSVSplit(f.Path, d, starts, text.bom, !d.o.NoHeader)
			// (a point every 256 KiB, or twice a unit when units are tiny, as in tests)
			s.split.every = min(csvProgressBytes, max(1, starts[1]/2))
		}
	}
	return s, nil
}

// lookupColumn finds a table column by exact name, else ignoring ASCII case.
func lookupColumn(t *tableschema.Schema, name string) (tableschema.Field, bool) {
	if i := t.FieldIndex(name); i >= 0 {
		return t.Fields[i], true
	}
	for _, f := range t.Fields {
		if strings.EqualFold(f.Name, name) {
			return f, true
		}
	}
	return tableschema.Field{}, false
}

func (s *csvSource) readErr(err error) error {
	var se *syntaxError
	if errors.As(err, &se) {
		return &RowError{File: s.f.Path, Line: se.line, Reason: se.reason}
	}
	return corrupt(err)
}

func (s *csvSource) File() File            { return s.f }
func (s *csvSource) Schema() *arrow.Schema { return s.schema }
func (s *csvSource) Close() error          { return nil }

func (s *csvSource) Units() []Unit {
	if s.split == nil {
		return []Unit{{Index: 0, Rows: -1, Bytes: s.f.Size}}
	}
	units := make([]Unit, len(s.split.starts))
	for k, start := range s.split.starts {
		end := s.f.Size
		if k+1 < len(s.split.starts) {
			end = s.split.starts[k+1]
		}
		units[k] = Unit{Index: k, Rows: -1, Bytes: end - start}
	}
	return units
}

func (s *csvSource) unitName() string { return "unit" }

func (s *csvSource) readUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) (err error) {
	n := 1
	if s.split != nil {
		n = len(s.split.starts)
	}
	if unit < 0 || unit >= n {
		return fmt.Errorf("no such unit (the file has %d)", n)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	rd := &csvUnit{s: s, bld: array.NewRecordBuilder(s.cfg.mem, s.schema), fieldBytes: slices.Clone(s.fieldBytes)}
	s.mu.Unlock()
	rd.convs = make([]conv, len(s.names))
	for i := range rd.convs {
		rd.convs[i] = newConv(s.cfg.mem, rd.bld.Field(i), s.decimals[i], &s.d.conv)
	}
	st := &stepper{}
	var text *csvText
	closed := make(chan error, 1)
	defer func() {
		st.finish(func() {
			rd.release()
			if text != nil {
				closed <- text.close()
			} else {
				closed <- nil
			}
		})
		select {
		case cerr := <-closed:
			if cerr != nil && err == nil {
				err = cerr
			}
		default:
			// A step was abandoned (err says why): the input is closed when it ends.
		}
	}()
	var start csvBound
	if unit > 0 {
		// An empty batch, so a caller watching for progress sees the scan for a far unit's start move.
		beat := func() error {
			rec := rd.bld.NewRecordBatch()
			defer rec.Release()
			return fn(rec)
		}
		if start, err = s.split.start(ctx, st, unit, beat); err != nil {
			return err
		}
	}
	err = st.run(ctx, func() error {
		var err error
		if unit == 0 {
			text, err = openText(ctx, s.f, false, s.whole)
		} else {
			text, err = openTextAt(s.f.Path, start.off)
		}
		return err
	})
	if err != nil {
		return err
	}
	rd.t = s.d.tokenizer(text.r)
	rd.t.off, rd.t.line = start.off, start.line
	if unit == 0 {
		rd.t.off = text.bom
	}
	rd.from, rd.end, rd.unit, rd.reached = rd.t.off, -1, unit, rd.t.off
	if text.splittable {
		rd.end = s.f.Size
		if s.split != nil && unit+1 < len(s.split.starts) {
			rd.end = s.split.starts[unit+1]
		}
	}
	if unit == 0 && !s.d.o.NoHeader {
		var eof bool
		err := st.run(ctx, func() error {
			if _, err := rd.t.next(); err != nil {
				if errors.Is(err, io.EOF) {
					eof = true
					return nil
				}
				return s.readErr(err)
			}
			return nil
		})
		if err != nil {
			return corrupt(err)
		}
		if eof {
			return s.ended(unit, rd.t)
		}
	}
	if s.split != nil {
		rd.t.limit = s.split.limit(unit)
	}
	for {
		var done bool
		err := st.run(ctx, func() error {
			var err error
			done, err = rd.fill()
			return err
		})
		if err != nil {
			if errors.Is(err, ErrBadRow) || !isDecodeErr(err) {
				return err // a bad row or OnBadRow's own error, as it is
			}
			return corrupt(err)
		}
		rec := rd.pending
		rd.pending = nil
		if rec != nil {
			err = fn(rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
		if done {
			return s.ended(unit, rd.t)
		}
	}
}

// ended records where the unit after unit, which t has read to its end, starts.
func (s *csvSource) ended(unit int, t *tokenizer) error {
	if s.split == nil || unit+1 >= len(s.split.starts) {
		return nil
	}
	line := t.line
	if t.partial {
		line-- // the last line had no line end
	}
	return s.split.found(unit+1, csvBound{off: t.off, line: line})
}

// isDecodeErr reports errors that come from decoding rather than from the caller's callbacks.
func isDecodeErr(err error) bool {
	var pe *panicError
	return errors.As(err, &pe) || errors.Is(err, ErrCorrupt) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// csvUnit is the state of one ReadUnit of a CSV file.
type csvUnit struct {
	s       *csvSource
	t       *tokenizer
	bld     *array.RecordBuilder
	convs   []conv
	pending arrow.RecordBatch
	// fieldBytes is the mean length of each column's fields so far (the sample's at first), by
	// which text buffers are sized for a batch.
	fieldBytes []float64
	// end is about where the unit's text ends (-1: not known, as in a compressed file); from, where
	// it started; rows, the rows parsed so far: the last batch is sized for the rows left.
	end, from int64
	rows      int64
	unit      int
	reached   int64 // where the unit's decoder last recorded a point it has reached (csvSplit.reach)
}

func (u *csvUnit) release() {
	for _, c := range u.convs {
		if j, ok := c.(*jsonConv); ok {
			j.release()
		}
	}
	if u.pending != nil {
		u.pending.Release()
		u.pending = nil
	}
	u.bld.Release()
}

// reserve sizes the empty builders for a batch: room for its rows exactly (Reserve would round
// up to a power of two), and for text at the mean field length seen so far, plus a margin, so that
// buffers are rarely grown (copied) while the batch fills.
func (u *csvUnit) reserve() {
	n := u.s.batch
	if u.end >= 0 {
		perRow := u.s.rowBytes
		if u.rows > 0 {
			perRow = float64(u.t.off-u.from) / float64(u.rows)
		}
		left := float64(max(u.end-u.t.off, 0)) / max(perRow, 1)
		n = min(n, int(left*1.25)+64)
	}
	for i, f := range u.bld.Fields() {
		if f.Cap() < n {
			f.Resize(n)
		}
		if b, ok := f.(interface{ ReserveData(int) }); ok {
			b.ReserveData(int(float64(n)*u.fieldBytes[i]*1.1) + 64)
		}
	}
}

// measure updates the mean field lengths from a batch of rows about to be taken from the builders.
func (u *csvUnit) measure(rows int) {
	u.rows += int64(rows)
	for i, f := range u.bld.Fields() {
		if b, ok := f.(interface{ DataLen() int }); ok {
			u.fieldBytes[i] = float64(b.DataLen()) / float64(rows)
		}
	}
	u.s.mu.Lock()
	copy(u.s.fieldBytes, u.fieldBytes)
	u.s.mu.Unlock()
}

// fill parses rows until a batch is full or the file ends, leaving the batch in pending. done is
// true at the end of the file.
func (u *csvUnit) fill() (done bool, err error) {
	s := u.s
	ncol := len(u.convs)
	rows := 0
	u.reserve()
	defer func() {
		if rows > 0 && err == nil {
			u.measure(rows)
			u.pending = u.bld.NewRecordBatch()
		}
	}()
	for rows < s.batch {
		line, err := u.t.next()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, s.readErr(err)
		}
		if sp := s.split; sp != nil && u.t.off-u.reached >= sp.every && (u.t.limit < 0 || u.t.off < u.t.limit) && !u.t.partial {
			// A record boundary before the unit's end: a scan for a later unit's start may go on
			// from here rather than read this unit's text too.
			u.reached = u.t.off
			sp.reach(u.unit, csvBound{off: u.t.off, line: u.t.line})
		}
		bad := func(col, reason string) error {
			if s.d.o.OnBadRow != nil {
				if err := s.d.o.OnBadRow(BadRow{File: s.f.Path, Line: line, Column: col, Reason: reason, Fields: u.t.strings()}); err != nil {
					return &callerError{err}
				}
				return nil
			}
			return &RowError{File: s.f.Path, Line: line, Column: col, Reason: reason}
		}
		nf := u.t.fields()
		if nf > ncol || (nf < ncol && !s.d.o.AllowRagged) {
			if err := bad("", fmt.Sprintf("%d fields, want %d", nf, ncol)); err != nil {
				return false, err
			}
			continue
		}
		ok := true
		for i := 0; i < nf; i++ {
			if reason := u.convs[i].parse(u.t.field(i), u.t.quoted[i]); reason != "" {
				if err := bad(s.names[i], reason); err != nil {
					return false, err
				}
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for i := 0; i < nf; i++ {
			u.convs[i].commit()
		}
		for i := nf; i < ncol; i++ {
			u.convs[i].null()
		}
		rows++
	}
	return false, nil
}

// inferType picks the narrowest type every sampled value of column i parses as, in this order:
// BIGINT, DOUBLE, BOOLEAN (true or false in any case, t or f), DATE (DateFormat, 2006-01-02 by
// default), TIMESTAMP when every value has a zone (timestamp[us, UTC]) or TIMESTAMP_NTZ
// (timestamp[us]) when not, each as the converters parse them, else STRING. Null texts and empty
// fields, null in all those types, are ignored; a column of nothing else is STRING.
func inferType(sample [][]string, i int, o *convOptions) arrow.DataType {
	var vals []string
	for _, row := range sample {
		if i < len(row) && !o.isNullNonText([]byte(row[i])) {
			vals = append(vals, strings.TrimSpace(row[i]))
		}
	}
	if len(vals) == 0 {
		return arrow.BinaryTypes.LargeString
	}
	all := func(ok func(string) bool) bool {
		for _, v := range vals {
			if !ok(v) {
				return false
			}
		}
		return true
	}
	switch {
	case all(func(v string) bool { _, err := strconv.ParseInt(v, 10, 64); return err == nil }):
		return arrow.PrimitiveTypes.Int64
	case all(func(v string) bool {
		_, err := strconv.ParseFloat(v, 64)
		return err == nil && strings.ContainsAny(v, "0123456789")
	}):
		return arrow.PrimitiveTypes.Float64
	case all(func(v string) bool {
		_, err := strconv.ParseBool(v)
		return err == nil && !strings.ContainsAny(v, "01")
	}):
		return arrow.FixedWidthTypes.Boolean
	case all(func(v string) bool {
		layout := o.dateLayout
		if layout == "" {
			layout = "2006-01-02"
		}
		_, err := time.Parse(layout, v)
		return err == nil
	}):
		return arrow.FixedWidthTypes.Date32
	case all(func(v string) bool { _, ok, _ := parseTimestamp([]byte(v), o.tsLayout, nil); return ok }):
		zoned := hasZone
		if o.tsLayout != "" {
			zoned = func(string) bool { return layoutHasZone(o.tsLayout) }
		}
		if all(zoned) {
			return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
		}
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	}
	return arrow.BinaryTypes.LargeString
}

// otherFormatError is a file named CSV whose first bytes are another format's magic: Open reads it
// in that format, as Discover does a local file.
type otherFormatError struct{ format Format }

func (e *otherFormatError) Error() string {
	return "not CSV: the file starts with " + e.format.String() + "'s magic bytes"
}
