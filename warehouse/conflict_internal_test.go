package warehouse

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
)

func withBeforeLink(fn func(version int64)) Option {
	return func(c *config) { c.beforeLink = fn }
}

// conflictSetup opens two Warehouses on one directory: a, whose commits run hook just before
// creating their version, and b, an independent writer (another process).
func conflictSetup(t *testing.T, mem memory.Allocator, hook func(version int64), opts ...Option) (a, b *Table) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	wa, err := Open(dir, append([]Option{WithAllocator(mem), withBeforeLink(hook)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := Open(dir, WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	name := tableschema.TableName{Catalog: "c", Schema: "s", Table: "t"}
	schema, err := tableschema.ParseColumns("id BIGINT NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = wa.CreateTable(ctx, name, schema); err != nil {
		t.Fatal(err)
	}
	if b, err = wb.Table(ctx, name); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func ids(mem memory.Allocator, vals ...int64) arrow.RecordBatch {
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.AppendValues(vals, nil)
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(vals)))
}

func commitIDs(t *testing.T, mem memory.Allocator, tbl *Table, opts CommitOptions, vals ...int64) (CommitResult, error) {
	t.Helper()
	ctx := context.Background()
	w := tbl.NewWriter()
	defer w.Abort()
	rec := ids(mem, vals...)
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	return w.Commit(ctx, opts)
}

func scanIDs(t *testing.T, tbl *Table) []int64 {
	t.Helper()
	var out []int64
	err := tbl.Scan(context.Background(), func(rec arrow.RecordBatch) error {
		out = append(out, rec.Column(0).(*array.Int64).Int64Values()...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func dataFiles(t *testing.T, tbl *Table) int {
	m, err := filepath.Glob(filepath.Join(tbl.Dir(), "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func TestCommitConflictRetries(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var b *Table
	var hookVersions []int64
	// The other writer takes the first two versions a tries.
	a, b := conflictSetup(t, mem, func(v int64) {
		hookVersions = append(hookVersions, v)
		if len(hookVersions) <= 2 {
			if _, err := commitIDs(t, mem, b, CommitOptions{}, 100+v); err != nil {
				t.Errorf("other writer: %v", err)
			}
		}
	})
	res, err := commitIDs(t, mem, a, CommitOptions{}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 3 || !slices.Equal(hookVersions, []int64{1, 2, 3}) {
		t.Errorf("Commit() = version %d after tries at %v; want version 3 after 1, 2, 3", res.Version, hookVersions)
	}
	if got := scanIDs(t, a); !slices.Equal(got, []int64{1, 2, 101, 102}) {
		t.Errorf("Scan() = %v; want [1 2 101 102]", got)
	}
}

func TestOverwriteAfterConflict(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var b *Table
	calls := 0
	a, b := conflictSetup(t, mem, func(v int64) {
		calls++
		if calls == 1 {
			if _, err := commitIDs(t, mem, b, CommitOptions{}, 50); err != nil {
				t.Errorf("other writer: %v", err)
			}
		}
	})
	if _, err := commitIDs(t, mem, b, CommitOptions{}, 10); err != nil {
		t.Fatal(err)
	}
	res, err := commitIDs(t, mem, a, CommitOptions{Overwrite: true}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 3 {
		t.Errorf("overwrite landed at version %d; want 3", res.Version)
	}
	// The overwrite removes the file that landed during its first try, too.
	if got := scanIDs(t, a); !slices.Equal(got, []int64{7}) {
		t.Errorf("Scan() after overwrite = %v; want [7]", got)
	}
	if got := scanIDs(t, b); !slices.Equal(got, []int64{7}) {
		t.Errorf("Scan() from the other Warehouse = %v; want [7]", got)
	}
}

func TestTxnCommittedDuringConflict(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var b *Table
	a, b := conflictSetup(t, mem, func(v int64) {
		// Another process commits the same txn first (a recovery racing a live writer).
		if _, err := commitIDs(t, mem, b, CommitOptions{Txn: &Txn{AppID: "wal", Version: 3}}, 1); err != nil {
			t.Errorf("other writer: %v", err)
		}
	})
	_, err := commitIDs(t, mem, a, CommitOptions{Txn: &Txn{AppID: "wal", Version: 3}}, 1)
	if !errors.Is(err, ErrTxnCommitted) {
		t.Fatalf("Commit() = %v; want ErrTxnCommitted", err)
	}
	if got := scanIDs(t, a); !slices.Equal(got, []int64{1}) {
		t.Errorf("Scan() = %v; want [1] once", got)
	}
	if n := dataFiles(t, a); n != 1 {
		t.Errorf("%d data files; want 1 (the losing commit deletes its file)", n)
	}
}

func TestCommitAttemptsExhausted(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var b *Table
	next := int64(1000)
	a, b := conflictSetup(t, mem, func(v int64) {
		next++
		if _, err := commitIDs(t, mem, b, CommitOptions{}, next); err != nil {
			t.Errorf("other writer: %v", err)
		}
	}, WithCommitAttempts(3))
	ctx := context.Background()
	w := a.NewWriter()
	rec := ids(mem, 1)
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	_, err := w.Commit(ctx, CommitOptions{})
	if !errors.Is(err, ErrCommitConflict) {
		t.Fatalf("Commit() = %v; want ErrCommitConflict", err)
	}
	if n := dataFiles(t, a); n != 4 {
		t.Errorf("%d data files; want 4 (3 from the other writer, 1 kept for a retry)", n)
	}
	a.wh.cfg.beforeLink = nil
	res, err := w.Commit(ctx, CommitOptions{})
	if err != nil {
		t.Fatalf("Commit() retry: %v", err)
	}
	if res.Version != 4 {
		t.Errorf("retry landed at version %d; want 4", res.Version)
	}
	if got := scanIDs(t, a); !slices.Equal(got, []int64{1, 1001, 1002, 1003}) {
		t.Errorf("Scan() = %v", got)
	}
}
