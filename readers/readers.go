package readers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/tableschema"
)

// Format is a source file format.
type Format int

// The formats.
const (
	FormatUnknown Format = iota
	FormatParquet
	FormatCSV
	FormatIPCFile
	FormatIPCStream
)

// String returns "parquet", "csv", "arrow-file" or "arrow-stream".
func (f Format) String() string {
	switch f {
	case FormatParquet:
		return "parquet"
	case FormatCSV:
		return "csv"
	case FormatIPCFile:
		return "arrow-file"
	case FormatIPCStream:
		return "arrow-stream"
	}
	return "unknown"
}

// ParseFormat parses the names String returns (and "arrow" for arrow-file, "ipc" and "feather" too).
func ParseFormat(s string) (Format, error) {
	switch s {
	case "parquet":
		return FormatParquet, nil
	case "csv", "tsv":
		return FormatCSV, nil
	case "arrow-file", "arrow", "ipc", "feather":
		return FormatIPCFile, nil
	case "arrow-stream", "arrows":
		return FormatIPCStream, nil
	}
	return FormatUnknown, fmt.Errorf("%w: %q (want parquet, csv, arrow-file or arrow-stream)", ErrUnknownFormat, s)
}

// Errors callers test with errors.Is.
var (
	ErrNoFiles       = errors.New("no files match")
	ErrUnknownFormat = errors.New("unknown file format")
	// ErrCorrupt is the base of errors for files that cannot be decoded (including decoder panics,
	// which are recovered and reported as errors naming the file).
	ErrCorrupt = errors.New("corrupt file")
	// ErrEncrypted is returned for Parquet files with encrypted columns or footer: no key is
	// configured. It wraps ErrCorrupt, as the file cannot be decoded.
	ErrEncrypted = fmt.Errorf("%w: encrypted; no key", ErrCorrupt)
	// ErrBadRow is the base of errors for a CSV row that cannot be parsed into its column types. Its
	// *RowError names the file, line and column, never the value.
	ErrBadRow = errors.New("bad row")
)

// FileError is the error Open and a Source's ReadUnit return for a file: every error of theirs is,
// or wraps, a *FileError, so callers find the file (and unit) with errors.As rather than in the
// text. Err is the cause, still matchable with errors.Is (ErrCorrupt, ErrBadRow, a context error).
// Errors of the caller's own callbacks (ReadUnit's fn, CSVOptions.OnBadRow) are returned as they
// are, not wrapped.
type FileError struct {
	Path string
	// Unit is the unit being read, or -1 when the error is not about one (Open).
	Unit int
	Err  error

	unitName string // "row group", "batch group", ...: how the format names a unit; "" is "unit"
}

// Error renders the path, then the unit (as the format names it: "row group 3"), then the cause,
// naming the path once: a *RowError or *PageTooLargeError cause, which names the file itself, is
// rendered as it is, and an *fs.PathError for the same path by its operation and error.
func (e *FileError) Error() string {
	if fp, ok := e.Err.(interface{ filePath() string }); ok && fp.filePath() == e.Path {
		return e.Err.Error() // a *RowError or *PageTooLargeError, which names the file itself
	}
	cause := e.Err.Error()
	if pe, ok := e.Err.(*fs.PathError); ok && pe.Path == e.Path { //nolint:errorlint // only the direct cause repeats the path
		cause = pe.Op + ": " + pe.Err.Error() // not "f.csv: open f.csv: ..."
	}
	cause = strings.TrimPrefix(cause, e.Path+": ") // an object's errors begin with its URL
	if e.Unit < 0 {
		return e.Path + ": " + cause
	}
	name := e.unitName
	if name == "" {
		name = "unit"
	}
	return fmt.Sprintf("%s: %s %d: %s", e.Path, name, e.Unit, cause)
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// unitSource is what every format (and every wrapper of one) implements: Source's methods but
// ReadUnit, plus readUnit, which is ReadUnit without the *FileError (its errors name neither file
// nor unit, and fn's come back as *callerError), and unitName, how the format names a unit in errors.
// Open returns it as a Source in a source, which writes ReadUnit once for all of them.
type unitSource interface {
	File() File
	Schema() *arrow.Schema
	Units() []Unit
	Close() error
	readUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error
	unitName() string
}

// aheadPlanner is a unitSource that reads units ahead (see ReadAheader); wrappers pass it on.
type aheadPlanner interface {
	readAhead(units []int)
}

// planAhead passes units to src when it reads ahead.
func planAhead(src unitSource, units []int) {
	if p, ok := src.(aheadPlanner); ok {
		p.readAhead(units)
	}
}

var (
	_ unitSource = (*parquetSource)(nil)
	_ unitSource = (*ipcFileSource)(nil)
	_ unitSource = (*ipcStreamSource)(nil)
	_ unitSource = (*csvSource)(nil)
	_ unitSource = (*partSource)(nil)
	_ unitSource = (*plainSource)(nil)
	_ Source     = source{}
)

// source is the Source that Open returns: a unitSource whose ReadUnit marks fn's errors as the
// caller's and wraps every other error in a *FileError naming the file and unit (see unitError).
type source struct{ unitSource }

var _ ReadAheader = source{}

// ReadAhead tells the source which units the caller will read (see ReadAheader).
func (s source) ReadAhead(units []int) { planAhead(s.unitSource, units) }

func (s source) ReadUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	return unitError(s.File().Path, unit, s.unitName(), s.readUnit(ctx, unit, callerFn(fn)))
}

