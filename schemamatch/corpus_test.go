package schemamatch_test

import (
	"context"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// TestCorpusLike loads every valid corpus file into a table derived from its own schema (what
// `loader table create --like` does): the plan must exist wherever FromArrow gives a table, every
// batch must cast, the output must pass the receiver's schema rule, and every canonical value
// must equal the source value (compared through arrow-go's JSON rendering, which names types but
// not their canonical form).
func TestCorpusLike(t *testing.T) {
	var files []readers.File
	for _, dir := range []string{"parquet-testing/data", "arrow-testing/data/arrow-ipc-stream/integration"} {
		fs, err := readers.Discover(context.Background(), []string{corpus.Dir(t, dir)}, readers.WithExclude("*.csv"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	planned := 0
	for _, f := range files {
		t.Run(filepath.Base(f.Path), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			src, err := readers.Open(context.Background(), f, readers.WithAllocator(mem))
			if err != nil {
				t.Skipf("unreadable (see readers' knownUnreadable): %v", err)
			}
			defer src.Close()
			table, err := tableschema.FromArrow(src.Schema())
			if err != nil {
				if !errors.Is(err, tableschema.ErrNoDeltaType) && !errors.Is(err, tableschema.ErrInvalid) {
					t.Fatalf("FromArrow = %v", err)
				}
				// A type with no Delta column: NewPlan against a table of text columns refuses it.
				t.Logf("no table: %v", err)
				var cols []tableschema.Field
				for _, sf := range src.Schema().Fields() {
					if !tableschema.ValidName(sf.Name) {
						return
					}
					cols = append(cols, tableschema.Field{Name: sf.Name, Type: tableschema.Primitive(tableschema.String), Nullable: true})
				}
				if _, perr := schemamatch.NewPlan(src.Schema(), &tableschema.Schema{Fields: cols}); !errors.Is(perr, schemamatch.ErrMismatch) {
					t.Errorf("NewPlan(schema with no Delta type, STRING table) = %v; want ErrMismatch", perr)
				}
				return
			}
			plan, err := schemamatch.NewPlan(src.Schema(), table, schemamatch.WithAllocator(mem), schemamatch.WithSource(f.Path))
			if err != nil {
				t.Fatalf("NewPlan(schema, FromArrow(schema)) = %v", err)
			}
			planned++
			if verr := zerobus.ValidateSchema(table, plan.Schema()); verr != nil {
				t.Fatalf("ValidateSchema(Plan.Schema()) = %v", verr)
			}
			for _, u := range src.Units() {
				err := src.ReadUnit(context.Background(), u.Index, func(rec arrow.RecordBatch) error {
					out, err := plan.Apply(rec)
					if err != nil {
						return err
					}
					defer out.Release()
					if err := array.ValidateRecordFull(out); err != nil {
						t.Errorf("output batch invalid: %v", err)
					}
					for i := range out.Columns() {
						checkSameValues(t, out.ColumnName(i), rec.Column(rec.Schema().FieldIndices(out.ColumnName(i))[0]), out.Column(i))
					}
					return nil
				})
				var ve *schemamatch.ValueError
				switch {
				case err == nil:
				case errors.Is(err, readers.ErrCorrupt):
					t.Skipf("unreadable (see readers' knownUnreadable): %v", err)
				case errors.As(err, &ve) && strings.HasPrefix(filepath.Base(f.Path), "generated_decimal."):
					// arrow's integration generator ignores decimal precision: 128.10 in a
					// decimal(3,2). Such a value cannot be stored; the ValueError is right.
					t.Logf("expected: %v", err)
					return
				default:
					t.Fatalf("unit %d: %v", u.Index, err)
				}
			}
			src.Close()
			if n := mem.CurrentAlloc(); n != 0 {
				t.Logf("%d bytes outstanding (arrow-go decoder leaks are checked in readers)", n)
			}
		})
	}
	if planned < 30 {
		t.Errorf("only %d corpus files planned", planned)
	}
}

// checkSameValues compares source and canonical values row by row through their string forms,
// normalising what the canonical mapping changes on purpose.
func checkSameValues(t *testing.T, name string, src, out arrow.Array) {
	t.Helper()
	if src.Len() != out.Len() {
		t.Errorf("column %s: %d rows, source %d", name, out.Len(), src.Len())
		return
	}
	if src.NullN() != out.NullN() {
		if _, isDict := src.(*array.Dictionary); !isDict {
			t.Errorf("column %s: %d nulls, source %d", name, out.NullN(), src.NullN())
		}
	}
	switch src.DataType().ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.INT8, arrow.INT16, arrow.INT32,
		arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL, arrow.DATE32:
		for i := 0; i < src.Len(); i++ {
			if src.IsNull(i) != out.IsNull(i) || (!src.IsNull(i) && src.ValueStr(i) != out.ValueStr(i)) {
				t.Errorf("column %s row %d: got %q (null=%t), source %q (null=%t)", name, i, out.ValueStr(i), out.IsNull(i), src.ValueStr(i), src.IsNull(i))
				return
			}
		}
	case arrow.DECIMAL128, arrow.DECIMAL256, arrow.DECIMAL32, arrow.DECIMAL64:
		for i := 0; i < src.Len(); i++ {
			if src.IsNull(i) != out.IsNull(i) {
				t.Errorf("column %s row %d: null mismatch", name, i)
				return
			}
			// Both are the same number (arrow's ValueStr drops trailing zeros).
			a, ok1 := new(big.Rat).SetString(src.ValueStr(i))
			b, ok2 := new(big.Rat).SetString(out.ValueStr(i))
			if !src.IsNull(i) && (!ok1 || !ok2 || a.Cmp(b) != 0) {
				t.Errorf("column %s row %d: got %q, source %q", name, i, out.ValueStr(i), src.ValueStr(i))
				return
			}
		}
	}
}

// TestCSVTypedByTable: a CSV read with WithTable plans against the same table with nothing but
// shares and the DECIMAL text check, and loads.
func TestCSVTypedByTable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table, err := tableschema.ParseColumns("id BIGINT NOT NULL, name STRING, price DECIMAL(8,3), at TIMESTAMP, day DATE, tags ARRAY<INT>, attrs MAP<STRING, DOUBLE>, p STRUCT<x: INT, y: STRING>, ok BOOLEAN, b BINARY")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.csv")
	os.WriteFile(path, []byte("id,name,price,at,day,tags,attrs,p,ok,b\n"+
		`1,a,1.5,2024-01-01T00:00:00Z,2024-01-01,"[1,2]","[{""key"":""k"",""value"":1.5}]","{""x"":1,""y"":""z""}",true,raw`+"\n"+
		"2,,,,,,,,,\n"), 0o644)
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithTable(table), readers.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	plan, err := schemamatch.NewPlan(src.Schema(), table, schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatalf("NewPlan(CSV typed by the table) = %v", err)
	}
	for _, s := range plan.Steps() {
		ok := s.Action == "copy" ||
			s.Column == "price" && strings.HasPrefix(s.Action, "cast large_utf8") ||
			s.Column == "id" && s.Action == "copy (check NOT NULL)"
		if !ok {
			t.Errorf("step %s: %s; want copy", s.Column, s.Action)
		}
	}
	err = src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
		out, err := plan.Apply(rec)
		if err != nil {
			return err
		}
		defer out.Release()
		if got := out.Column(2).ValueStr(0); got != "1.500" {
			t.Errorf("price = %s; want 1.500", got)
		}
		if verr := zerobus.ValidateSchema(table, out.Schema()); verr != nil {
			return verr
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
