package schemamatch

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

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

// String renders the problem as one line: column "c": expected E, actual A: reason.
func (p Problem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "column %q", p.Column)
	if p.Expected != "" {
		fmt.Fprintf(&b, ": expected %s", p.Expected)
	}
	if p.Actual != "" {
		if p.Expected != "" {
			b.WriteString(",")
		} else {
			b.WriteString(":")
		}
		fmt.Fprintf(&b, " actual %s", p.Actual)
	}
	b.WriteString(": ")
	b.WriteString(p.Reason)
	return b.String()
}

// MismatchError lists every problem of one source schema.
type MismatchError struct {
	Source   string // the file, set by the caller through WithSource
	Problems []Problem
}

// Error names the source and lists every problem, one per line after the first.
func (e *MismatchError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	b.WriteString(ErrMismatch.Error())
	if len(e.Problems) == 1 {
		b.WriteString(": ")
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, " (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// ValueError is a value that cannot be cast (a null bound for a NOT NULL column, decimal text that
// does not parse or fit, an out-of-range timestamp). It names the column and row, never the value.
type ValueError struct {
	Source string
	Column string
	Row    int64 // row index within the batch passed to Apply
	Reason string
}

// Error names the source, column and row, and why; never the value.
func (e *ValueError) Error() string {
	prefix := ""
	if e.Source != "" {
		prefix = e.Source + ": "
	}
	return fmt.Sprintf("%scolumn %q row %d: %s", prefix, e.Column, e.Row, e.Reason)
}

func (e *ValueError) Unwrap() error { return ErrValue }

// Step is one thing a Plan does to a column, for `loader plan` and logs.
type Step struct {
	Column string // table column
	Action string // "copy", "cast utf8 -> large_utf8", "fill nulls", "rename list element -> item", ...
}

// Mode selects how strictly source types must match the table.
type Mode int

const (
	// ModeByName matches columns by name and applies the safe casts of the package's rule table.
	// It is the default.
	ModeByName Mode = iota
	// ModeStrict matches columns by name but requires each source type to be the column's canonical
	// Arrow type already; only renames of nested children (which cost nothing) are allowed. Omitted
	// nullable columns are still filled with nulls.
	ModeStrict
)

// String returns "by-name" or "strict".
func (m Mode) String() string {
	if m == ModeStrict {
		return "strict"
	}
	return "by-name"
}

// ParseMode parses "by-name" or "strict" (the CLI's --schema-mode values).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "by-name", "":
		return ModeByName, nil
	case "strict":
		return ModeStrict, nil
	}
	return 0, fmt.Errorf("schema mode %q: want by-name or strict", s)
}

// Option configures NewPlan.
type Option func(*config)

type config struct {
	mem             memory.Allocator
	source          string
	caseInsensitive bool
	mode            Mode
	rescue          string
	binaryAsString  bool
	logger          *slog.Logger
	slowCasts       bool // tests: take the general path of every cast that has a fast one
}

func newConfig(opts []Option) config {
	c := config{mem: memory.DefaultAllocator, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithAllocator sets the allocator for cast output. Default memory.DefaultAllocator; nil keeps the
// default.
func WithAllocator(mem memory.Allocator) Option {
	return func(c *config) {
		if mem != nil {
			c.mem = mem
		}
	}
}

// WithSource names the file the schema came from, for error messages. Default "" (errors then name
// no file).
func WithSource(name string) Option { return func(c *config) { c.source = name } }

// WithCaseInsensitive matches source columns to table columns ignoring ASCII case. Default false.
// Two source columns that match the same table column are a problem either way.
func WithCaseInsensitive(on bool) Option { return func(c *config) { c.caseInsensitive = on } }

// WithMode sets the schema mode. Default ModeByName; an unknown mode is treated as ModeByName.
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithRescueColumn names a nullable STRING column of the table that receives, as a JSON object per
// row, the source columns the table lacks and the top-level values that cannot be cast (the target
// column then gets a null), as Databricks' _rescued_data does. The object also carries
// "_file_path" (the WithSource name) when anything was rescued; rows with nothing to rescue get a
// null. Default "" (off: such columns and values are problems). NewPlan reports a problem when the
// table lacks the column or it is not a nullable STRING. The source's own column of that name, if
// any, is treated as any other source column that the table lacks.
func WithRescueColumn(name string) Option { return func(c *config) { c.rescue = name } }

// WithBinaryAsString lets binary columns (binary, large_binary, binary_view, fixed_size_binary) load
// into STRING columns, as Spark's binaryAsString does for Parquet files written without the UTF8
// annotation (old Impala and Hive files). Every value is checked to be valid UTF-8 (a *ValueError
// otherwise, or a rescued value). Default false: binary into STRING is refused.
func WithBinaryAsString(on bool) Option { return func(c *config) { c.binaryAsString = on } }

// WithLogger sets the logger for plan decisions (at debug level). Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// Plan maps batches of one source schema to the table's canonical schema.
type Plan struct {
	cfg     config
	source  *arrow.Schema
	target  *tableschema.Schema
	schema  *arrow.Schema
	cols    []colPlan
	steps   []Step
	rescue  *rescuePlan
	anyCast bool
}

// NewPlan builds the plan for loading batches of source into target. It returns a *MismatchError
// listing every problem when anything cannot be loaded safely.
func NewPlan(source *arrow.Schema, target *tableschema.Schema, opts ...Option) (*Plan, error) {
	cfg := newConfig(opts)
	if source == nil || target == nil {
		return nil, fmt.Errorf("schemamatch: NewPlan needs a source schema and a table")
	}
	return build(cfg, source, target)
}

// Schema returns the output schema: target.Arrow().
func (p *Plan) Schema() *arrow.Schema { return p.schema }

// Source returns the source schema the plan was built for.
func (p *Plan) Source() *arrow.Schema { return p.source }

// Steps describes the plan column by column, in table order, followed by a step for each rescued
// source column.
func (p *Plan) Steps() []Step { return append([]Step(nil), p.steps...) }

// Identity reports whether Apply only re-labels batches: every column is shared as it is.
func (p *Plan) Identity() bool { return !p.anyCast }