// fileError wraps err, an error of Open, in a *FileError (unless it already is one).
func fileError(path string, err error) error {
	return unitError(path, -1, "", err)
}

// callerError marks an error returned by the caller's callback (ReadUnit's fn or OnBadRow), which
// ReadUnit passes on as it is. It has no Unwrap so that the decoders' classifications (errors.Is
// ErrCorrupt, a context error) never take the caller's error for theirs.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// callerFn marks fn's errors as the caller's.
func callerFn(fn func(arrow.RecordBatch) error) func(arrow.RecordBatch) error {
	return func(rec arrow.RecordBatch) error {
		if err := fn(rec); err != nil {
			return &callerError{err}
		}
		return nil
	}
}

// unitError is what a ReadUnit returns for err: the caller's own error as it is, an error already
// naming the file as it is, anything else wrapped in a *FileError for unit (named name).
func unitError(path string, unit int, name string, err error) error {
	if err == nil {
		return nil
	}
	var ce *callerError
	if errors.As(err, &ce) {
		return ce.err
	}
	var fe *FileError
	if errors.As(err, &fe) {
		return err
	}
	return &FileError{Path: path, Unit: unit, unitName: name, Err: err}
}

// File is one source file.
type File struct {
	Path string
	// Rel is the file's path relative to the source root it was found under, with forward slashes
	// (the base name for a file named explicitly): an identity that does not depend on where the
	// sources are mounted, for assigning files to shards the same way on every machine.
	Rel     string
	Size    int64
	ModTime time.Time
	Format  Format
	// Partitions are the Hive-style key=value directory components between the source root and the
	// file, outermost first (for data/year=2024/month=01/f.parquet: year=2024, month=01). Values are
	// URL-unescaped; __HIVE_DEFAULT_PARTITION__ is kept as is and read as null.
	Partitions []Partition
	// ETag is the version an object had when it was listed (an S3 or Azure ETag, "g" and a GCS
	// generation); "" for local files. Reads of the object are conditional on it.
	ETag string
	// Store reads an object-store file, whose Path is its URL (scheme://bucket/key); nil for local
	// files. Discover sets it from WithObjectStore.
	Store *objstore.Store
}

// Partition is one Hive partition directory, key=value.
type Partition struct {
	Key, Value string
}

// HiveNull is the partition value Hive and Spark write for a null.
const HiveNull = "__HIVE_DEFAULT_PARTITION__"

// Unit is one independently readable part of a file.
type Unit struct {
	Index int
	Rows  int64 // -1 when unknown before reading (CSV, IPC stream)
	Bytes int64 // on-disk bytes, an estimate where the format does not say
}

// Source is an opened file. Its methods may be called from several goroutines at once, including
// concurrent ReadUnit calls for different units.
type Source interface {
	File() File
	// Schema is the file's Arrow schema (for CSV, the types it is parsed into), with run-end
	// encoded and view types replaced by their plain types at any depth, as the batches come.
	Schema() *arrow.Schema
	Units() []Unit
	// ReadUnit calls fn with the unit's batches in order; a batch may be empty (see the package
	// doc on CSV). fn must not keep a batch after it returns unless it retains it. An error names
	// the file and unit.
	ReadUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error
	Close() error
}

