package readers_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// readFile opens f and reads every unit, returning the first error.
func readFile(ctx context.Context, f readers.File, opts ...readers.Option) error {
	src, err := readers.Open(ctx, f, opts...)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, u := range src.Units() {
		if err := src.ReadUnit(ctx, u.Index, func(arrow.RecordBatch) error { return nil }); err != nil {
			return err
		}
	}
	return nil
}

// TestFileError checks that the errors of Open and ReadUnit are *FileErrors naming the file once and
// the unit where there is one, and that the cause stays matchable through them.
func TestFileError(t *testing.T) {
	dir := t.TempDir()
	good := testRecord(t, memory.NewGoAllocator(), 0, 100)
	defer good.Release()

	pq := filepath.Join(dir, "data.parquet")
	writeParquet(t, pq, []arrow.RecordBatch{good}, 1000)
	whole, err := os.ReadFile(pq)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.parquet")
	touch(t, truncated, append([]byte("PAR1"), whole[len(whole)-200:]...))

	stream := filepath.Join(dir, "data.arrows")
	writeIPC(t, stream, []arrow.RecordBatch{good}, true)
	sb, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.arrows")
	touch(t, cut, sb[:len(sb)*2/3]) // the schema reads, the batch does not

	table, err := tableschema.ParseColumns("id BIGINT, d DATE")
	if err != nil {
		t.Fatal(err)
	}
	badRow := filepath.Join(dir, "rows.csv")
	touch(t, badRow, []byte("id,d\n1,2024-01-01\n2,SECRET\n"))
	noHeader := filepath.Join(dir, "empty.csv")
	touch(t, noHeader, nil)
	part := filepath.Join(dir, "d=oops", "p.csv")
	if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		t.Fatal(err)
	}
	touch(t, part, []byte("id\n1\n"))

	tests := []struct {
		name     string
		file     readers.File
		opts     []readers.Option
		unit     int
		is       error  // errors.Is target, optional
		wantText string // the whole message, or its start when it ends in "…"
	}{
		{"missing file", readers.File{Path: filepath.Join(dir, "missing.parquet")}, nil, -1, fs.ErrNotExist,
			filepath.Join(dir, "missing.parquet") + ": stat: no such file or directory"},
		{"corrupt Parquet footer", readers.File{Path: truncated, Format: readers.FormatParquet}, nil, -1, readers.ErrCorrupt,
			truncated + ": corrupt file: …"},
		{"IPC stream cut in a batch", readers.File{Path: cut, Format: readers.FormatIPCStream}, nil, 0, readers.ErrCorrupt,
			cut + ": stream 0: record batch 0: corrupt file: …"},
		{"CSV bad row", readers.File{Path: badRow}, []readers.Option{readers.WithTable(table)}, 0, readers.ErrBadRow,
			badRow + `: line 3, column "d": not a date (want the layout 2006-01-02)`},
		{"CSV without a header", readers.File{Path: noHeader, Format: readers.FormatCSV}, nil, -1, readers.ErrCorrupt,
			noHeader + ": corrupt file: empty file, no header row"},
		{"partition value", readers.File{Path: part, Partitions: []readers.Partition{{Key: "d", Value: "oops"}}},
			[]readers.Option{readers.WithTable(table)}, -1, nil,
			part + ": partition d=oops: not a date (want the layout 2006-01-02)"},
		{"no such unit", readers.File{Path: pq}, nil, 7, nil, pq + ": row group 7: no such unit (the file has 1 row groups)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			opts := append([]readers.Option{readers.WithAllocator(mem)}, tt.opts...)
			var err error
			if tt.name == "no such unit" {
				src, oerr := readers.Open(context.Background(), tt.file, opts...)
				if oerr != nil {
					t.Fatal(oerr)
				}
				err = src.ReadUnit(context.Background(), 7, func(arrow.RecordBatch) error { return nil })
				src.Close()
			} else {
				err = readFile(context.Background(), tt.file, opts...)
			}
			var fe *readers.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("read = %v (%T); want a *readers.FileError", err, err)
			}
			if fe.Path != tt.file.Path || fe.Unit != tt.unit {
				t.Errorf("FileError{Path: %q, Unit: %d}; want {%q, %d}", fe.Path, fe.Unit, tt.file.Path, tt.unit)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			msg := err.Error()
			if want, prefix := strings.CutSuffix(tt.wantText, "…"); prefix && !strings.HasPrefix(msg, want) || !prefix && msg != want {
				t.Errorf("Error() = %q; want %q", msg, tt.wantText)
			}
			if n := strings.Count(msg, tt.file.Path); n != 1 {
				t.Errorf("Error() = %q names the path %d times; want once", msg, n)
			}
			if strings.Contains(msg, "SECRET") {
				t.Errorf("Error() = %q quotes a value", msg)
			}
		})
	}
}

