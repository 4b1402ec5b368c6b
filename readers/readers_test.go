package readers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/memlimit"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testSchema has the types real files carry: nulls everywhere, nested list, struct and map.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "small", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "price", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "point", Type: arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: "y", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), Nullable: true},
	{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// testRecord builds n rows starting at id start, with nulls in every nullable column.
func testRecord(t testing.TB, mem memory.Allocator, start, n int) arrow.RecordBatch {
	t.Helper()
	var b strings.Builder
	b.WriteString("[")
	for i := start; i < start+n; i++ {
		if i > start {
			b.WriteString(",")
		}
		if i%5 == 3 {
			fmt.Fprintf(&b, `{"id":%d,"small":null,"name":null,"score":null,"ok":null,"ts":null,"day":null,"price":null,"tags":null,"point":null,"attrs":null}`, i)
			continue
		}
		fmt.Fprintf(&b, `{"id":%d,"small":%d,"name":"name %d, \"quoted\"","score":%d.5,"ok":%t,"ts":%d,"day":%d,"price":"%d.%02d","tags":["a%d",null],"point":{"x":%d,"y":null},"attrs":[{"key":"k","value":%d}]}`,
			i, i%1000, i, i, i%2 == 0, int64(i)*1_000_003, i%20000, i, i%100, i, i, i)
	}
	b.WriteString("]")
	rec, _, err := array.RecordFromJSON(mem, testSchema, strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	return rec
}

func writeParquet(t testing.TB, path string, recs []arrow.RecordBatch, rowGroupRows int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rowGroupRows))
	w, err := pqarrow.NewFileWriter(testSchema, f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeIPC(t testing.TB, path string, recs []arrow.RecordBatch, stream bool) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if stream {
		w = ipc.NewWriter(f, ipc.WithSchema(recs[0].Schema()))
	} else {
		fw, err := ipc.NewFileWriter(f, ipc.WithSchema(recs[0].Schema()))
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// openDiscovered opens with opts the first file Discover finds at path (a file or a directory). The
// caller closes it.
func openDiscovered(t testing.TB, path string, opts ...readers.Option) readers.Source {
	t.Helper()
	files, err := readers.Discover(context.Background(), []string{path})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("Discover(%s) found no file", path)
	}
	src, err := readers.Open(context.Background(), files[0], opts...)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// collect reads every unit and returns one record of all rows.
func collect(t testing.TB, src readers.Source, maxRows int64) arrow.RecordBatch {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, u := range src.Units() {
		err := src.ReadUnit(context.Background(), u.Index, func(rec arrow.RecordBatch) error {
			if maxRows > 0 && rec.NumRows() > maxRows {
				t.Errorf("batch of %d rows; want at most %d", rec.NumRows(), maxRows)
			}
			rec.Retain()
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			t.Fatalf("ReadUnit(%d) = %v", u.Index, err)
		}
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return concatRecords(t, src.Schema(), recs)
}

// concatRecords returns one record holding the rows of recs, of schema s.
func concatRecords(t testing.TB, s *arrow.Schema, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	tbl := array.NewTableFromRecords(s, recs)
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		c, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(s, cols, tbl.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	gen := memory.NewGoAllocator()
	recs := []arrow.RecordBatch{testRecord(t, gen, 0, 700), testRecord(t, gen, 700, 500)}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	want := concatRecords(t, recs[0].Schema(), recs)
	defer want.Release()

	writeParquet(t, filepath.Join(dir, "t.parquet"), recs, 300)
	writeIPC(t, filepath.Join(dir, "t.arrow"), recs, false)
	writeIPC(t, filepath.Join(dir, "t.arrows"), recs, true)
	writeIPC(t, filepath.Join(dir, "stream-named.arrow"), recs, true)

	tests := []struct {
		file       string
		format     readers.Format
		units      int
		batchBytes int64
	}{
		{file: "t.parquet", format: readers.FormatParquet, units: 5}, // 300+300+100, 300+200
		{file: "t.parquet", format: readers.FormatParquet, units: 5, batchBytes: 4 << 10},
		{file: "t.arrow", format: readers.FormatIPCFile, units: 1},
		{file: "t.arrow", format: readers.FormatIPCFile, units: 2, batchBytes: 1},
		{file: "t.arrows", format: readers.FormatIPCStream, units: 1},
		{file: "t.arrows", format: readers.FormatIPCStream, units: 1, batchBytes: 4 << 10},
		{file: "stream-named.arrow", format: readers.FormatIPCStream, units: 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.file, tt.batchBytes), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			files, err := readers.Discover(context.Background(), []string{filepath.Join(dir, tt.file)})
			if err != nil {
				t.Fatal(err)
			}
			if files[0].Format != tt.format {
				t.Fatalf("format = %s; want %s", files[0].Format, tt.format)
			}
			opts := []readers.Option{readers.WithAllocator(mem)}
			maxRows := int64(0)
			if tt.batchBytes > 0 {
				opts = append(opts, readers.WithBatchBytes(tt.batchBytes))
				maxRows = 200 // 4 KiB batches of rows of well over 20 bytes
			}
			src, err := readers.Open(context.Background(), files[0], opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if got := len(src.Units()); got != tt.units {
				t.Errorf("Units() = %d units; want %d", got, tt.units)
			}
			if tt.format == readers.FormatParquet || tt.format == readers.FormatIPCFile {
				var sum int64
				for _, u := range src.Units() {
					sum += u.Rows
				}
				if sum != 1200 {
					t.Errorf("Units() rows add up to %d; want 1200", sum)
				}
			}
			got := collect(t, src, maxRows)
			defer got.Release()
			if got.NumRows() != 1200 {
				t.Fatalf("rows = %d; want 1200", got.NumRows())
			}
			for i := range want.Columns() {
				if !array.Equal(got.Column(i), want.Column(i)) {
					t.Errorf("column %s differs", want.ColumnName(i))
				}
			}
		})
	}
}

func TestParquetUnitsAndConcurrentReads(t *testing.T) {
	dir := t.TempDir()
	gen := memory.NewGoAllocator()
	rec := testRecord(t, gen, 0, 2000)
	defer rec.Release()
	path := filepath.Join(dir, "wide.parquet")
	writeParquet(t, path, []arrow.RecordBatch{rec}, 250)

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src, err := readers.Open(context.Background(), readers.File{Path: path},
		readers.WithAllocator(mem), readers.WithParquetParallelism(4), readers.WithBatchBytes(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	units := src.Units()
	if len(units) != 8 {
		t.Fatalf("Units() = %d; want 8 row groups", len(units))
	}
	// Each unit is read twice at once, and all units at once: the same rows in the same order.
	var wg sync.WaitGroup
	errs := make([]error, 2*len(units))
	for round := 0; round < 2; round++ {
		for _, u := range units {
			wg.Add(1)
			go func(u readers.Unit, slot int) {
				defer wg.Done()
				var got []int64
				err := src.ReadUnit(context.Background(), u.Index, func(r arrow.RecordBatch) error {
					got = append(got, r.Column(0).(*array.Int64).Int64Values()...)
					return nil
				})
				if err != nil {
					errs[slot] = err
					return
				}
				if int64(len(got)) != u.Rows {
					errs[slot] = fmt.Errorf("unit %d: %d rows; want %d", u.Index, len(got), u.Rows)
				}
				for i, id := range got {
					if id != int64(u.Index*250+i) {
						errs[slot] = fmt.Errorf("unit %d row %d: id %d", u.Index, i, id)
						break
					}
				}
			}(u, round*len(units)+u.Index)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestPreCancelledContext(t *testing.T) {
	dir := t.TempDir()
	gen := memory.NewGoAllocator()
	rec := testRecord(t, gen, 0, 10)
	defer rec.Release()
	writeParquet(t, filepath.Join(dir, "a.parquet"), []arrow.RecordBatch{rec}, 100)
	writeIPC(t, filepath.Join(dir, "a.arrow"), []arrow.RecordBatch{rec}, false)
	writeIPC(t, filepath.Join(dir, "a.arrows"), []arrow.RecordBatch{rec}, true)
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte("a,b\n1,2\n"), 0o644)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := readers.Discover(cancelled, []string{dir}); !errors.Is(err, context.Canceled) {
		t.Errorf("Discover(cancelled) = %v; want context.Canceled", err)
	}
	files, err := readers.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f.Format.String(), func(t *testing.T) {
			if _, err := readers.Open(cancelled, f); !errors.Is(err, context.Canceled) {
				t.Errorf("Open(cancelled) = %v; want context.Canceled", err)
			}
			src, err := readers.Open(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			called := false
			err = src.ReadUnit(cancelled, 0, func(arrow.RecordBatch) error { called = true; return nil })
			if !errors.Is(err, context.Canceled) || called {
				t.Errorf("ReadUnit(cancelled) = %v, called=%t; want context.Canceled before any batch", err, called)
			}
		})
	}
}

func TestReadUnitStopsOnCallbackError(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	rec := testRecord(t, memory.NewGoAllocator(), 0, 1000)
	defer rec.Release()
	path := filepath.Join(dir, "a.parquet")
	writeParquet(t, path, []arrow.RecordBatch{rec}, 1000)
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithBatchBytes(1<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	stop := errors.New("stop")
	calls := 0
	err = src.ReadUnit(context.Background(), 0, func(arrow.RecordBatch) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("ReadUnit = %v after %d calls; want the callback's error after 1", err, calls)
	}
	if err := src.ReadUnit(context.Background(), 5, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Errorf("ReadUnit(no such unit) = nil")
	}
}

func touch(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	rec := testRecord(t, memory.NewGoAllocator(), 0, 3)
	defer rec.Release()
	var pq bytes.Buffer
	{
		w, _ := pqarrow.NewFileWriter(testSchema, &pq, nil, pqarrow.DefaultWriterProps())
		w.Write(rec)
		w.Close()
	}
	csv := []byte("a,b\n1,2\n")
	for _, p := range []string{"b/2.parquet", "b/10.parquet", "a.parquet", "year=2024/month=01/x.parquet", "year=2024/month=02/x.parquet", "b/sub%20dir=a%2Fb/y.parquet"} {
		touch(t, filepath.Join(dir, p), pq.Bytes())
	}
	for _, p := range []string{"c/one.csv", "c/two.tsv", "c/data.txt", "c/README.md", "c/_SUCCESS", "c/.hidden.csv", "_delta_log/0.parquet", ".git/x.parquet", "c/part.parquet.crc", "d/really-parquet.csv", "e/README.md", "e/_SUCCESS", "e/.keep"} {
		content := csv
		if strings.HasSuffix(p, ".parquet") || strings.HasPrefix(filepath.Base(p), "really") {
			content = pq.Bytes()
		}
		touch(t, filepath.Join(dir, p), content)
	}
	rel := func(files []readers.File) []string {
		var out []string
		for _, f := range files {
			r, _ := filepath.Rel(dir, f.Path)
			out = append(out, filepath.ToSlash(r)+":"+f.Format.String())
		}
		return out
	}
	j := func(p string) string { return filepath.Join(dir, p) }
	tests := []struct {
		name    string
		sources []string
		opts    []readers.DiscoverOption
		want    []string
		wantErr error
	}{
		{name: "directory, lexical, hidden and metadata skipped", sources: []string{dir}, want: []string{
			"a.parquet:parquet", "b/10.parquet:parquet", "b/2.parquet:parquet", "b/sub%20dir=a%2Fb/y.parquet:parquet",
			"c/one.csv:csv", "c/two.tsv:csv", "d/really-parquet.csv:parquet",
			"year=2024/month=01/x.parquet:parquet", "year=2024/month=02/x.parquet:parquet"}},
		{name: "glob with **", sources: []string{j("**/*.parquet")}, want: []string{
			"a.parquet:parquet", "b/10.parquet:parquet", "b/2.parquet:parquet", "b/sub%20dir=a%2Fb/y.parquet:parquet",
			"year=2024/month=01/x.parquet:parquet", "year=2024/month=02/x.parquet:parquet"}},
		{name: "sources in order, deduplicated", sources: []string{j("c"), j("a.parquet"), j("c/one.csv"), dir + "/c/../a.parquet"}, want: []string{
			"c/one.csv:csv", "c/two.tsv:csv", "a.parquet:parquet"}},
		{name: "explicit hidden file is taken", sources: []string{j("c/.hidden.csv")}, want: []string{"c/.hidden.csv:csv"}},
		{name: "include and exclude", sources: []string{dir}, opts: []readers.DiscoverOption{readers.WithInclude("*.parquet"), readers.WithExclude("year=2024/month=02/**", "b/*")},
			want: []string{"a.parquet:parquet", "b/sub%20dir=a%2Fb/y.parquet:parquet", "year=2024/month=01/x.parquet:parquet"}},
		{name: "forced format", sources: []string{j("c/data.txt")}, opts: []readers.DiscoverOption{readers.WithFormat(readers.FormatCSV)}, want: []string{"c/data.txt:csv"}},
		{name: "explicit unknown format", sources: []string{j("c/data.txt")}, wantErr: readers.ErrUnknownFormat},
		{name: "missing file", sources: []string{j("nope.parquet")}, wantErr: readers.ErrNoFiles},
		{name: "glob matching nothing", sources: []string{j("*.orc")}, wantErr: readers.ErrNoFiles},
		{name: "directory of nothing loadable", sources: []string{j("c"), j("e")}, wantErr: readers.ErrNoFiles},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := readers.Discover(context.Background(), tt.sources, tt.opts...)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Discover = %v; want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Discover = %v", err)
			}
			if got := rel(files); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("Discover =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
	t.Run("no-match error names the source", func(t *testing.T) {
		_, err := readers.Discover(context.Background(), []string{j("*.orc")})
		if err == nil || !strings.Contains(err.Error(), "*.orc") {
			t.Errorf("Discover = %v; want it to name the glob", err)
		}
	})
	t.Run("hive partitions", func(t *testing.T) {
		files, err := readers.Discover(context.Background(), []string{dir}, readers.WithInclude("**/y.parquet", "year=*/**"))
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(files[0].Partitions, files[1].Partitions, files[2].Partitions)
		if want := "[{sub dir a/b}] [{year 2024} {month 01}] [{year 2024} {month 02}]"; got != want {
			t.Errorf("partitions = %s; want %s", got, want)
		}
	})
}

func TestPartitionColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	touch(t, filepath.Join(dir, "year=2024/region=eu/day=2024-03-01/f.csv"), []byte("id\n1\n2\n"))
	touch(t, filepath.Join(dir, "year=__HIVE_DEFAULT_PARTITION__/region=us/day=2024-03-02/f.csv"), []byte("id\n3\n"))
	table, err := tableschema.ParseColumns("id BIGINT, year INT, day DATE")
	if err != nil {
		t.Fatal(err)
	}
	files, err := readers.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		src, err := readers.Open(context.Background(), f, readers.WithAllocator(mem), readers.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		if got := src.Schema().String(); !strings.Contains(got, "year: type=int32") || !strings.Contains(got, "region: type=large_utf8") || !strings.Contains(got, "day: type=date32") {
			t.Errorf("schema = %s", got)
		}
		rec := collect(t, src, 0)
		for i := 0; i < int(rec.NumRows()); i++ {
			var parts []string
			for _, c := range rec.Columns() {
				parts = append(parts, c.ValueStr(i))
			}
			lines = append(lines, strings.Join(parts, " "))
		}
		rec.Release()
		src.Close()
	}
	want := "1 2024 eu 2024-03-01|2 2024 eu 2024-03-01|3 (null) us 2024-03-02"
	if got := strings.Join(lines, "|"); got != want {
		t.Errorf("rows = %s; want %s", got, want)
	}
}

// TestPartitionColumnTypes reads partition values of every kind of table column: each batch holds
// the value (or a null) in every row, typed by the table, and nothing leaks.
func TestPartitionColumnTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	parts := []string{"a=1.5", "b=2024-01-02T03:04:05Z", "c=true", "d=" + url.PathEscape("[1,null]"), "e=2.5", "f=xyz",
		"g=" + url.PathEscape(`[{"key":"k","value":1}]`), "h=" + url.PathEscape(`{"x":3}`), "n=" + readers.HiveNull, "f.csv"}
	touch(t, filepath.Join(append([]string{dir}, parts...)...), []byte("id\n1\n2\n3\n"))
	table, err := tableschema.ParseColumns("id BIGINT, a DECIMAL(5,2), b TIMESTAMP, c BOOLEAN, d ARRAY<INT>, e DOUBLE, f BINARY, g MAP<STRING, INT>, h STRUCT<x: INT>, n ARRAY<INT>")
	if err != nil {
		t.Fatal(err)
	}
	src := openDiscovered(t, dir, readers.WithAllocator(mem), readers.WithTable(table), readers.WithBatchBytes(16))
	defer src.Close()
	rec := collect(t, src, 1) // a batch per row: the values are repeated for each
	defer rec.Release()
	if err := array.ValidateRecordFull(rec); err != nil {
		t.Fatalf("partition columns invalid: %v", err)
	}
	want := []string{"", "1.50", "2024-01-02T03:04:05Z", "true", "[1,null]", "2.5", "eHl6" /* xyz */, `[{"key":"k","value":1}]`, `{"x":3}`, "(null)"}
	for i, f := range table.Fields {
		col := rec.Column(i)
		if !arrow.TypeEqual(col.DataType(), f.Type.Arrow()) {
			t.Errorf("column %s is %s; want %s", f.Name, col.DataType(), f.Type.Arrow())
		}
		if i == 0 {
			continue
		}
		for row := 0; row < col.Len(); row++ {
			if got := col.ValueStr(row); got != want[i] {
				t.Errorf("column %s row %d = %s; want %s", f.Name, row, got, want[i])
			}
		}
	}
	// A value its column cannot take fails Open, naming it, and leaks nothing.
	bad := filepath.Join(t.TempDir(), "d=oops", "f.csv")
	touch(t, bad, []byte("id\n1\n"))
	files, err := readers.Discover(context.Background(), []string{filepath.Dir(filepath.Dir(bad))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readers.Open(context.Background(), files[0], readers.WithAllocator(mem), readers.WithTable(table)); err == nil || !strings.Contains(err.Error(), "partition d=oops") {
		t.Errorf("Open(d=oops) = %v; want an error naming the partition", err)
	}
}

func TestFormatNames(t *testing.T) {
	for _, f := range []readers.Format{readers.FormatParquet, readers.FormatCSV, readers.FormatIPCFile, readers.FormatIPCStream} {
		got, err := readers.ParseFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	if _, err := readers.ParseFormat("orc"); !errors.Is(err, readers.ErrUnknownFormat) {
		t.Errorf("ParseFormat(orc) = %v", err)
	}
}

func TestGuardedAllocation(t *testing.T) {
	// A valid file read with an allocation cap smaller than its buffers fails cleanly with
	// ErrCorrupt rather than allocating: the same path a corrupt length takes.
	dir := t.TempDir()
	rec := testRecord(t, memory.NewGoAllocator(), 0, 5000)
	defer rec.Release()
	for _, tt := range []struct {
		name  string
		write func(path string)
		typed bool // the error wraps the *memlimit.Error
	}{
		// (Not Parquet: a row group's cap is raised to twice its largest page, whose size the page
		// headers give and WithMaxPageBytes bounds, so a valid file reads under any cap; see
		// TestMaxPageBytes.)
		{"a.arrow", func(p string) { writeIPC(t, p, []arrow.RecordBatch{rec}, false) }, true},
		// arrow-go v18.8.0's stream message reader recovers the refusal itself and keeps only its
		// text (%v), so the error names the limit but does not wrap it.
		{"a.arrows", func(p string) { writeIPC(t, p, []arrow.RecordBatch{rec}, true) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			tt.write(path)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithMaxAllocation(1024))
			if err == nil {
				err = src.ReadUnit(context.Background(), 0, func(arrow.RecordBatch) error { return nil })
				src.Close()
			}
			if !errors.Is(err, readers.ErrCorrupt) || !strings.Contains(err.Error(), "over the 1024-byte limit") {
				t.Fatalf("read with a 1 KiB cap = %v; want ErrCorrupt naming the limit", err)
			}
			var lim *memlimit.Error
			if tt.typed && (!errors.As(err, &lim) || lim.Limit != 1024 || lim.Mode != memlimit.PerAllocation) {
				t.Errorf("read with a 1 KiB cap = %v; want it to wrap the 1024-byte *memlimit.Error", err)
			}
		})
	}
}

// TestStalledDecoderStopsWithContext feeds an IPC stream through a pipe that stalls halfway
// through a batch: ReadUnit must return the context's error instead of hanging, and the abandoned
// decode must release everything once the pipe closes.
func TestStalledDecoderStopsWithContext(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stalled.arrows")
	rec := testRecord(t, memory.NewGoAllocator(), 0, 2000)
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	w.Write(rec)
	w.Close()
	full := buf.Bytes()
	// Open reads the schema from a plain file; the file is then replaced by a pipe for ReadUnit.
	touch(t, path, full)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		src.Close()
		t.Skipf("no named pipes: %v", err)
	}
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(full[:len(full)/2]) // the schema and part of a batch, then a stall
		<-release
		f.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = src.ReadUnit(ctx, 0, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadUnit on a stalled stream = %v; want the deadline error naming the file", err)
	}
	close(release)
	if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
		r.Close() // unblocks the writer if ReadUnit never opened the pipe
	}
	<-done
	src.Close()
	goleak.VerifyNone(t)
	// the abandoned step has ended (no goroutine is left), so its cleanup has run
	mem.AssertSize(t, 0)
}

// TestParquetBatchesBoundedByDecodedBytes writes a column whose values repeat (dictionary pages:
// tiny on disk, large decoded): batches must still be about WithBatchBytes, whatever the footer
// suggests.
func TestParquetBatchesBoundedByDecodedBytes(t *testing.T) {
	long := strings.Repeat("x", 1000)
	s := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), s)
	for i := 0; i < 50_000; i++ {
		b.Field(0).(*array.StringBuilder).Append(long)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "dict.parquet")
	f, _ := os.Create(path)
	w, err := pqarrow.NewFileWriter(s, f, parquet.NewWriterProperties(parquet.WithDictionaryDefault(true), parquet.WithMaxRowGroupLength(50_000)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	w.Write(rec)
	w.Close()
	st, _ := os.Stat(path)
	if st.Size() > 1<<20 {
		t.Fatalf("file is %d bytes; the test wants a small dictionary-encoded file", st.Size())
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const target = 256 << 10
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithBatchBytes(target))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var rows, batches int64
	err = src.ReadUnit(context.Background(), 0, func(r arrow.RecordBatch) error {
		rows += r.NumRows()
		batches++
		if size := int64(r.Column(0).Data().Buffers()[2].Len()); size > 4*target+4096*1000 {
			t.Errorf("batch %d holds %d bytes of strings; target %d", batches, size, target)
		}
		return nil
	})
	if err != nil || rows != 50_000 {
		t.Fatalf("ReadUnit = %v after %d rows", err, rows)
	}
	if batches < 50_000*1000/(4*target) {
		t.Errorf("%d batches for %d MB of strings at a %d-byte target", batches, 50, target)
	}
}

// TestCorruptLengthAllocatesLittle: a four-byte "stream" whose first word reads as an 800 MB
// message length must fail without allocating it (arrow-go's ipc.NewReader ignores its own size
// limits; the readers bound messages by the file size).
func TestCorruptLengthAllocatesLittle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.arrows")
	touch(t, path, []byte("0000"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readers.Open(context.Background(), readers.File{Path: path, Format: readers.FormatIPCStream})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, readers.ErrCorrupt) {
		t.Errorf("Open(tiny stream) = %v; want ErrCorrupt", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("Open(4-byte stream) allocated %d bytes", n)
	}
}

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

// writeLargePage writes a Parquet file whose string column s is one zstd page of about 2.8 MiB
// uncompressed (no dictionary), which compresses to far less, as real files with huge pages do. It
// returns the values written, null for every seventh row.
func writeLargePage(t *testing.T, path string) []*string {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewStringBuilder(memory.NewGoAllocator())
	defer b.Release()
	var want []*string
	for i := range 3000 {
		if i%7 == 3 {
			b.AppendNull()
			want = append(want, nil)
			continue
		}
		v := fmt.Sprintf("%06d:%s", i, strings.Repeat("x", 1100))
		b.Append(v)
		want = append(want, &v)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(64<<20),
		parquet.WithBatchSize(1<<20), parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(1<<20))
	if err := fixture.WriteParquetRecord(path, rec, props); err != nil {
		t.Fatal(err)
	}
	return want
}

func TestMaxPageBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "large-page.parquet")
	want := writeLargePage(t, path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 1<<20 {
		t.Fatalf("the file takes %d bytes; want it well compressed (under 1 MiB)", st.Size())
	}
	const mib = 1 << 20

	read := func(t *testing.T, opts ...readers.Option) ([]*string, error) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src, err := readers.Open(context.Background(), readers.File{Path: path}, append(opts, readers.WithAllocator(mem))...)
		if err != nil {
			return nil, err
		}
		defer src.Close()
		var got []*string
		for _, u := range src.Units() {
			err := src.ReadUnit(context.Background(), u.Index, func(rec arrow.RecordBatch) error {
				col := rec.Column(0).(*array.String)
				for i := 0; i < col.Len(); i++ {
					if col.IsNull(i) {
						got = append(got, nil)
						continue
					}
					v := col.Value(i)
					got = append(got, &v)
				}
				return nil
			})
			if err != nil {
				return got, err
			}
		}
		return got, nil
	}
	same := func(t *testing.T, got []*string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("read %d rows; want %d", len(got), len(want))
		}
		for i := range want {
			if (got[i] == nil) != (want[i] == nil) || got[i] != nil && *got[i] != *want[i] {
				t.Fatalf("row %d = %v; want %v", i, got[i], want[i])
			}
		}
	}

	t.Run("over the page limit", func(t *testing.T) {
		for _, crc := range []bool{true, false} {
			_, err := read(t, readers.WithMaxPageBytes(mib), readers.WithVerifyChecksums(crc))
			var pe *readers.PageTooLargeError
			if !errors.As(err, &pe) {
				t.Fatalf("read with a 1 MiB page limit (checksums %t) = %v; want a *PageTooLargeError", crc, err)
			}
			if pe.Path != path || pe.Column != "s" || pe.RowGroup != 0 || pe.Limit != mib || pe.Size < 2*mib || pe.Size > 4*mib {
				t.Errorf("PageTooLargeError = %+v; want {%s s 0 ~2.8MiB %d}", *pe, path, mib)
			}
			if errors.Is(err, readers.ErrCorrupt) {
				t.Errorf("read = %v; want it not to be ErrCorrupt (the file is valid)", err)
			}
			var fe *readers.FileError
			if !errors.As(err, &fe) || fe.Path != path || fe.Unit != 0 {
				t.Errorf("read = %v; want it wrapped in a *FileError for row group 0", err)
			}
			wantMsg := fmt.Sprintf(`%s: column "s" row group 0: page of %d bytes exceeds the page limit of %d bytes`, path, pe.Size, mib)
			if err.Error() != wantMsg {
				t.Errorf("Error() = %q; want %q", err, wantMsg)
			}
		}
	})
	t.Run("within the page limit, over the allocation cap", func(t *testing.T) {
		// The page's values need buffers over a 1 MiB cap: a page the limit lets through raises
		// the cap for its row group rather than failing as a corrupt length.
		for _, opts := range [][]readers.Option{
			{readers.WithMaxAllocation(mib)},
			{readers.WithMaxAllocation(mib), readers.WithMaxPageBytes(4 * mib)},
		} {
			got, err := read(t, opts...)
			if err != nil {
				t.Fatalf("read with a 1 MiB allocation cap = %v", err)
			}
			same(t, got)
		}
	})
	t.Run("default page limit", func(t *testing.T) {
		got, err := read(t)
		if err != nil {
			t.Fatalf("read = %v", err)
		}
		same(t, got)
	})
	t.Run("bad values keep the default", func(t *testing.T) {
		for _, n := range []int64{0, -1} {
			got, err := read(t, readers.WithMaxPageBytes(n))
			if err != nil {
				t.Fatalf("read with WithMaxPageBytes(%d) = %v", n, err)
			}
			same(t, got)
		}
	})
}

// encodedColumn is a column of an encoding or view type and its rows as JSON.
type encodedColumn struct {
	name string
	dt   arrow.DataType
	json string // 6 rows
}

var encodedColumns = []encodedColumn{
	{"ree_int", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64), `[5, 5, 5, null, null, 7]`},
	{"ree_str", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int16, arrow.BinaryTypes.String), `["a", "a", null, "bb", "bb", "bb"]`},
	{"ree_view", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.StringView),
		`["a string longer than twelve bytes", "a string longer than twelve bytes", "short", null, "short", "short"]`},
	{"ree_struct", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true})),
		`[{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, null, {"a": null, "b": "y"}, {"a": null, "b": "y"}, {"a": 2, "b": null}]`},
	{"ree_list", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.ListOf(arrow.PrimitiveTypes.Int64)),
		`[[1, 2], [1, 2], [], null, [null, 3], [null, 3]]`},
	{"lv", arrow.ListViewOf(arrow.PrimitiveTypes.Int32), ``}, // built by hand: views out of order, overlapping
	{"llv", arrow.LargeListViewOf(arrow.BinaryTypes.String), `[["a", null], null, [], ["b"], ["c", "d", "e"], null]`},
	{"lv_view", arrow.ListViewOf(arrow.BinaryTypes.StringView), `[["x", "a string longer than twelve bytes"], null, [null], [], ["y"], ["z"]]`},
	{"sv", arrow.BinaryTypes.StringView, `["", "short", "a string longer than twelve bytes", null, "ü", "another string of some length"]`},
	{"bv", arrow.BinaryTypes.BinaryView, `["AA==", null, "AAECAwQFBgcICQoLDA0ODxA=", "", "/w==", null]`},
	{"st", arrow.StructOf(
		arrow.Field{Name: "s", Type: arrow.BinaryTypes.StringView, Nullable: true},
		arrow.Field{Name: "l", Type: arrow.LargeListViewOf(arrow.PrimitiveTypes.Float64), Nullable: true}),
		`[{"s": "p", "l": [1.5]}, null, {"s": null, "l": null}, {"s": "a string longer than twelve bytes", "l": []}, {"s": "q", "l": [2, null]}, {"s": "r", "l": [3]}]`},
	{"m", arrow.MapOf(arrow.BinaryTypes.String, arrow.ListViewOf(arrow.PrimitiveTypes.Int64)),
		`[[{"key": "k", "value": [1, 2]}], null, [], [{"key": "a", "value": null}, {"key": "b", "value": [3]}], [{"key": "c", "value": []}], null]`},
	{"ls", arrow.ListOf(arrow.BinaryTypes.StringView), `[["a", null], null, [], ["a string longer than twelve bytes"], ["b"], ["c"]]`},
	{"dict_view", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.StringView}, ``}, // by hand
	// (arrow-go v18.8.0's IPC writer cannot write a run-end encoded list element.)
	{"st_ree", arrow.StructOf(arrow.Field{Name: "r", Type: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String), Nullable: true}),
		`[{"r": "a"}, {"r": "a"}, null, {"r": null}, {"r": "b"}, {"r": "b"}]`},
}

