package warehouse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/loaderproject/loader/internal/delta"
	"github.com/loaderproject/loader/internal/fsutil"
	"github.com/loaderproject/loader/tableschema"
)

// Errors callers test with errors.Is.
var (
	ErrTableExists   = errors.New("table already exists")
	ErrTableNotFound = errors.New("table not found")
	// ErrTxnCommitted means a commit carried a Txn whose version the table already holds for that
	// app id: the rows were committed before, and this commit was dropped (its files deleted).
	ErrTxnCommitted = errors.New("transaction version already committed")
	// ErrBadValue is the base of errors for values a column cannot hold (a null in a NOT NULL
	// column, decimal text that does not parse or fit).
	ErrBadValue = errors.New("value does not fit the column")
	// ErrCommitConflict means a commit lost the race for the next version more times than
	// WithCommitAttempts allows; nothing was committed and the staged files were kept for a retry.
	ErrCommitConflict = errors.New("commit conflict")
	// ErrCheckpointUnsupported means a table's log holds a checkpoint, which this package cannot read.
	ErrCheckpointUnsupported = delta.ErrCheckpointUnsupported
	// ErrCorruptLog is the base of errors for a commit file that is not valid Delta JSON; the error
	// names the file and line.
	ErrCorruptLog = delta.ErrCorrupt
)

// EngineInfo is the commitInfo.engineInfo of every commit this package writes.
const EngineInfo = "loader-sink"

// Warehouse is a directory of Delta tables. It is safe for concurrent use.
type Warehouse struct {
	dir string
	cfg config

	mu     sync.Mutex
	tables map[tableschema.TableName]*Table
}

// Option configures a Warehouse.
type Option func(*config)

type config struct {
	logger         *slog.Logger
	mem            memory.Allocator
	commitAttempts int
	// beforeLink, when set (by white-box tests), runs in Commit just before the next version is
	// created, so a test can commit from elsewhere and force a conflict.
	beforeLink func(version int64)
}

func newConfig(opts []Option) config {
	c := config{
		logger:         slog.New(slog.DiscardHandler),
		mem:            memory.DefaultAllocator,
		commitAttempts: 1000,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithLogger sets the logger. Default: discard. A nil logger keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithAllocator sets the allocator for Arrow data that Writers and Scan build. Default:
// memory.DefaultAllocator. A nil allocator keeps the default.
func WithAllocator(mem memory.Allocator) Option {
	return func(c *config) {
		if mem != nil {
			c.mem = mem
		}
	}
}

// WithCommitAttempts sets how many times a commit tries to create the next version before it gives
// up with ErrCommitConflict. Only writers in other processes (or other Warehouse values on the same
// directory) cause such conflicts. Default 1000; values below 1 are raised to 1.
func WithCommitAttempts(n int) Option {
	return func(c *config) { c.commitAttempts = max(n, 1) }
}

// Open returns the warehouse rooted at dir, creating the directory if it is missing.
func Open(dir string, opts ...Option) (*Warehouse, error) {
	if dir == "" {
		return nil, errors.New("warehouse: open: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("warehouse: open %s: %w", dir, err)
	}
	if err := fsutil.MkdirAllSync(abs); err != nil {
		return nil, fmt.Errorf("warehouse: open %s: %w", dir, err)
	}
	return &Warehouse{dir: abs, cfg: newConfig(opts), tables: map[tableschema.TableName]*Table{}}, nil
}

// Dir returns the warehouse's root directory (an absolute path).
func (w *Warehouse) Dir() string { return w.dir }

func checkName(name tableschema.TableName) error {
	if !tableschema.ValidName(name.Catalog) || !tableschema.ValidName(name.Schema) || !tableschema.ValidName(name.Table) {
		return fmt.Errorf("%w: table name %q: want three non-empty parts of ASCII letters, digits and underscores", tableschema.ErrInvalid, name.String())
	}
	return nil
}

func (w *Warehouse) tableDir(name tableschema.TableName) string {
	return filepath.Join(w.dir, name.Catalog, name.Schema, name.Table)
}

// CreateTable creates a Delta table whose version 0 holds protocol and metaData (and commitInfo). It
// returns ErrTableExists if the table has a _delta_log already.
//
// Precisely, the table exists once its version 0 commit file exists; a _delta_log left without one
// by a crash during CreateTable does not count. Concurrent CreateTable calls for one name, in this
// process or others, create it once: the others get ErrTableExists.
func (w *Warehouse) CreateTable(ctx context.Context, name tableschema.TableName, schema *tableschema.Schema) (*Table, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("warehouse: create table %s: %w", name, err)
	}
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("warehouse: create table: %w", err)
	}
	if schema == nil {
		return nil, fmt.Errorf("warehouse: create table %s: %w: no schema", name, tableschema.ErrInvalid)
	}
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("warehouse: create table %s: %w", name, err)
	}
	dir := w.tableDir(name)
	logDir := filepath.Join(dir, delta.LogDirName)
	if err := fsutil.MkdirAllSync(logDir); err != nil {
		return nil, fmt.Errorf("warehouse: create table %s: %w", name, err)
	}
	now := time.Now().UnixMilli()
	proto := delta.ProtocolFor(schema.UsesTimestampNTZ())
	actions := []delta.Action{
		{CommitInfo: &delta.CommitInfo{
			Timestamp: now,
			Operation: "CREATE TABLE",
			OperationParameters: map[string]any{
				"isManaged": "false", "description": nil, "partitionBy": "[]", "properties": "{}",
			},
			IsolationLevel: "Serializable",
			IsBlindAppend:  true,
			EngineInfo:     EngineInfo,
			TxnID:          uuid.NewString(),
		}},
		{Protocol: &proto},
		{MetaData: delta.NewMetaData(uuid.NewString(), schema.DeltaJSON(), now)},
	}
	data, err := delta.EncodeCommit(actions)
	if err != nil {
		return nil, fmt.Errorf("warehouse: create table %s: %w", name, err)
	}
	if err := delta.WriteVersion(logDir, 0, data); err != nil {
		if errors.Is(err, delta.ErrVersionExists) {
			return nil, fmt.Errorf("warehouse: create table %s: %w", name, ErrTableExists)
		}
		return nil, fmt.Errorf("warehouse: create table %s: %w", name, err)
	}
	w.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "created table", slog.String("table", name.String()), slog.String("dir", dir))
	return w.table(name), nil
}

