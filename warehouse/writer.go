package warehouse

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/tableschema"
)

// Scan calls fn with every committed row of the latest snapshot, in batches of the table's canonical
// Arrow schema. fn must not keep a batch after it returns unless it retains it.
func (t *Table) Scan(ctx context.Context, fn func(arrow.RecordBatch) error) error {
	panic("warehouse: not implemented")
}

// CheckBatch verifies that rec's values fit the table: no nulls in NOT NULL columns or nested NOT NULL
// fields, decimal text that parses and fits. rec's schema must already pass zerobus.ValidateSchema.
// Errors wrap ErrBadValue and name the column and row index, never the value.
func CheckBatch(schema *tableschema.Schema, rec arrow.RecordBatch) error {
	panic("warehouse: not implemented")
}

// Writer stages rows as Parquet data files for one commit. It is not safe for concurrent use.
type Writer struct{}

// WriterOption configures a Writer.
type WriterOption func(*writerConfig)

type writerConfig struct{}

// NewWriter starts a write against the table. Nothing is visible until Commit.
func (t *Table) NewWriter(opts ...WriterOption) *Writer { panic("warehouse: not implemented") }

// Write adds rec's rows. rec's schema is the canonical schema or a valid subset of it; values are
// checked as CheckBatch does. The caller keeps ownership of rec.
func (w *Writer) Write(ctx context.Context, rec arrow.RecordBatch) error {
	panic("warehouse: not implemented")
}

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { panic("warehouse: not implemented") }

// Txn names an idempotent write: Delta's SetTransaction action.
type Txn struct {
	AppID   string
	Version int64
}

// CommitOptions describe a commit.
type CommitOptions struct {
	// Txn, when set, is recorded in the commit; if the table already holds this app id at Version or
	// later, Commit deletes the staged files and returns ErrTxnCommitted.
	Txn *Txn
	// Overwrite removes every file of the current snapshot in the same commit (Flight SQL replace).
	Overwrite bool
	// Schema, with Overwrite, replaces the table's schema (a new metaData action).
	Schema *tableschema.Schema
	// Operation and OperationParameters go into commitInfo; Operation defaults to "WRITE".
	Operation           string
	OperationParameters map[string]string
}

// CommitResult reports a successful commit.
type CommitResult struct {
	Version int64
	Rows    int64
	Files   int
	Bytes   int64
}

// Commit finishes the data files and commits them as the next table version.
func (w *Writer) Commit(ctx context.Context, opts CommitOptions) (CommitResult, error) {
	panic("warehouse: not implemented")
}

// Abort deletes the staged files. It is safe to call after Commit, when it does nothing.
func (w *Writer) Abort() { panic("warehouse: not implemented") }
