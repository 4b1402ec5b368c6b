// Package readers turns Parquet, CSV and Arrow IPC (file and stream) files into Arrow record batches.
//
// API CONTRACT (written before the implementation; the implementer fills in the bodies and may add
// to it, but must not change these signatures without updating every caller).
//
// Work is split into units so that several files and units decode at once and a load can resume at
// unit granularity: a Parquet row group, an IPC file's record batch, a whole CSV or IPC stream file.
// Reading a unit twice yields the same rows in the same order, so a resume can skip rows it already
// delivered. Memory is bounded by bytes: batches are sized to WithBatchBytes, never by a row count the
// file controls.
package readers

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

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
func (f Format) String() string { panic("readers: not implemented") }

// Errors callers test with errors.Is.
var (
	ErrNoFiles       = errors.New("no files match")
	ErrUnknownFormat = errors.New("unknown file format")
	// ErrCorrupt is the base of errors for files that cannot be decoded (including decoder panics,
	// which are recovered and reported as errors naming the file).
	ErrCorrupt = errors.New("corrupt file")
)

// File is one source file.
type File struct {
	Path    string
	Size    int64
	ModTime time.Time
	Format  Format
}

// DiscoverOption configures Discover.
type DiscoverOption func(*discoverConfig)

type discoverConfig struct{}

// Discover expands sources (files, directories walked recursively, and globs) into files in a
// deterministic order: sources in the order given, each expanded in lexical path order, duplicates
// removed. Hidden and metadata entries are skipped: names starting with "." or "_" (such as _SUCCESS
// and _delta_log) and *.crc files. The format comes from the extension (.parquet/.parq/.pq, .csv/.tsv,
// .arrow/.feather/.ipc, .arrows) and is checked against the magic bytes. A source that matches no file
// is an error wrapping ErrNoFiles.
func Discover(ctx context.Context, sources []string, opts ...DiscoverOption) ([]File, error) {
	panic("readers: not implemented")
}

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
	// Schema is the file's Arrow schema (for CSV, the types it is parsed into).
	Schema() *arrow.Schema
	Units() []Unit
	// ReadUnit calls fn with the unit's batches in order. fn must not keep a batch after it returns
	// unless it retains it. An error names the file and unit.
	ReadUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error
	Close() error
}

// Option configures Open.
type Option func(*config)

type config struct{}

// WithAllocator sets the allocator for decoded batches. Default memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { panic("readers: not implemented") }

// WithBatchBytes sets the target decoded size of one batch. Default 8 MiB; at least one row.
func WithBatchBytes(n int64) Option { panic("readers: not implemented") }

// WithTable gives the target table, so CSV columns are parsed straight into its canonical types
// (columns the table lacks are read as strings). Without it CSV columns are inferred.
func WithTable(t *tableschema.Schema) Option { panic("readers: not implemented") }

// Open opens a file for reading. It reads only the metadata it needs to list units.
func Open(ctx context.Context, f File, opts ...Option) (Source, error) {
	panic("readers: not implemented")
}
