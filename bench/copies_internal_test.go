package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/readers"
)

// TestCopiesKeepFilesAndPartitions: the copies of a dataset hold the same files (by bytes) with the
// same Hive partitions, each copy once, whatever the files' names.
func TestCopiesKeepFilesAndPartitions(t *testing.T) {
	data := t.TempDir()
	for i, rel := range []string{"country=FR/day=2024-01-01/part.parquet", "country=a b/day=x/part.parquet", "flat.parquet"} {
		p := filepath.Join(data, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fixture.WriteParquet(p, int64(i*10), 10, 5); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	files, err := readers.Discover(ctx, []string{data}, readers.WithExclude("flat.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	srcs, err := copies(work, files, 3)
	if err != nil {
		t.Fatal(err)
	}
	again, err := copies(work, files, 2) // made once, reused
	if err != nil || !slices.Equal(again, srcs[:2]) {
		t.Fatalf("copies again = %v, %v; want %v", again, err, srcs[:2])
	}
	got, err := readers.Discover(ctx, srcs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*len(files) {
		t.Fatalf("the copies hold %d files; want 3 × %d", len(got), len(files))
	}
	for i, f := range got {
		orig := files[i%len(files)]
		if !slices.Equal(f.Partitions, orig.Partitions) || f.Size != orig.Size {
			t.Errorf("copy %s: partitions %v, %d bytes; want %v, %d bytes like %s", f.Path, f.Partitions, f.Size, orig.Partitions, orig.Size, orig.Path)
		}
		a, err1 := os.ReadFile(f.Path)
		b, err2 := os.ReadFile(orig.Path)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Errorf("copy %s differs from %s (%v, %v)", f.Path, orig.Path, err1, err2)
		}
	}
}