// listViewColumn builds a list_view<int32> whose views are out of order and overlap, with nulls:
// rows [3 4], null, [1 2 3], [], [0], [2 3 4].
func listViewColumn(t *testing.T, mem memory.Allocator) arrow.Array {
	t.Helper()
	child, _, err := array.FromJSON(mem, arrow.PrimitiveTypes.Int32, strings.NewReader(`[10, null, 12, 13, 14]`))
	if err != nil {
		t.Fatal(err)
	}
	defer child.Release()
	offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{3, 99, 1, 0, 0, 2}))
	sizes := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{2, 0, 3, 0, 1, 3}))
	valid := memory.NewBufferBytes([]byte{0b111101})
	d := array.NewData(arrow.ListViewOf(arrow.PrimitiveTypes.Int32), 6, []*memory.Buffer{valid, offsets, sizes}, []arrow.ArrayData{child.Data()}, 1, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// dictViewColumn builds a dictionary<int8, string_view>: rows "a string longer than twelve bytes",
// null, "y", "a string longer than twelve bytes", "y", "z".
func dictViewColumn(t *testing.T, mem memory.Allocator) arrow.Array {
	t.Helper()
	dict, _, err := array.FromJSON(mem, arrow.BinaryTypes.StringView, strings.NewReader(`["y", "a string longer than twelve bytes", "z"]`))
	if err != nil {
		t.Fatal(err)
	}
	defer dict.Release()
	idx, _, err := array.FromJSON(mem, arrow.PrimitiveTypes.Int8, strings.NewReader(`[1, null, 0, 1, 0, 2]`))
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Release()
	return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.StringView}, idx, dict)
}

