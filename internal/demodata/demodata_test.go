package demodata_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/loaderproject/loader/internal/demodata"
	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
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

// TestFormatsHoldTheSameRows reads each format back the way a load does (readers, then schemamatch to
// the table's canonical schema) and compares every value with the Parquet files'.
func TestFormatsHoldTheSameRows(t *testing.T) {
	table, err := tableschema.FromArrow(demodata.Schema())
	if err != nil {
		t.Fatal(err)
	}
	read := func(t *testing.T, format demodata.Format, canonical bool) []fixture.Row {
		dir := t.TempDir()
		res, err := demodata.Generate(context.Background(), dir, demodata.Options{Rows: 3000, Files: 2, RowGroupRows: 700, Format: format, Seed: 3, Canonical: canonical})
		if err != nil {
			t.Fatalf("Generate(%s): %v", format, err)
		}
		var rows []fixture.Row
		for _, path := range res.Files {
			if !strings.HasSuffix(path, "."+map[demodata.Format]string{demodata.Parquet: "parquet", demodata.CSV: "csv", demodata.IPC: "arrow"}[format]) {
				t.Errorf("Generate(%s) wrote %s", format, path)
			}
			rows = append(rows, readCanonical(t, path, table, canonical)...)
		}
		return rows
	}
	want := read(t, demodata.Parquet, false)
	if len(want) != 3000 {
		t.Fatalf("Parquet holds %d rows; want 3000", len(want))
	}
	for _, format := range []demodata.Format{demodata.CSV, demodata.IPC} {
		t.Run(string(format), func(t *testing.T) {
			if diffs := fixture.DiffRows(read(t, format, false), want, 5); len(diffs) > 0 {
				t.Errorf("%s rows differ from Parquet's:\n%s", format, strings.Join(diffs, "\n"))
			}
		})
	}
	// Canonical files hold the same values, in types that need no cast.
	for _, format := range []demodata.Format{demodata.Parquet, demodata.IPC} {
		t.Run("canonical "+string(format), func(t *testing.T) {
			if diffs := fixture.DiffRows(read(t, format, true), want, 5); len(diffs) > 0 {
				t.Errorf("canonical %s rows differ from Parquet's:\n%s", format, strings.Join(diffs, "\n"))
			}
		})
	}
	if _, err := demodata.Generate(context.Background(), t.TempDir(), demodata.Options{Rows: 10, Format: demodata.CSV, Canonical: true}); err == nil {
		t.Error("Generate(canonical CSV) = nil error; want one saying CSV is text")
	}
}

// readCanonical reads a file cast to the table; identity says the file must need no cast.
func readCanonical(t *testing.T, path string, table *tableschema.Schema, identity bool) []fixture.Row {
	t.Helper()
	ctx := context.Background()
	files, err := readers.Discover(ctx, []string{path})
	if err != nil {
		t.Fatal(err)
	}
	src, err := readers.Open(ctx, files[0], readers.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	plan, err := schemamatch.NewPlan(src.Schema(), table)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if identity {
		// Nothing is converted: columns are copied or renamed, and DECIMAL text is only checked.
		for _, st := range plan.Steps() {
			free := st.Action == "copy" || strings.HasSuffix(st.Action, "(no copy)")
			if !free && (st.Column != "amount" || st.Action != "cast large_utf8 -> large_utf8") {
				t.Errorf("%s: column %s: %s; a canonical file needs no cast", path, st.Column, st.Action)
			}
		}
	}
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, u := range src.Units() {
		err := src.ReadUnit(ctx, u.Index, func(rec arrow.RecordBatch) error {
			out, err := plan.Apply(rec)
			if err != nil {
				return err
			}
			recs = append(recs, out)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return fixture.Rows(recs)
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"parquet", "csv", "ipc"} {
		if f, err := demodata.ParseFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", s, f, err, s)
		}
	}
	if _, err := demodata.ParseFormat("orc"); err == nil || !strings.Contains(err.Error(), "orc") {
		t.Errorf("ParseFormat(orc) = %v; want an error naming it", err)
	}
	if _, err := demodata.Generate(context.Background(), t.TempDir(), demodata.Options{Rows: 10, Format: "orc"}); err == nil {
		t.Error("Generate(format orc) = nil error")
	}
}
