// Package schemamatch reconciles a source file's Arrow schema with a target table: it matches columns
// by name, reorders them to the table, applies the safe casts real files need to reach the table's
// canonical Arrow types, fills omitted nullable columns with nulls, and reports everything that does
// not fit in one error.
//
// API CONTRACT (written before the implementation; the implementer fills in the bodies and may add
// to it, but must not change these signatures without updating every caller).
//
// A Plan is built once per distinct source schema and applied to every batch; building does the
// matching and type checks, applying only casts. A Plan is safe for concurrent use.
package schemamatch

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
)

// Errors callers test with errors.Is.
var (
	// ErrMismatch is the base of a *MismatchError: the source schema cannot be loaded into the table.
	ErrMismatch = errors.New("schema does not match the table")
	// ErrValue is the base of a *ValueError: a batch holds a value the table cannot take.
	ErrValue = errors.New("value does not fit the table")
)

// Problem is one reason a source schema cannot be loaded.
type Problem struct {
	Column   string // source or table column, dotted for nested fields
	Expected string // the table's type, e.g. "BIGINT NOT NULL"; "" when the column is not in the table
	Actual   string // the source's Arrow type; "" when the source lacks the column
	Reason   string // e.g. "narrowing int64 to INT", "missing NOT NULL column", "not in table"
}

// MismatchError lists every problem of one source schema.
type MismatchError struct {
	Source   string // the file, set by the caller through WithSource
	Problems []Problem
}

func (e *MismatchError) Error() string { panic("schemamatch: not implemented") }
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// ValueError is a value that cannot be cast (a null bound for a NOT NULL column, decimal text that
// does not parse or fit, an out-of-range timestamp). It names the column and row, never the value.
type ValueError struct {
	Source string
	Column string
	Row    int64 // row index within the batch passed to Apply
	Reason string
}

func (e *ValueError) Error() string { panic("schemamatch: not implemented") }
func (e *ValueError) Unwrap() error { return ErrValue }

// Step is one thing a Plan does to a column, for `loader plan` and logs.
type Step struct {
	Column string // table column
	Action string // "copy", "cast utf8 -> large_utf8", "fill nulls", "rename list element -> item", ...
}

// Option configures NewPlan.
type Option func(*config)

type config struct{}

// WithAllocator sets the allocator for cast output. Default memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { panic("schemamatch: not implemented") }

// WithSource names the file the schema came from, for error messages.
func WithSource(name string) Option { panic("schemamatch: not implemented") }

// WithCaseInsensitive matches source columns to table columns ignoring ASCII case. Default false.
func WithCaseInsensitive(on bool) Option { panic("schemamatch: not implemented") }

// Plan maps batches of one source schema to the table's canonical schema.
type Plan struct{}

// NewPlan builds the plan for loading batches of source into target. It returns a *MismatchError
// listing every problem when anything cannot be loaded safely.
func NewPlan(source *arrow.Schema, target *tableschema.Schema, opts ...Option) (*Plan, error) {
	panic("schemamatch: not implemented")
}

// Schema returns the output schema: target.Arrow().
func (p *Plan) Schema() *arrow.Schema { panic("schemamatch: not implemented") }

// Steps describes the plan column by column, in table order.
func (p *Plan) Steps() []Step { panic("schemamatch: not implemented") }

// Apply returns rec cast to the output schema. The caller keeps ownership of rec and must release the
// result. Arrays that need no change are shared, not copied. Errors are *ValueError.
func (p *Plan) Apply(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	panic("schemamatch: not implemented")
}
