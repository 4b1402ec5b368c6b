package warehouse_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/warehouse"
)

// TestConcurrentCommits runs many writers at once on one table, through one Warehouse and through
// two more Warehouse values on the same directory (as separate processes would): every commit must
// land at its own version, versions must be contiguous and no row may be lost.
func TestConcurrentCommits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	var whs []*warehouse.Warehouse
	for range 3 {
		wh, err := warehouse.Open(dir, warehouse.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		whs = append(whs, wh)
	}
	name := mustName(t, "c.s.t")
	if _, err := whs[0].CreateTable(ctx, name, mustColumns(t, idCols)); err != nil {
		t.Fatal(err)
	}
	const (
		goroutinesPerWH = 4
		commits         = 8
		rowsPerCommit   = 5
	)
	type result struct {
		version int64
		err     error
	}
	results := make(chan result, len(whs)*goroutinesPerWH*commits)
	var wg sync.WaitGroup
	g := 0
	for _, wh := range whs {
		for range goroutinesPerWH {
			base := g * commits * rowsPerCommit
			g++
			wg.Add(1)
			go func() {
				defer wg.Done()
				tbl, err := wh.Table(ctx, name)
				if err != nil {
					results <- result{err: err}
					return
				}
				for c := range commits {
					w := tbl.NewWriter()
					rec := idRecord(mem, base+c*rowsPerCommit, rowsPerCommit)
					err := w.Write(ctx, rec)
					rec.Release()
					var res warehouse.CommitResult
					if err == nil {
						res, err = w.Commit(ctx, warehouse.CommitOptions{})
					}
					if err != nil {
						w.Abort()
					}
					results <- result{res.Version, err}
					// Readers run alongside the writers.
					if _, _, err := tbl.Count(ctx); err != nil {
						results <- result{err: fmt.Errorf("Count: %w", err)}
					}
				}
			}()
		}
	}
	wg.Wait()
	close(results)
	var versions []int64
	for r := range results {
		if r.err != nil {
			t.Errorf("commit: %v", r.err)
			continue
		}
		if r.version != 0 {
			versions = append(versions, r.version)
		}
	}
	total := g * commits
	slices.Sort(versions)
	if !slices.Equal(versions, seq(1, total)) {
		t.Errorf("commit versions = %v; want each of 1..%d once", versions, total)
	}
	for i, wh := range whs {
		tbl, err := wh.Table(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		rows, v, err := tbl.Count(ctx)
		if err != nil || rows != int64(total*rowsPerCommit) || v != int64(total) {
			t.Errorf("warehouse %d: Count() = %d at version %d, %v; want %d at %d", i, rows, v, err, total*rowsPerCommit, total)
		}
	}
	tbl, err := whs[1].Table(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	ids := scanIDs(t, tbl)
	slices.Sort(ids)
	if !slices.Equal(ids, seq(0, total*rowsPerCommit)) {
		t.Errorf("Scan() returned %d rows; want ids 0..%d once each", len(ids), total*rowsPerCommit-1)
	}
}

// TestConcurrentTxn commits the same Txn from many goroutines and Warehouses: exactly one wins.
func TestConcurrentTxn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	name := mustName(t, "c.s.t")
	whs := make([]*warehouse.Warehouse, 2)
	for i := range whs {
		wh, err := warehouse.Open(dir, warehouse.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		whs[i] = wh
	}
	if _, err := whs[0].CreateTable(ctx, name, mustColumns(t, idCols)); err != nil {
		t.Fatal(err)
	}
	errs := fixture.Concurrently(8, func(i int) error {
		tbl, err := whs[i%2].Table(ctx, name)
		if err != nil {
			return err
		}
		w := tbl.NewWriter()
		defer w.Abort()
		rec := idRecord(mem, i*10, 10)
		defer rec.Release()
		if err := w.Write(ctx, rec); err != nil {
			return err
		}
		_, err = w.Commit(ctx, warehouse.CommitOptions{Txn: &warehouse.Txn{AppID: "app", Version: 7}})
		return err
	})
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, warehouse.ErrTxnCommitted):
			t.Errorf("Commit: %v", err)
		}
	}
	tbl, err := whs[0].Table(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := tbl.Count(ctx)
	if won != 1 || rows != 10 || err != nil {
		t.Errorf("%d commits won, table has %d rows (%v); want 1 and 10", won, rows, err)
	}
	if n := countDataFiles(t, tbl); n != 1 {
		t.Errorf("table dir holds %d data files; want 1", n)
	}
}
