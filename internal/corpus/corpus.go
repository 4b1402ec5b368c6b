// Package corpus finds the shared corpus of real files (apache/parquet-testing and apache/arrow-testing,
// kept beside the module in ../shared/corpus) and holds what the tests know about it: which valid
// files arrow-go cannot read, which the loader reads differently from arrow-go and with what values,
// and arrow-go's plain readers as the reference for every other file. It is used only by tests; every
// function skips the test when the corpus is absent.
package corpus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderproject/loader/readers"
)

// EnvRoot names an environment variable that, when set, points at the corpus instead of
// ../shared/corpus beside the module.
const EnvRoot = "LOADER_CORPUS"

// KnownUnreadable lists valid corpus files that arrow-go v18.8.0 itself cannot read, with why. The
// loader must fail them with a clear error naming the file, like any bad file. (Hadoop-LZ4 and empty
// compressed V2 pages are read with the codecs readers.RegisterParquetCodecs adds, which the
// reference readers here use too.)
var KnownUnreadable = map[string]string{
	"incorrect_map_schema.parquet":                       "arrow-go refuses MAP keys that are not required",
	"unknown-logical-type.parquet":                       "arrow-go panics on an unknown logical type (recovered)",
	"datapage_v1-corrupt-checksum.parquet":               "a page fails its CRC (arrow-go does not check; the loader does)",
	"encrypt_columns_and_footer_aad.parquet.encrypted":   "encrypted; no key",
	"encrypt_columns_and_footer_ctr.parquet.encrypted":   "encrypted; no key",
	"encrypt_columns_plaintext_footer.parquet.encrypted": "encrypted; no key",
}

// BeyondArrowGo lists valid files the loader reads although arrow-go's plain reader cannot, with the
// values of their single column in the Row conventions of internal/fixture (int64 µs, nil for null).
// int96_from_spark.parquet holds Spark INT96 timestamps outside the nanosecond range (see
// parquet-testing's int96_from_spark.md), read by the loader as microseconds:
// 2024-01-01T20:34:56.123456, 2024-01-01T01:00:00, 9999-12-31T03:00:00, 2024-12-30T23:00:00, null,
// 290000-12-31T01:00:00.
var BeyondArrowGo = map[string][]any{
	"int96_from_spark.parquet": {int64(1704141296123456), int64(1704070800000000), int64(253402225200000000),
		int64(1735599600000000), nil, int64(9089380393200000000)},
}

// File is a corpus file and the format to read it as.
type File struct {
	Path   string
	Format readers.Format
}

// Name returns the file's base name, the key of KnownUnreadable and BeyondArrowGo.
func (f File) Name() string { return filepath.Base(f.Path) }

// Root returns the corpus directory, or skips the test when there is none.
func Root(t testing.TB) string {
	t.Helper()
	root := os.Getenv(EnvRoot)
	if root == "" {
		mod, err := moduleRoot()
		if err != nil {
			t.Skipf("corpus: %v", err)
		}
		root = filepath.Join(mod, "..", "shared", "corpus")
	}
	if _, err := os.Stat(root); err != nil {
		t.Skipf("corpus %s not present: %v", root, err)
	}
	return root
}

// moduleRoot walks up from the working directory (a package directory under go test) to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Dir returns the corpus directory rel (slash-separated), or skips the test when it is absent.
func Dir(t testing.TB, rel string) string {
	t.Helper()
	dir := filepath.Join(Root(t), filepath.FromSlash(rel))
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("corpus %s not present: %v", dir, err)
	}
	return dir
}