func encodedRecord(t *testing.T, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(encodedColumns))
	cols := make([]arrow.Array, len(encodedColumns))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range encodedColumns {
		fields[i] = arrow.Field{Name: c.name, Type: c.dt, Nullable: true}
		switch c.name {
		case "lv":
			cols[i] = listViewColumn(t, mem)
			continue
		case "dict_view":
			cols[i] = dictViewColumn(t, mem)
			continue
		}
		a, _, err := array.FromJSON(mem, c.dt, strings.NewReader(c.json))
		if err != nil {
			t.Fatalf("column %s: FromJSON: %v", c.name, err)
		}
		cols[i] = a
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, 6)
}

// TestEncodedColumnsDecoded writes run-end encoded and view columns (nested too, nulls included) as
// Arrow IPC files and streams, and checks that readers hands them out as plain types that
// tableschema maps like `table create --like` and schemamatch loads, value for value.
func TestEncodedColumnsDecoded(t *testing.T) {
	gen := memory.NewGoAllocator()
	rec := encodedRecord(t, gen)
	defer rec.Release()
	// Two batches. (Not a slice: arrow-go v18.8.0's IPC writer miscomputes a sliced list view's
	// offsets.) Decoding sees slices with the small batch size, which decodes a few rows at a time.
	recs := []arrow.RecordBatch{rec, rec}

	// The table as `table create --like` derives it from the file's own schema.
	table, err := tableschema.FromArrow(rec.Schema())
	if err != nil {
		t.Fatalf("FromArrow(%s) = %v", rec.Schema(), err)
	}
	const wantSQL = "ree_int BIGINT, ree_str STRING, ree_view STRING, ree_struct STRUCT<a: INT, b: STRING>, ree_list ARRAY<BIGINT>, " +
		"lv ARRAY<INT>, llv ARRAY<STRING>, lv_view ARRAY<STRING>, sv STRING, bv BINARY, st STRUCT<s: STRING, l: ARRAY<DOUBLE>>, " +
		"m MAP<STRING, ARRAY<BIGINT>>, ls ARRAY<STRING>, dict_view STRING, st_ree STRUCT<r: STRING>"
	if got := table.SQL(); got != wantSQL {
		t.Fatalf("FromArrow() = %s\nwant        %s", got, wantSQL)
	}
	var want []fixture.Row
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			row := fixture.Row{}
			for k, f := range table.Fields {
				row[f.Name] = fixture.Canonical(r.Column(k), i, f.Type)
			}
			want = append(want, row)
		}
	}

	dir := t.TempDir()
	for _, stream := range []bool{false, true} {
		name := "encoded.arrow"
		if stream {
			name = "encoded.arrows"
		}
		path := filepath.Join(dir, name)
		writeIPC(t, path, recs, stream)
		for _, batchBytes := range []int64{64, 8 << 20} {
			t.Run(name, func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				src, err := readers.Open(context.Background(), readers.File{Path: path},
					readers.WithAllocator(mem), readers.WithBatchBytes(batchBytes))
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				if s, err := tableschema.FromArrow(src.Schema()); err != nil || s.SQL() != wantSQL {
					t.Errorf("FromArrow(Schema()) = %v, %v; want %s", s, err, wantSQL)
				}
				for _, f := range src.Schema().Fields() {
					if s := f.Type.String(); strings.Contains(s, "view") || strings.Contains(s, "run_end") {
						t.Errorf("Schema() column %s is %s; want a plain type", f.Name, s)
					}
				}
				plan, err := schemamatch.NewPlan(src.Schema(), table, schemamatch.WithAllocator(mem))
				if err != nil {
					t.Fatalf("NewPlan = %v", err)
				}
				var got []arrow.RecordBatch
				defer func() {
					for _, r := range got {
						r.Release()
					}
				}()
				for _, u := range src.Units() {
					err := src.ReadUnit(context.Background(), u.Index, func(b arrow.RecordBatch) error {
						if !b.Schema().Equal(src.Schema()) {
							t.Errorf("batch schema %s differs from Schema() %s", b.Schema(), src.Schema())
						}
						out, err := plan.Apply(b)
						if err != nil {
							return err
						}
						got = append(got, out)
						return nil
					})
					if err != nil {
						t.Fatalf("ReadUnit(%d) = %v", u.Index, err)
					}
				}
				if diffs := fixture.DiffRows(fixture.Rows(got), want, 10); len(diffs) > 0 {
					t.Errorf("loaded rows differ:\n%s", strings.Join(diffs, "\n"))
				}
			})
		}
	}
}

// TestFileErrorNamesAnObjectOnce: an object's errors begin with its URL, which the file error does
// not repeat.
func TestFileErrorNamesAnObjectOnce(t *testing.T) {
	cause := &objstore.Error{URL: "s3://b/k.parquet", Op: "read bytes 0-9", Code: "NoSuchKey", Kind: objstore.ErrNotFound}
	for _, tt := range []struct {
		err  *readers.FileError
		want string
	}{
		{&readers.FileError{Path: "s3://b/k.parquet", Unit: -1, Err: cause}, "s3://b/k.parquet: read bytes 0-9: NoSuchKey: no such key"},
		{&readers.FileError{Path: "s3://b/k.parquet", Unit: 2, Err: cause}, "s3://b/k.parquet: unit 2: read bytes 0-9: NoSuchKey: no such key"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q; want %q", got, tt.want)
		}
		if !errors.Is(tt.err, objstore.ErrNotFound) {
			t.Errorf("errors.Is(%v, ErrNotFound) = false", tt.err)
		}
	}
}
