package warehouse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// DefaultTargetFileSize is the size at which a Writer starts a new data file.
const DefaultTargetFileSize = 128 << 20

// maxRowGroupInput bounds the Arrow bytes buffered (encoded) in one Parquet row group.
const maxRowGroupInput = 64 << 20

// Writer stages rows as Parquet data files for one commit. It is not safe for concurrent use.
//
// Data files are written into the table directory as part-NNNNN-<uuid>-c000.snappy.parquet while
// rows arrive; they are invisible until Commit adds them to the log, and Abort deletes them. Every
// Writer must end with Commit or Abort, which also release its memory; Abort after Commit does
// nothing, so `defer w.Abort()` right after NewWriter is the idiom.
//
// Memory: a Writer holds the current Parquet row group encoded in memory (up to about 64 MiB of
// input, or the target file size if smaller) plus one dictionary and page buffer per column.
type Writer struct {
	t   *Table
	cfg writerConfig
	mem memory.Allocator
	id  string // shared by the writer's file names

	plan       *tablePlan
	lastSchema *arrow.Schema // the last batch schema that passed zerobus.ValidateSchema
	nullCols   map[int]arrow.Array

	cur    *dataFile
	staged []stagedFile
	rows   int64
	done   bool  // committed or aborted
	err    error // a failed file write: the writer can only be aborted
}

// WriterOption configures a Writer.
type WriterOption func(*writerConfig)

type writerConfig struct {
	targetFileSize int64
	schema         *tableschema.Schema
}

// WithTargetFileSize sets the size, in bytes of Parquet, at which the Writer closes a data file and
// starts the next. Default DefaultTargetFileSize (128 MiB); values below 1 are raised to 1, which
// closes a file after every Write. Files end at a row group boundary, so they may exceed the target
// by about one batch.
func WithTargetFileSize(n int64) WriterOption {
	return func(c *writerConfig) { c.targetFileSize = max(n, 1) }
}

// WithSchema makes the Writer take batches of schema instead of the table's current schema. Use it
// to replace a table's schema: commit with CommitOptions{Overwrite: true, Schema: schema}. Default:
// the table's schema, read at the first Write.
func WithSchema(schema *tableschema.Schema) WriterOption {
	return func(c *writerConfig) { c.schema = schema }
}

// NewWriter starts a write against the table. Nothing is visible until Commit. It does no I/O.
func (t *Table) NewWriter(opts ...WriterOption) *Writer {
	cfg := writerConfig{targetFileSize: DefaultTargetFileSize}
	for _, o := range opts {
		o(&cfg)
	}
	return &Writer{t: t, cfg: cfg, mem: t.wh.cfg.mem, id: uuid.NewString()}
}

// dataFile is the data file being written.
type dataFile struct {
	name    string // relative to the table directory
	f       *os.File
	cw      *countingWriter
	fw      *pqarrow.FileWriter
	rows    int64
	rgInput int64 // Arrow bytes written to the current row group
	stats   []*colStats
}

// stagedFile is a finished, fsync'd data file waiting for Commit.
type stagedFile struct {
	name    string
	size    int64
	modTime int64 // ms
	stats   string
}

// countingWriter buffers writes to the file and counts them. It has no Close method, so pqarrow
// leaves closing (and fsyncing) the file to the Writer.
type countingWriter struct {
	bw *bufio.Writer
	n  int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.bw.Write(p)
	c.n += int64(n)
	return n, err
}

var _ io.Writer = (*countingWriter)(nil)

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// Write adds rec's rows. rec's schema is the canonical schema or a valid subset of it; values are
// checked as Checker.Check does. The caller keeps ownership of rec.
//
// A batch that fails the schema or value checks is refused whole and leaves the Writer usable. An
// I/O error leaves it broken: later calls fail and the caller must Abort.
func (w *Writer) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if err := w.usable(ctx); err != nil {
		return err
	}
	if w.plan == nil {
		schema := w.cfg.schema
		if schema == nil {
			var err error
			if schema, err = w.t.Schema(ctx); err != nil {
				return fmt.Errorf("warehouse: table %s: write: %w", w.t.name, err)
			}
		} else if err := schema.Validate(); err != nil {
			return fmt.Errorf("warehouse: table %s: write: %w", w.t.name, err)
		}
		w.plan = newTablePlan(schema)
	}
	if rs := rec.Schema(); rs != w.lastSchema {
		if serr := zerobus.ValidateSchema(w.plan.schema, rs); serr != nil {
			return fmt.Errorf("warehouse: table %s: write: %w", w.t.name, serr)
		}
		w.lastSchema = rs
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	cols, err := w.plan.convert(w.mem, rec, true)
	if err != nil {
		return fmt.Errorf("warehouse: table %s: write: %w", w.t.name, err)
	}
	for i, c := range cols {
		if c == nil {
			cols[i] = w.nulls(i, n)
		}
	}
	srec := array.NewRecordBatch(w.plan.storage, cols, int64(n))
	releaseAll(cols)
	defer srec.Release()

	if err := w.writeStorage(srec, util.TotalRecordSize(rec)); err != nil {
		w.err = err
		return fmt.Errorf("warehouse: table %s: write: %w", w.t.name, err)
	}
	w.rows += int64(n)
	return nil
}

func (w *Writer) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("warehouse: table %s: write: %w", w.t.name, err)
	}
	if w.done {
		return fmt.Errorf("warehouse: table %s: writer already committed or aborted", w.t.name)
	}
	if w.err != nil {
		return fmt.Errorf("warehouse: table %s: writer failed earlier (abort it): %w", w.t.name, w.err)
	}
	return nil
}

