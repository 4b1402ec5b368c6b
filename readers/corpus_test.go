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

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderproject/loader/readers"
)

const corpus = "../../shared/corpus"

func corpusDir(t *testing.T, rel string) string {
	t.Helper()
	dir := filepath.Join(corpus, rel)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("corpus %s not present: %v", dir, err)
	}
	return dir
}

// knownUnreadable lists valid corpus files that arrow-go v18.8.0 itself cannot read, with why. The
// loader must fail them with a clear error naming the file, like any bad file.
var knownUnreadable = map[string]string{
	"datapage_v2_empty_datapage.snappy.parquet":          "arrow-go decompresses an empty V2 data page and fails (s2: corrupt input)",
	"hadoop_lz4_compressed.parquet":                      "arrow-go does not implement the Hadoop LZ4 codec",
	"incorrect_map_schema.parquet":                       "arrow-go refuses MAP keys that are not required",
	"unknown-logical-type.parquet":                       "arrow-go panics on an unknown logical type (recovered)",
	"datapage_v1-corrupt-checksum.parquet":               "a page fails its CRC (arrow-go does not check; the loader does)",
	"encrypt_columns_and_footer_aad.parquet.encrypted":   "encrypted; no key",
	"encrypt_columns_and_footer_ctr.parquet.encrypted":   "encrypted; no key",
	"encrypt_columns_plaintext_footer.parquet.encrypted": "encrypted; no key",
}

// beyondArrowGo lists valid files the loader reads although arrow-go's plain reader cannot, with
// their values: int96_from_spark.parquet holds Spark INT96 timestamps outside the nanosecond range
// (see parquet-testing's int96_from_spark.md), read here as microseconds.
var beyondArrowGo = map[string]string{
	// 2024-01-01T20:34:56.123456, 2024-01-01T01:00:00, 9999-12-31T03:00:00, 2024-12-30T23:00:00,
	// null, 290000-12-31T01:00:00
	"int96_from_spark.parquet": "1704141296123456 1704070800000000 253402225200000000 1735599600000000 null 9089380393200000000",
}

// plainRows reads a file with arrow-go's plain readers, as a reference.
func plainRows(t *testing.T, path string, format readers.Format) (int64, arrow.Table, error) {
	return plainRowsMem(t, path, format, memory.NewGoAllocator())
}

// plainLeaks reports whether arrow-go's plain reader, given a checked allocator, leaves
// allocations behind on this file: arrow-go v18.8.0 leaks some decoder scratch buffers (delta
// encodings) and buffers on some error paths. Such leaks are arrow-go's, not the loader's: with
// Go's allocator they are garbage collected.
func plainLeaks(t *testing.T, path string, format readers.Format) bool {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	func() {
		defer func() { recover() }()
		_, tbl, err := plainRowsMem(t, path, format, mem)
		if err == nil {
			tbl.Release()
		}
	}()
	return mem.CurrentAlloc() != 0
}

func plainRowsMem(t *testing.T, path string, format readers.Format, mem memory.Allocator) (int64, arrow.Table, error) {
	t.Helper()
	switch format {
	case readers.FormatParquet:
		r, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(memory.NewGoAllocator())))
		if err != nil {
			return 0, nil, err
		}
		defer r.Close()
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			return 0, nil, err
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			return 0, nil, err
		}
		return tbl.NumRows(), tbl, nil
	case readers.FormatIPCFile:
		f, err := os.Open(path)
		if err != nil {
			return 0, nil, err
		}
		defer f.Close()
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
		if err != nil {
			return 0, nil, err
		}
		defer r.Close()
		var recs []arrow.RecordBatch
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.RecordBatchAt(i)
			if err != nil {
				return 0, nil, err
			}
			recs = append(recs, rec)
		}
		tbl := array.NewTableFromRecords(r.Schema(), recs)
		for _, rec := range recs {
			rec.Release()
		}
		return tbl.NumRows(), tbl, nil
	case readers.FormatIPCStream:
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, nil, err
		}
		r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(mem))
		if err != nil {
			return 0, nil, err
		}
		defer r.Release()
		var recs []arrow.RecordBatch
		for r.Next() {
			rec := r.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
		if err := r.Err(); err != nil {
			return 0, nil, err
		}
		tbl := array.NewTableFromRecords(r.Schema(), recs)
		for _, rec := range recs {
			rec.Release()
		}
		return tbl.NumRows(), tbl, nil
	}
	t.Fatalf("no plain reader for %s", format)
	return 0, nil, nil
}

