package readers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/readers"
)

// TestCorpusFromObjects reads every corpus file, valid and bad, from a bucket of a real S3 server:
// over ranged GETs (the footers, and Parquet's column chunks and Arrow IPC files' batches read ahead)
// and streamed reads (Arrow IPC streams, CSV). A valid file reads to the same values as from disk; a bad one fails as it does from
// disk (an error that names the object's URL and wraps ErrCorrupt when the disk's does), within a
// bounded time and with every buffer released. CSV objects, plain, gzip and zstd, whole and cut
// short, go the same way.
func TestCorpusFromObjects(t *testing.T) {
	srv, st := objectStore(t)
	type entry struct {
		file  corpus.File
		valid bool
	}
	var all []entry
	for _, f := range corpus.Valid(t) {
		all = append(all, entry{f, true})
	}
	for _, f := range corpus.Bad(t) {
		all = append(all, entry{f, false})
	}
	// CSV, plain and compressed, whole and cut short.
	var text bytes.Buffer
	text.WriteString("id,name,price\n")
	for i := range 20000 {
		fmt.Fprintf(&text, "%d,\"name %d, \"\"q\"\"\",%d.%02d\n", i, i*7919, i, i%100)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"t.csv", text.Bytes()},
		{"t.csv.gz", gz(text.Bytes())},
		{"t.csv.zst", zst(text.Bytes())},
	} {
		for _, cut := range []bool{false, true} {
			data, name := c.data, c.name
			if cut {
				data, name = data[:len(data)*2/3], "cut-"+name
			}
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			all = append(all, entry{corpus.File{Path: path}, !cut || c.name == "t.csv"})
		}
	}
	for i, e := range all {
		key := fmt.Sprintf("c%04d/%s", i, e.file.Name())
		srv.PutFile(t, "data", key, e.file.Path)
		url := "s3://data/" + key
		t.Run(filepath.Base(filepath.Dir(e.file.Path))+"/"+e.file.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			local, lerr := readCorpusFile(t, ctx, readers.File{Path: e.file.Path, Format: e.file.Format}, e.file.Path, nil)
			if local != nil {
				defer local.Release()
			}
			dopts := []readers.DiscoverOption{readers.WithObjectStore(st)}
			if e.file.Format != readers.FormatUnknown {
				dopts = append(dopts, readers.WithFormat(e.file.Format)) // as the corpus reads it from disk
			}
			files, err := readers.Discover(ctx, []string{url}, dopts...)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 {
				t.Fatalf("Discover(%s) = %d files; want 1", url, len(files))
			}
			remote, rerr := readCorpusFile(t, ctx, files[0], e.file.Path, []readers.Option{readers.WithPrefetchBudget(&countingBudget{}, 0, readers.AheadLimits{})})
			if remote != nil {
				defer remote.Release()
			}
			if ctx.Err() != nil {
				t.Fatalf("did not finish within a minute: %v", rerr)
			}
			switch {
			case lerr == nil && rerr == nil:
				if !tablesEqual(remote, local) {
					t.Errorf("values from the bucket differ from the file's on disk")
				}
			case lerr != nil && rerr != nil:
				// The text may differ: a bucket's reader meets a corrupt Parquet page through other
				// reads, and an Arrow IPC file's messages are checked per unit, not all at Open.
				if !strings.Contains(rerr.Error(), url) {
					t.Errorf("error %q does not name %s", rerr, url)
				}
				if errors.Is(lerr, readers.ErrCorrupt) != errors.Is(rerr, readers.ErrCorrupt) {
					t.Errorf("error from the bucket %q wraps ErrCorrupt: %v; from disk: %v", rerr, errors.Is(rerr, readers.ErrCorrupt), errors.Is(lerr, readers.ErrCorrupt))
				}
			case e.valid || rerr != nil:
				t.Errorf("from disk: %v; from the bucket: %v", lerr, rerr)
			default:
				t.Errorf("from disk: %v; from the bucket it reads fine", lerr)
			}
		})
	}
}

// readCorpusFile opens and reads every unit of f with a checked allocator, and checks that the buffers
// are all released again (unless arrow-go's own reader leaks on path, the file on disk).
func readCorpusFile(t *testing.T, ctx context.Context, f readers.File, path string, opts []readers.Option) (arrow.Table, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	src, err := readers.Open(ctx, f, append(opts, readers.WithAllocator(mem), readers.WithBatchBytes(64<<10))...)
	var tbl arrow.Table
	if err == nil {
		tbl, err = readAll(t, ctx, src)
		src.Close()
	}
	if err != nil && tbl != nil {
		tbl.Release()
		tbl = nil
	}
	if err != nil || tbl == nil {
		if n := mem.CurrentAlloc(); n != 0 && !corpus.PlainLeaks(path, f.Format) {
			t.Errorf("%s: %d bytes still allocated after the error", f.Path, n)
		}
	}
	return tbl, err
}