// Option configures Open.
type Option func(*config)

type config struct {
	mem           memory.Allocator
	batchBytes    int64
	table         *tableschema.Schema
	csv           CSVOptions
	logger        *slog.Logger
	parallel      int
	partitionCols bool
	maxAlloc      int64
	maxPage       int64
	verifyCRC     bool
	decodeHook    func(start bool) // tests: called as each column decode job starts and ends
	csvUnitBytes  int64            // tests: the nominal size of a CSV unit instead of csvUnitStarts' policy
	prefetch      PrefetchBudget   // counts the bytes of object reads held ahead of decoding; nil: none
	ahead         AheadLimits      // how far object units are fetched ahead; zero: not at all
	opened        *objstore.Reader // the object's Reader this Open made first (to tell its format, or read it whole), keeping what it read
}

const defaultBatchBytes = 8 << 20

// DefaultMaxPageBytes is WithMaxPageBytes's default: 1 GiB, far above what writers produce (Spark and
// arrow write pages of about 1 MiB), low enough that a page decodes within memory.
const DefaultMaxPageBytes = 1 << 30

func newConfig(opts []Option) config {
	c := config{
		mem:           memory.DefaultAllocator,
		batchBytes:    defaultBatchBytes,
		logger:        slog.New(slog.DiscardHandler),
		partitionCols: true,
		maxPage:       DefaultMaxPageBytes,
		verifyCRC:     true,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithAllocator sets the allocator for decoded batches. Default memory.DefaultAllocator; nil keeps
// the default.
func WithAllocator(mem memory.Allocator) Option {
	return func(c *config) {
		if mem != nil {
			c.mem = mem
		}
	}
}

// WithBatchBytes sets the target decoded size of one batch. Default 8 MiB; at least one row. Values
// below 1 are raised to 1 (every batch then holds one row).
func WithBatchBytes(n int64) Option {
	n = max(n, 1)
	return func(c *config) { c.batchBytes = n }
}

// WithTable gives the target table, so CSV columns are parsed straight into its canonical types
// (columns the table lacks are read as strings) and Hive partition values take their column's type.
// Without it CSV columns are inferred and partition values are strings.
func WithTable(t *tableschema.Schema) Option { return func(c *config) { c.table = t } }

// WithCSV sets the CSV dialect. Default: the zero CSVOptions (see its fields for what zero means).
// Open checks the options and returns an error for an invalid combination.
func WithCSV(o CSVOptions) Option { return func(c *config) { c.csv = o } }

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithParquetParallelism sets how many columns of one Parquet batch decode at once. Default 0:
// min(GOMAXPROCS, columns) for files with 4 or more top-level columns, else 1. Negative values mean
// the default.
func WithParquetParallelism(n int) Option { return func(c *config) { c.parallel = n } }

// WithPartitionColumns appends a file's Hive partition values (File.Partitions) to every batch as
// columns, after the file's own columns. A file column of the same name wins. Default true.
func WithPartitionColumns(on bool) Option { return func(c *config) { c.partitionCols = on } }

// WithVerifyChecksums checks the CRC of every Parquet page that carries one before its row group
// decodes; a mismatch fails the unit with ErrCorrupt naming the column and byte offset. It reads
// each row group's column chunks once more (usually from the page cache). Default true. (The page
// headers are walked either way, for WithMaxPageBytes.)
func WithVerifyChecksums(on bool) Option { return func(c *config) { c.verifyCRC = on } }

// WithMaxAllocation caps one buffer allocation made while decoding. A corrupt length that asks for
// more fails the unit with ErrCorrupt instead of exhausting memory. Default 0 (and any value below
// 1): the larger of 1 GiB, 64 times the file size and 8 times the batch bytes. A Parquet row group
// whose largest page (within WithMaxPageBytes) is over half the cap decodes with a cap of twice
// that page instead, as its values may need a buffer its size, rounded up to a power of two.
func WithMaxAllocation(n int64) Option { return func(c *config) { c.maxAlloc = n } }

// WithMaxPageBytes caps the uncompressed size of one Parquet page. Each page header of a row group
// is checked before the row group decodes, so a page over the cap fails the unit with a
// *PageTooLargeError (not ErrCorrupt: the file is valid, and reads with a larger cap given the
// memory) before anything is decompressed; a header claiming more than its column chunk's
// uncompressed size in the footer fails with ErrCorrupt. Default 1 GiB; values below 1 mean the
// default. Parquet page sizes are 32-bit, so a cap of 2 GiB or more checks nothing. (Like every
// Option, it may be applied to many opens at once: it does not write what it captured.)
func WithMaxPageBytes(n int64) Option {
	if n < 1 {
		n = DefaultMaxPageBytes
	}
	return func(c *config) { c.maxPage = n }
}

func (c *config) allocLimit(fileSize int64) int64 {
	if c.maxAlloc > 0 {
		return c.maxAlloc
	}
	return max(1<<30, 64*fileSize, 8*c.batchBytes)
}

func (c *config) parquetParallel(cols int) int {
	if c.parallel > 0 {
		return min(c.parallel, max(cols, 1))
	}
	if cols < 4 {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), cols)
}

// withDecodeHook is for tests that count the column decodes in flight.
func withDecodeHook(fn func(start bool)) Option { return func(c *config) { c.decodeHook = fn } }

// withCSVUnitBytes is for tests that cut CSV files into tiny units: n bytes a unit (nominally)
// instead of the policy's (see csvUnitStarts); n < 1 keeps the policy.
func withCSVUnitBytes(n int64) Option { return func(c *config) { c.csvUnitBytes = n } }

// Open opens a file for reading. It reads only the metadata it needs to list units. Like ReadUnit it
// returns as soon as ctx ends, even when the read is stuck (a stalled pipe or mount); the stuck open is
// abandoned and its source closed when it finishes.
func Open(ctx context.Context, f File, opts ...Option) (Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, fileError(f.Path, err)
	}
	var (
		st  stepper
		src Source
	)
	err := st.run(ctx, func() error {
		var err error
		src, err = open(ctx, f, opts)
		return err
	})
	if err != nil {
		st.finish(func() {
			if src != nil {
				src.Close()
			}
		})
		return nil, fileError(f.Path, err)
	}
	return src, nil
}