// Valid returns the valid Parquet and Arrow IPC files of the corpus (KnownUnreadable ones included),
// in a stable order. It fails the test when the corpus looks truncated.
func Valid(t testing.TB) []File {
	t.Helper()
	var out []File
	for _, rel := range []string{"parquet-testing/data", "arrow-testing/data/arrow-ipc-stream/integration"} {
		root := Dir(t, rel)
		files, err := readers.Discover(context.Background(), []string{root}, readers.WithExclude("*.csv"))
		if err != nil {
			t.Fatalf("Discover(%s) = %v", root, err)
		}
		for _, f := range files {
			out = append(out, File{Path: f.Path, Format: f.Format})
		}
		// encrypted files have no known extension: name them unless their magic found them
		matches, _ := filepath.Glob(filepath.Join(root, "*.encrypted"))
		for _, m := range matches {
			if !slices.ContainsFunc(out, func(f File) bool { return f.Path == m }) {
				out = append(out, File{Path: m, Format: readers.FormatParquet})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if len(out) < 50 {
		t.Fatalf("only %d valid corpus files found", len(out))
	}
	return out
}

// BadDirs are the corpus directories of corrupt and fuzzer-found files, with the format each holds.
var BadDirs = []struct {
	Rel    string
	Format readers.Format
}{
	{"parquet-testing/bad_data", readers.FormatParquet},
	{"arrow-testing/data/parquet/fuzzing", readers.FormatParquet},
	{"arrow-testing/data/parquet/encoding-fuzzing", readers.FormatParquet},
	{"arrow-testing/data/arrow-ipc-stream", readers.FormatIPCStream},
	{"arrow-testing/data/arrow-ipc-file", readers.FormatIPCFile},
}

// Bad returns every corrupt or fuzzer-found file (the files directly in BadDirs, without their
// READMEs), in a stable order. It fails the test when the corpus looks truncated.
func Bad(t testing.TB) []File {
	t.Helper()
	var out []File
	for _, d := range BadDirs {
		root := Dir(t, d.Rel)
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".md") {
				continue
			}
			out = append(out, File{Path: filepath.Join(root, e.Name()), Format: d.Format})
		}
	}
	if len(out) < 100 {
		t.Fatalf("only %d bad corpus files found", len(out))
	}
	return out
}

// ReadPlain reads a whole file with arrow-go's plain readers (pqarrow, ipc), the reference the
// loader's results are compared with. The caller releases the table. Parquet page buffers come from
// Go's allocator; mem allocates the Arrow data.
func ReadPlain(path string, format readers.Format, mem memory.Allocator) (arrow.Table, error) {
	readers.RegisterParquetCodecs() // the codecs arrow-go lacks, whatever test runs first
	switch format {
	case readers.FormatParquet:
		r, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(memory.NewGoAllocator())))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			return nil, err
		}
		return fr.ReadTable(context.Background())
	case readers.FormatIPCFile:
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		var recs []arrow.RecordBatch
		defer func() {
			for _, rec := range recs {
				rec.Release()
			}
		}()
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.RecordBatchAt(i)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rec)
		}
		return array.NewTableFromRecords(r.Schema(), recs), nil
	case readers.FormatIPCStream:
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(mem))
		if err != nil {
			return nil, err
		}
		defer r.Release()
		var recs []arrow.RecordBatch
		defer func() {
			for _, rec := range recs {
				rec.Release()
			}
		}()
		for r.Next() {
			rec := r.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
		if err := r.Err(); err != nil {
			return nil, err
		}
		return array.NewTableFromRecords(r.Schema(), recs), nil
	}
	return nil, fmt.Errorf("corpus: no plain reader for %s", format)
}

// PlainLeaks reports whether arrow-go's plain reader, given a checked allocator, leaves allocations
// behind on this file: arrow-go v18.8.0 leaks some decoder scratch buffers (delta encodings) and
// buffers on some error paths. Such leaks are arrow-go's, not the loader's: with Go's allocator they
// are garbage collected. A panic of the plain reader counts as no leak.
func PlainLeaks(path string, format readers.Format) bool {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	func() {
		defer func() { _ = recover() }()
		tbl, err := ReadPlain(path, format, mem)
		if err == nil {
			tbl.Release()
		}
	}()
	return mem.CurrentAlloc() != 0
}
