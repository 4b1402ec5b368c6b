package demodata_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/loaderproject/loader/internal/demodata"
)

func TestGenerateIsDeterministic(t *testing.T) {
	opts := demodata.Options{Rows: 5000, Files: 3, RowGroupRows: 1000, Seed: 7}
	a, b := t.TempDir(), t.TempDir()
	ra, err := demodata.Generate(context.Background(), a, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demodata.Generate(context.Background(), b, opts); err != nil {
		t.Fatal(err)
	}
	if ra.Rows != 5000 || len(ra.Files) != 3 {
		t.Fatalf("Generate() = %d rows in %d files; want 5000 in 3", ra.Rows, len(ra.Files))
	}
	var rows int64
	for _, f := range ra.Files {
		x, _ := os.ReadFile(f)
		y, _ := os.ReadFile(filepath.Join(b, filepath.Base(f)))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs with the same options", filepath.Base(f))
		}
		r, err := file.OpenParquetFile(f, false)
		if err != nil {
			t.Fatal(err)
		}
		rows += r.NumRows()
		if r.NumRowGroups() < 2 {
			t.Errorf("%s has %d row groups; want several", f, r.NumRowGroups())
		}
		if got := r.MetaData().Schema.NumColumns(); got < 15 {
			t.Errorf("%s has %d leaf columns; want at least 15", f, got)
		}
		r.Close()
	}
	if rows != 5000 {
		t.Errorf("files hold %d rows; want 5000", rows)
	}
}

func TestGenerateCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := demodata.Generate(ctx, t.TempDir(), demodata.Options{Rows: 100}); err == nil {
		t.Error("Generate(cancelled) = nil error")
	}
}