func open(ctx context.Context, f File, opts []Option) (Source, error) {
	src, err := openUnits(ctx, f, opts)
	if err != nil {
		return nil, err
	}
	return source{src}, nil
}

// openFormat opens f in its format's unitSource.
func openFormat(ctx context.Context, f File, cfg *config) (unitSource, error) {
	switch f.Format {
	case FormatParquet:
		return openParquet(ctx, f, cfg)
	case FormatIPCFile:
		return openIPCFile(ctx, f, cfg)
	case FormatIPCStream:
		return openIPCStream(ctx, f, cfg)
	case FormatCSV:
		return openCSV(ctx, f, cfg)
	}
	return nil, ErrUnknownFormat
}

// openUnits opens f in its format's unitSource, wrapped to decode encodings and views and to add
// partition columns where the file needs it.
func openUnits(ctx context.Context, f File, opts []Option) (unitSource, error) {
	RegisterParquetCodecs()
	cfg := newConfig(opts)
	if f.Store != nil {
		fm, r, err := openedFormat(ctx, f)
		if err != nil {
			return nil, err
		}
		f.Format, cfg.opened = fm, r
	}
	if f.Store == nil && (f.Format == FormatUnknown || f.Size == 0 && f.ModTime.IsZero()) {
		// A File built by hand: fill what Discover would have.
		st, err := os.Stat(f.Path)
		if err != nil {
			return nil, err
		}
		if f.Size == 0 {
			f.Size = st.Size()
		}
		if f.ModTime.IsZero() {
			f.ModTime = st.ModTime()
		}
		if f.Format == FormatUnknown {
			fm, err := detectFormat(f.Path, FormatUnknown)
			if err != nil {
				return nil, err
			}
			f.Format = fm
		}
	}
	src, err := openFormat(ctx, f, &cfg)
	if other := (*otherFormatError)(nil); errors.As(err, &other) {
		f.Format = other.format
		src, err = openFormat(ctx, f, &cfg)
	}
	if err != nil {
		return nil, err
	}
	if src, err = withPlain(src, &cfg); err != nil {
		return nil, err
	}
	return withPartitions(src, &cfg)
}