// TestFileErrorCallerErrors checks that errors of the caller's own callbacks come back as they are,
// not wrapped in a *FileError.
func TestFileErrorCallerErrors(t *testing.T) {
	dir := t.TempDir()
	stop := errors.New("stop")
	csvPath := filepath.Join(dir, "a.csv")
	touch(t, csvPath, []byte("id\n1\nx\n"))
	table, err := tableschema.ParseColumns("id BIGINT")
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord(t, memory.NewGoAllocator(), 0, 10)
	defer rec.Release()
	pq := filepath.Join(dir, "a.parquet")
	writeParquet(t, pq, []arrow.RecordBatch{rec}, 100)
	ipcPath := filepath.Join(dir, "a.arrow")
	writeIPC(t, ipcPath, []arrow.RecordBatch{rec}, false)
	part := filepath.Join(dir, "k=v", "b.arrows")
	if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		t.Fatal(err)
	}
	writeIPC(t, part, []arrow.RecordBatch{rec}, true)

	tests := []struct {
		name string
		file readers.File
		opts []readers.Option
		fn   func(arrow.RecordBatch) error
	}{
		{"fn, Parquet", readers.File{Path: pq}, nil, func(arrow.RecordBatch) error { return stop }},
		{"fn, IPC file", readers.File{Path: ipcPath}, nil, func(arrow.RecordBatch) error { return stop }},
		{"fn, IPC stream with partitions", readers.File{Path: part, Partitions: []readers.Partition{{Key: "k", Value: "v"}}}, nil,
			func(arrow.RecordBatch) error { return stop }},
		{"fn, CSV", readers.File{Path: csvPath}, nil, func(arrow.RecordBatch) error { return stop }},
		{"OnBadRow", readers.File{Path: csvPath}, []readers.Option{readers.WithTable(table),
			readers.WithCSV(readers.CSVOptions{OnBadRow: func(readers.BadRow) error { return stop }})},
			func(arrow.RecordBatch) error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src, err := readers.Open(context.Background(), tt.file, append([]readers.Option{readers.WithAllocator(mem)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if err := src.ReadUnit(context.Background(), 0, tt.fn); err != stop { //nolint:errorlint // the callback's own error, not wrapped
				t.Errorf("ReadUnit = %v (%T); want the callback's own error, unwrapped", err, err)
			}
		})
	}
}

// TestFileErrorContext checks that a cancelled read is a *FileError that still matches the
// context's error.
func TestFileErrorContext(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	touch(t, path, []byte("id\n1\n"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := readers.Open(ctx, readers.File{Path: path})
	var fe *readers.FileError
	if !errors.As(err, &fe) || fe.Path != path || !errors.Is(err, context.Canceled) {
		t.Errorf("Open(cancelled) = %v; want a *FileError for %s wrapping context.Canceled", err, path)
	}
	src, err := readers.Open(context.Background(), readers.File{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	err = src.ReadUnit(ctx, 0, func(arrow.RecordBatch) error { return nil })
	if !errors.As(err, &fe) || fe.Unit != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("ReadUnit(cancelled) = %v; want a *FileError for unit 0 wrapping context.Canceled", err)
	}
}
