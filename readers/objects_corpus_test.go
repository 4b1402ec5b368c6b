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

	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/readers"
)

// TestCorpusFromObjects reads every corpus file, valid and bad, from a bucket of a real S3 server:
// over ranged GETs (the footers, and Parquet's column chunks and Arrow IPC files' batches read
// ahead) and streamed reads (Arrow IPC streams, CSV). CSV objects, plain, gzip and zstd, whole and
// cut short, go the same way. A file that reads from disk reads to the same values from the bucket;
// one that fails from disk fails from the bucket too, with an error that names the object's URL and
// wraps ErrCorrupt when the disk's does; both within a bounded time and with every buffer released.
func TestCorpusFromObjects(t *testing.T) {
	srv, st := objectStore(t)
	all := append(corpus.Valid(t), corpus.Bad(t)...)
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
			all = append(all, corpus.File{Path: path})
		}
	}
	for i, cf := range all {
		key := fmt.Sprintf("c%04d/%s", i, cf.Name())
		srv.PutFile(t, "data", key, cf.Path)
		url := "s3://data/" + key
		t.Run(filepath.Base(filepath.Dir(cf.Path))+"/"+cf.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			local, releaseLocal, lerr := readCorpusFile(t, ctx, readers.File{Path: cf.Path, Format: cf.Format}, cf.Path, readers.WithBatchBytes(64<<10))
			defer releaseLocal()
			dopts := []readers.DiscoverOption{readers.WithObjectStore(st)}
			if cf.Format != readers.FormatUnknown {
				dopts = append(dopts, readers.WithFormat(cf.Format)) // as the corpus reads it from disk
			}
			files, err := readers.Discover(ctx, []string{url}, dopts...)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 {
				t.Fatalf("Discover(%s) = %d files; want 1", url, len(files))
			}
			remote, releaseRemote, rerr := readCorpusFile(t, ctx, files[0], cf.Path, readers.WithBatchBytes(64<<10), readers.WithPrefetchBudget(&countingBudget{}, 0, readers.AheadLimits{}))
			defer releaseRemote()
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
			default:
				t.Errorf("from disk: %v; from the bucket: %v", lerr, rerr)
			}
		})
	}
}