// table returns the cached Table for name, creating it. The caller has checked that the table exists.
func (w *Warehouse) table(name tableschema.TableName) *Table {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.tables[name]; ok {
		return t
	}
	dir := w.tableDir(name)
	t := &Table{
		wh:     w,
		name:   name,
		dir:    dir,
		logDir: filepath.Join(dir, delta.LogDirName),
		state:  delta.NewState(),
	}
	w.tables[name] = t
	return t
}

// Table opens an existing table, or returns an error wrapping ErrTableNotFound. Tables are cached:
// every call for one name returns the same *Table.
func (w *Warehouse) Table(ctx context.Context, name tableschema.TableName) (*Table, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("warehouse: table %s: %w", name, err)
	}
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("warehouse: table: %w", err)
	}
	w.mu.Lock()
	t, ok := w.tables[name]
	w.mu.Unlock()
	if ok {
		return t, nil
	}
	if ok, err := tableExists(w.tableDir(name)); err != nil {
		return nil, fmt.Errorf("warehouse: table %s: %w", name, err)
	} else if !ok {
		return nil, fmt.Errorf("warehouse: table %s: %w", name, ErrTableNotFound)
	}
	return w.table(name), nil
}

func tableExists(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, delta.LogDirName, delta.VersionFileName(0)))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// List returns the names of every table in the warehouse, sorted by catalog, schema and table.
// Directories whose names are not valid name parts, or that hold no Delta table, are skipped.
func (w *Warehouse) List(ctx context.Context) ([]tableschema.TableName, error) {
	var out []tableschema.TableName
	catalogs, err := subdirs(w.dir)
	if err != nil {
		return nil, fmt.Errorf("warehouse: list: %w", err)
	}
	for _, c := range catalogs {
		schemas, err := subdirs(filepath.Join(w.dir, c))
		if err != nil {
			return nil, fmt.Errorf("warehouse: list: %w", err)
		}
		for _, s := range schemas {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("warehouse: list: %w", err)
			}
			tables, err := subdirs(filepath.Join(w.dir, c, s))
			if err != nil {
				return nil, fmt.Errorf("warehouse: list: %w", err)
			}
			for _, t := range tables {
				name := tableschema.TableName{Catalog: c, Schema: s, Table: t}
				ok, err := tableExists(w.tableDir(name))
				if err != nil {
					return nil, fmt.Errorf("warehouse: list: %w", err)
				}
				if ok {
					out = append(out, name)
				}
			}
		}
	}
	return out, nil // in order: subdirs lists each level sorted
}

// subdirs lists the directories in dir whose names are valid name parts, sorted by name (as
// os.ReadDir returns them).
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && tableschema.ValidName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