// nulls returns an all-null storage array of column i with n rows (retained: the caller releases
// it), sliced from a cached one.
func (w *Writer) nulls(i, n int) arrow.Array {
	a := w.nullCols[i]
	if a == nil || a.Len() < n {
		if a != nil {
			a.Release()
		}
		a = array.MakeArrayOfNull(w.mem, w.plan.cols[i].storage, max(n, 1024))
		if w.nullCols == nil {
			w.nullCols = map[int]arrow.Array{}
		}
		w.nullCols[i] = a
	}
	return array.NewSlice(a, 0, int64(n))
}

func (w *Writer) writeStorage(rec arrow.RecordBatch, inputBytes int64) error {
	rgLimit := min(w.cfg.targetFileSize, maxRowGroupInput)
	if w.cur == nil {
		if err := w.openFile(); err != nil {
			return err
		}
	} else if w.cur.rgInput >= rgLimit {
		// Start the next row group only now that there are rows for it, so no file ends with an
		// empty row group.
		if err := w.cur.fw.NewBufferedRowGroupChecked(); err != nil {
			return fmt.Errorf("data file %s: %w", w.cur.name, err)
		}
		w.cur.rgInput = 0
	}
	f := w.cur
	for i, s := range f.stats {
		s.update(rec.Column(i), nil)
	}
	if err := f.fw.WriteBuffered(rec); err != nil {
		return fmt.Errorf("data file %s: %w", f.name, err)
	}
	f.rows += rec.NumRows()
	f.rgInput += inputBytes
	if f.cw.n+f.fw.RowGroupTotalCompressedBytes() >= w.cfg.targetFileSize {
		return w.finishFile()
	}
	return nil
}

func (w *Writer) openFile() error {
	name := fmt.Sprintf("part-%05d-%s-c000.snappy.parquet", len(w.staged), w.id)
	path := filepath.Join(w.t.dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("data file: %w", err)
	}
	cw := &countingWriter{bw: bufio.NewWriterSize(f, 1<<20)}
	props := parquet.NewWriterProperties(w.plan.parquetProps(w.mem)...)
	fw, err := pqarrow.NewFileWriter(w.plan.storage, cw, props,
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(w.mem)))
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("data file %s: %w", name, err)
	}
	w.cur = &dataFile{name: name, f: f, cw: cw, fw: fw, stats: newFileStats(w.plan)}
	return nil
}

// finishFile closes the current data file, fsyncs it and stages it.
func (w *Writer) finishFile() error {
	f := w.cur
	err := f.fw.Close()
	if err == nil {
		err = f.cw.bw.Flush()
	}
	if err == nil {
		err = f.f.Sync()
	}
	var modTime int64
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.f.Stat(); err == nil {
			modTime = fi.ModTime().UnixMilli()
		}
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("data file %s: %w", f.name, err)
	}
	stats, err := statsJSON(f.rows, f.stats)
	if err != nil {
		return fmt.Errorf("data file %s: stats: %w", f.name, err)
	}
	w.cur = nil
	w.staged = append(w.staged, stagedFile{name: f.name, size: f.cw.n, modTime: modTime, stats: stats})
	return nil
}

// Abort deletes the staged files. It is safe to call after Commit, when it does nothing, and more
// than once.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.discard()
}

// discard deletes every file the writer made and releases its memory.
func (w *Writer) discard() {
	if f := w.cur; f != nil {
		f.fw.Close()
		f.f.Close()
		os.Remove(filepath.Join(w.t.dir, f.name))
		w.cur = nil
	}
	for _, s := range w.staged {
		if err := os.Remove(filepath.Join(w.t.dir, s.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.t.wh.cfg.logger.Warn("warehouse: cannot delete staged data file", slog.String("table", w.t.name.String()), slog.String("file", s.name), slog.Any("err", err))
		}
	}
	w.staged = nil
	w.releaseNulls()
}

func (w *Writer) releaseNulls() {
	for _, a := range w.nullCols {
		a.Release()
	}
	w.nullCols = nil
}

// parquetProps returns the Parquet writer properties for the plan's data files: snappy, decimals as
// INT32/INT64 where they fit (as Spark writes them), and dictionary encoding only for leaf columns
// whose values often repeat. 64-bit integers, timestamps, floating point and wide decimals are
// usually close to unique; dictionary-encoding them costs a hash-table insert per value until the
// encoder gives up at the dictionary page limit, which measured about a quarter of write time
// (BenchmarkWriterCommit) for no gain in size.
func (p *tablePlan) parquetProps(mem memory.Allocator) []parquet.WriterProperty {
	props := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithStoreDecimalAsInteger(true),
		parquet.WithAllocator(mem),
		parquet.WithCreatedBy("loader-sink (arrow-go parquet)"),
	}
	var walk func(path string, c *colPlan)
	walk = func(path string, c *colPlan) {
		switch c.t.Kind {
		case tableschema.Struct:
			for _, fc := range c.children {
				walk(path+"."+fc.name, fc)
			}
		case tableschema.Array:
			walk(path+".list.element", c.children[0])
		case tableschema.Map:
			walk(path+".key_value.key", c.children[0])
			walk(path+".key_value.value", c.children[1])
		case tableschema.BigInt, tableschema.Timestamp, tableschema.TimestampNTZ, tableschema.Float, tableschema.Double:
			props = append(props, parquet.WithDictionaryFor(path, false))
		case tableschema.Decimal:
			if c.t.Precision > 9 {
				props = append(props, parquet.WithDictionaryFor(path, false))
			}
		}
	}
	for _, c := range p.cols {
		walk(c.name, c)
	}
	return props
}
