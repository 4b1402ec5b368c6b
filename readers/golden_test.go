package readers_test

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/readers"
)

// TestIntegrationGolden checks what the loader reads from every arrow-testing integration file
// (file and stream form) against the golden .json.gz contents next to it. arrow-go's own
// arrow-json-integration-test tool turns each golden JSON into an Arrow file; both are read with
// this package and must hold the same values.
func TestIntegrationGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("builds arrow-go's integration tool")
	}
	dir := corpusDir(t, "arrow-testing/data/arrow-ipc-stream/integration/1.0.0-littleendian")
	goldens, _ := filepath.Glob(filepath.Join(dir, "*.json.gz"))
	if len(goldens) == 0 {
		t.Skip("no golden files")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	tmp := t.TempDir()
	tool := filepath.Join(tmp, "arrow-json-integration-test")
	build := exec.Command(goBin, "build", "-o", tool, "github.com/apache/arrow-go/v18/arrow/ipc/cmd/arrow-json-integration-test")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("cannot build arrow-go's integration tool: %v\n%s", err, out)
	}
	for _, golden := range goldens {
		name := strings.TrimSuffix(filepath.Base(golden), ".json.gz")
		t.Run(name, func(t *testing.T) {
			jsonPath := filepath.Join(tmp, name+".json")
			gunzip(t, golden, jsonPath)
			want := filepath.Join(tmp, name+".golden.arrow_file")
			cmd := exec.Command(tool, "-mode", "JSON_TO_ARROW", "-json", jsonPath, "-arrow", want, "-verbose=false")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Skipf("the golden JSON does not convert with arrow-go: %v: %s", err, out)
			}
			wantTbl := readTable(t, want)
			defer wantTbl.Release()
			for _, ext := range []string{".arrow_file", ".stream"} {
				path := filepath.Join(dir, name+ext)
				if _, err := os.Stat(path); err != nil {
					continue
				}
				got := readTable(t, path)
				if got.NumRows() != wantTbl.NumRows() {
					t.Errorf("%s: %d rows; the golden JSON has %d", ext, got.NumRows(), wantTbl.NumRows())
				} else if !tablesEqual(got, wantTbl) {
					t.Errorf("%s: values differ from the golden JSON", ext)
				}
				got.Release()
			}
		})
	}
}

func gunzip(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
}

func readTable(t *testing.T, path string) arrow.Table {
	t.Helper()
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	defer src.Close()
	tbl, err := readAll(t, context.Background(), src)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return tbl
}
