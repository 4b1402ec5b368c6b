package readers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/memlimit"
	"github.com/loaderproject/loader/readers"
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
	files, err := readers.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	src, err := readers.Open(context.Background(), files[0], readers.WithAllocator(mem), readers.WithTable(table), readers.WithBatchBytes(16))
	if err != nil {
		t.Fatal(err)
	}
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
	if files, err = readers.Discover(context.Background(), []string{filepath.Dir(filepath.Dir(bad))}); err != nil {
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