// readAll reads every unit of a source and returns the batches as a table.
func readAll(t *testing.T, ctx context.Context, src readers.Source) (arrow.Table, error) {
	t.Helper()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, u := range src.Units() {
		var rows int64
		err := src.ReadUnit(ctx, u.Index, func(rec arrow.RecordBatch) error {
			if !rec.Schema().Equal(src.Schema()) {
				t.Errorf("batch schema %s differs from Schema() %s", rec.Schema(), src.Schema())
			}
			rows += rec.NumRows()
			rec.Retain()
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if u.Rows >= 0 && rows != u.Rows {
			t.Errorf("unit %d: %d rows; Units() said %d", u.Index, rows, u.Rows)
		}
	}
	return array.NewTableFromRecords(src.Schema(), recs), nil
}

func tablesEqual(a, b arrow.Table) bool {
	if a.NumRows() != b.NumRows() || a.NumCols() != b.NumCols() {
		return false
	}
	for i := 0; i < int(a.NumCols()); i++ {
		ca, cb := a.Column(i).Data(), b.Column(i).Data()
		if isINT96Pair(ca.DataType(), cb.DataType()) {
			// the loader reads INT96 as microseconds, arrow-go as nanoseconds
			cb = nanosToMicros(cb)
			defer cb.Release()
		}
		if !arrow.TypeEqual(ca.DataType(), cb.DataType()) {
			return false
		}
		if ca.Len() == 0 {
			continue
		}
		x, err1 := array.Concatenate(ca.Chunks(), memory.DefaultAllocator)
		y, err2 := array.Concatenate(cb.Chunks(), memory.DefaultAllocator)
		if err1 != nil || err2 != nil { // arrow-go cannot concatenate unions
			if x != nil {
				x.Release()
			}
			if y != nil {
				y.Release()
			}
			if !array.ChunkedEqual(ca, cb) {
				return false
			}
			continue
		}
		eq := array.Equal(x, y) || array.ApproxEqual(x, y, array.WithNaNsEqual(true), array.WithAbsTolerance(0))
		x.Release()
		y.Release()
		if !eq {
			return false
		}
	}
	return true
}

func TestCorpusValidFiles(t *testing.T) {
	var paths []string
	for _, dir := range []string{"parquet-testing/data", "arrow-testing/data/arrow-ipc-stream/integration"} {
		root := corpusDir(t, dir)
		files, err := readers.Discover(context.Background(), []string{root}, readers.WithExclude("*.csv"))
		if err != nil {
			t.Fatalf("Discover(%s) = %v", root, err)
		}
		for _, f := range files {
			paths = append(paths, f.Path)
		}
		// encrypted files have no known extension: name them
		matches, _ := filepath.Glob(filepath.Join(root, "*.encrypted"))
		paths = append(paths, matches...)
	}
	if len(paths) < 50 {
		t.Fatalf("only %d corpus files found", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			ctx := context.Background()
			f := readers.File{Path: path}
			if strings.HasSuffix(path, ".encrypted") {
				f.Format = readers.FormatParquet
			}
			src, err := readers.Open(ctx, f, readers.WithAllocator(mem), readers.WithBatchBytes(64<<10))
			var got arrow.Table
			if err == nil {
				got, err = readAll(t, ctx, src)
				src.Close()
			}
			format := f.Format
			if src != nil {
				format = src.File().Format
			}
			defer func() {
				if got != nil {
					got.Release()
				}
				if n := mem.CurrentAlloc(); n != 0 && !plainLeaks(t, path, format) {
					t.Errorf("%d bytes still allocated after release (arrow-go's plain reader leaks nothing here)", n)
				}
			}()
			if why, known := knownUnreadable[filepath.Base(path)]; known {
				if err == nil {
					t.Fatalf("read fine; the test expects it to fail (%s): update knownUnreadable", why)
				}
				if !errors.Is(err, readers.ErrCorrupt) || !strings.Contains(err.Error(), path) {
					t.Errorf("error %q: want ErrCorrupt naming the file", err)
				}
				if strings.Contains(why, "encrypted") && !errors.Is(err, readers.ErrEncrypted) {
					t.Errorf("error %q: want ErrEncrypted", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read = %v", err)
			}
			n, want, perr := plainRows(t, path, format)
			if exp, ok := beyondArrowGo[filepath.Base(path)]; ok {
				// arrow-go cannot read it: check the values the file's documentation gives.
				if perr == nil {
					want.Release()
				}
				col := got.Column(0).Data().Chunk(0).(*array.Timestamp)
				var vals []string
				for i := 0; i < col.Len(); i++ {
					if col.IsNull(i) {
						vals = append(vals, "null")
					} else {
						vals = append(vals, fmt.Sprint(int64(col.Value(i))))
					}
				}
				if g := strings.Join(vals, " "); g != exp {
					t.Errorf("values = %s; want %s", g, exp)
				}
				return
			}
			if perr != nil {
				t.Fatalf("arrow-go's plain reader fails where ours succeeds: %v", perr)
			}
			defer want.Release()
			if got.NumRows() != n {
				t.Fatalf("rows = %d; arrow-go reads %d", got.NumRows(), n)
			}
			if !tablesEqual(got, want) {
				t.Errorf("values differ from arrow-go's plain reader")
			}
		})
	}
}

// TestCorpusBadFiles runs every corrupt and fuzzer-found file through Open and ReadUnit: each must
// end in an error wrapping ErrCorrupt (or read fine), never a panic or a hang, and leak nothing.
func TestCorpusBadFiles(t *testing.T) {
	type dirFormat struct {
		dir    string
		format readers.Format
	}
	dirs := []dirFormat{
		{"parquet-testing/bad_data", readers.FormatParquet},
		{"arrow-testing/data/parquet/fuzzing", readers.FormatParquet},
		{"arrow-testing/data/parquet/encoding-fuzzing", readers.FormatParquet},
		{"arrow-testing/data/arrow-ipc-stream", readers.FormatIPCStream},
		{"arrow-testing/data/arrow-ipc-file", readers.FormatIPCFile},
	}
	total := 0
	for _, df := range dirs {
		root := corpusDir(t, df.dir)
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".md") {
				continue
			}
			total++
			path := filepath.Join(root, e.Name())
			t.Run(df.dir+"/"+e.Name(), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer func() {
					if n := mem.CurrentAlloc(); n != 0 && !plainLeaks(t, path, df.format) {
						t.Errorf("%d bytes still allocated after the error (arrow-go's plain reader leaks nothing here)", n)
					}
				}()
				ctx := context.Background()
				src, err := readers.Open(ctx, readers.File{Path: path, Format: df.format}, readers.WithAllocator(mem))
				if err == nil {
					var tbl arrow.Table
					tbl, err = readAll(t, ctx, src)
					if tbl != nil {
						tbl.Release()
					}
					src.Close()
				}
				if err == nil {
					return // some fuzz cases are valid files
				}
				if !errors.Is(err, readers.ErrCorrupt) {
					t.Errorf("error %q does not wrap ErrCorrupt", err)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("error %q does not name the file", err)
				}
			})
		}
	}
	if total < 100 {
		t.Errorf("only %d bad files found", total)
	}
}

func isINT96Pair(ours, plain arrow.DataType) bool {
	o, ok1 := ours.(*arrow.TimestampType)
	p, ok2 := plain.(*arrow.TimestampType)
	return ok1 && ok2 && o.Unit == arrow.Microsecond && p.Unit == arrow.Nanosecond && o.TimeZone == p.TimeZone
}

func nanosToMicros(c *arrow.Chunked) *arrow.Chunked {
	var out []arrow.Array
	dt := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: c.DataType().(*arrow.TimestampType).TimeZone}
	for _, ch := range c.Chunks() {
		ts := ch.(*array.Timestamp)
		b := array.NewTimestampBuilder(memory.DefaultAllocator, dt)
		for i := 0; i < ts.Len(); i++ {
			if ts.IsNull(i) {
				b.AppendNull()
				continue
			}
			v := int64(ts.Value(i))
			q := v / 1000
			if v%1000 < 0 {
				q--
			}
			b.Append(arrow.Timestamp(q))
		}
		out = append(out, b.NewArray())
		b.Release()
	}
	res := arrow.NewChunked(dt, out)
	for _, a := range out {
		a.Release()
	}
	return res
}
