package readers_test

import (
	"context"
	"errors"
	"fmt"
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
// over ranged GETs (Parquet's footer read and prefetched column chunks) and streamed reads (Arrow
// IPC, CSV). A valid file reads to the same values as from disk; a bad one fails as it does from
// disk, with an error that wraps ErrCorrupt and names the object's URL, within a bounded time and
// with every buffer released.
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
				if !errors.Is(rerr, readers.ErrCorrupt) {
					t.Errorf("error %q does not wrap ErrCorrupt (from disk: %q)", rerr, lerr)
				}
				if !strings.Contains(rerr.Error(), url) {
					t.Errorf("error %q does not name %s", rerr, url)
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
