package readers_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// rowsOf renders a record's rows as "v|v|v" lines with (null) for nulls.
func rowsOf(rec arrow.RecordBatch) []string {
	var out []string
	for i := 0; i < int(rec.NumRows()); i++ {
		var parts []string
		for _, c := range rec.Columns() {
			parts = append(parts, c.ValueStr(i))
		}
		out = append(out, strings.Join(parts, "|"))
	}
	return out
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zst(b []byte) []byte {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func TestCSV(t *testing.T) {
	table, err := tableschema.ParseColumns("id BIGINT NOT NULL, name STRING, price DECIMAL(6,2), ok BOOLEAN, ts TIMESTAMP, ntz TIMESTAMP_NTZ, day DATE, score DOUBLE, tags ARRAY<INT>, small TINYINT")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		file    string
		content []byte
		table   *tableschema.Schema
		opts    readers.CSVOptions
		schema  string // substring of Schema().String(), optional
		want    []string
		wantErr string
	}{
		{
			name:  "typed by the table, header order differs, empty fields null",
			file:  "a.csv",
			table: table,
			content: []byte("name,id,price,ok,ts,ntz,day,score,tags,small,extra\n" +
				"alice,1,19.9,true,2024-01-02T03:04:05.123456789Z,2024-01-02 03:04:05,2024-01-02,1.5,\"[1,null]\",-128,x\n" +
				",2,,,,,,,,,\n" +
				"\"\",3,,,,,,,,,\"\"\n"),
			schema: "extra:large_utf8",
			want: []string{
				`alice|1|19.90|true|2024-01-02T03:04:05.123456Z|2024-01-02T03:04:05|2024-01-02|1.5|[1,null]|-128|x`,
				`(null)|2|(null)|(null)|(null)|(null)|(null)|(null)|(null)|(null)|(null)`, // unquoted empty text: null
				`|3|(null)|(null)|(null)|(null)|(null)|(null)|(null)|(null)|`,             // quoted "": an empty string
			},
		},
		{
			name:    "quoted fields with delimiters, quotes and newlines; CRLF; BOM",
			file:    "b.csv",
			content: []byte("\xEF\xBB\xBFid,name\r\n1,\"a, \"\"b\"\"\r\nc\"\r\n2,plain\r\n"),
			table:   table,
			want:    []string{"1|a, \"b\"\r\nc", "2|plain"},
		},
		{
			name:    "tsv by extension, comment lines, blank lines",
			file:    "c.tsv",
			content: []byte("id\tname\n# a comment\n\n1\tx y\n"),
			table:   table,
			opts:    readers.CSVOptions{Comment: '#'},
			want:    []string{"1|x y"},
		},
		{
			name:    "custom delimiter, quote and escape",
			file:    "d.csv",
			content: []byte("id;name\n1;'it\\'s; fine'\n"),
			table:   table,
			opts:    readers.CSVOptions{Delimiter: ';', Quote: '\'', Escape: '\\'},
			want:    []string{"1|it's; fine"},
		},
		{
			name:    "null markers, also for strings",
			file:    "e.csv",
			content: []byte("id,name,score\n1,NULL,NA\n2,,3\n"),
			table:   table,
			opts:    readers.CSVOptions{NullValues: []string{"NULL", "NA", ""}, StringNulls: true},
			want:    []string{"1|(null)|(null)", "2|(null)|3"},
		},
		{
			name:    "no header, names given",
			file:    "f.csv",
			content: []byte("1,a\n2,b\n"),
			table:   table,
			opts:    readers.CSVOptions{NoHeader: true, Columns: []string{"id", "name"}},
			want:    []string{"1|a", "2|b"},
		},
		{
			name:    "no header, no names",
			file:    "g.csv",
			content: []byte("1,a\n"),
			opts:    readers.CSVOptions{NoHeader: true},
			schema:  "_c0:int64 _c1:large_utf8",
			want:    []string{"1|a"},
		},
		{
			name:    "timestamp and date layouts",
			file:    "h.csv",
			content: []byte("id,ts,day\n1,02/01/2024 10:00,02.01.2024\n"),
			table:   table,
			opts:    readers.CSVOptions{TimestampFormat: "02/01/2006 15:04", DateFormat: "02.01.2006"},
			want:    []string{"1|2024-01-02T10:00:00Z|2024-01-02"},
		},
		{
			name:    "ragged rows padded",
			file:    "i.csv",
			content: []byte("id,name,score\n1\n2,b,3\n"),
			table:   table,
			opts:    readers.CSVOptions{AllowRagged: true},
			want:    []string{"1|(null)|(null)", "2|b|3"},
		},
		{
			name:    "gzip",
			file:    "j.csv.gz",
			content: gz([]byte("id,name\n1,z\n")),
			table:   table,
			want:    []string{"1|z"},
		},
		{
			name:    "zstd",
			file:    "k.csv.zst",
			content: zst([]byte("id,name\n1,z\n")),
			table:   table,
			want:    []string{"1|z"},
		},
		{
			name:    "inference from the sample",
			file:    "l.csv",
			content: []byte("i,f,b,d,ts,tz,s,e\n1,1.5,true,2024-01-01,2024-01-01 00:00:00,2024-01-01T00:00:00Z,x,\n-2,3,false,2024-12-31,2024-01-01 00:00:01.5,2024-01-01T01:00:00+01:00,007x,\n"),
			schema:  "i:int64 f:float64 b:bool d:date32 ts:timestamp[us] tz:timestamp[us, tz=UTC] s:large_utf8 e:large_utf8",
			want:    []string{"1|1.5|true|2024-01-01|2024-01-01T00:00:00|2024-01-01T00:00:00Z|x|(null)", "-2|3|false|2024-12-31|2024-01-01T00:00:01.5|2024-01-01T00:00:00Z|007x|(null)"},
		},
		{
			name:    "bad value names line and column, not the value",
			file:    "m.csv",
			content: []byte("id,price\n1,1.00\n2,SECRET99\n"),
			table:   table,
			wantErr: `m.csv: line 3, column "price": not a decimal number`,
		},
		{
			name:    "too many fields",
			file:    "n.csv",
			content: []byte("id,name\n1,a\n2,b,SECRET\n"),
			table:   table,
			wantErr: `n.csv: line 3: 3 fields, want 2`,
		},
		{
			name:    "short row without AllowRagged",
			file:    "o.csv",
			content: []byte("id,name\n1\n"),
			table:   table,
			wantErr: `o.csv: line 2: 1 fields, want 2`,
		},
		{
			name:    "unterminated quote",
			file:    "p.csv",
			content: []byte("id,name\n1,\"SECRET\n2,b\n"),
			table:   table,
			wantErr: `p.csv: line 2: a quoted field is not closed`,
		},
		{
			name:    "integer out of range",
			file:    "q.csv",
			content: []byte("id,small\n1,300\n"),
			table:   table,
			wantErr: `line 2, column "small": integer out of range for 8 bits`,
		},
		{
			name:    "bad JSON for an array",
			file:    "r.csv",
			content: []byte("id,tags\n1,\"[1,\"\"x\"\"]\"\n"),
			table:   table,
			wantErr: `line 2, column "tags": not JSON for list`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			path := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(path, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			files, err := readers.Discover(context.Background(), []string{path})
			if err != nil {
				t.Fatal(err)
			}
			opts := []readers.Option{readers.WithAllocator(mem), readers.WithCSV(tt.opts), readers.WithBatchBytes(64)}
			if tt.table != nil {
				opts = append(opts, readers.WithTable(tt.table))
			}
			src, err := readers.Open(context.Background(), files[0], opts...)
			if err == nil {
				defer src.Close()
				if got := schemaString(src.Schema()); tt.schema != "" && !strings.Contains(got, tt.schema) {
					t.Errorf("Schema() = %s; want it to contain %s", got, tt.schema)
				}
				var rows []string
				err = src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
					rows = append(rows, rowsOf(rec)...)
					return nil
				})
				if err == nil && tt.wantErr == "" && strings.Join(rows, "\n") != strings.Join(tt.want, "\n") {
					t.Errorf("rows =\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(tt.want, "\n"))
				}
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("read = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("read = %v; want an error containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q contains a row value", err)
			}
			if !errors.Is(err, readers.ErrBadRow) {
				t.Errorf("error %q does not wrap ErrBadRow", err)
			}
		})
	}
}

func TestCSVOnBadRow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table, _ := tableschema.ParseColumns("id BIGINT, price DECIMAL(4,1)")
	path := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(path, []byte("id,price\n1,1.5\nx,2\n3,123456\n4,\n5,6,7\n"), 0o644)
	var bad []readers.BadRow
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithTable(table),
		readers.WithCSV(readers.CSVOptions{OnBadRow: func(b readers.BadRow) error { bad = append(bad, b); return nil }}))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var rows []string
	if err := src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
		rows = append(rows, rowsOf(rec)...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows, ","); got != "1|1.5,4|(null)" {
		t.Errorf("rows = %s; want 1|1.5,4|(null)", got)
	}
	want := []struct {
		line   int64
		column string
		fields string
	}{{3, "id", "x 2"}, {4, "price", "3 123456"}, {6, "", "5 6 7"}}
	if len(bad) != len(want) {
		t.Fatalf("bad rows = %+v; want %d", bad, len(want))
	}
	for i, w := range want {
		if bad[i].Line != w.line || bad[i].Column != w.column || strings.Join(bad[i].Fields, " ") != w.fields || bad[i].File != path {
			t.Errorf("bad row %d = %+v; want line %d column %q fields %q", i, bad[i], w.line, w.column, w.fields)
		}
	}
	// A second read of the unit hands the same bad rows over again.
	err = src.ReadUnit(context.Background(), 0, func(arrow.RecordBatch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 2*len(want) || fmt.Sprint(bad[len(want):]) != fmt.Sprint(bad[:len(want)]) {
		t.Errorf("bad rows after a second read = %+v; want the first %d again", bad, len(want))
	}
	stop := errors.New("quarantine full")
	src2, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithTable(table),
		readers.WithCSV(readers.CSVOptions{OnBadRow: func(readers.BadRow) error { return stop }}))
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if err := src2.ReadUnit(context.Background(), 0, func(arrow.RecordBatch) error { return nil }); !errors.Is(err, stop) {
		t.Errorf("ReadUnit with a failing OnBadRow = %v; want its error", err)
	}
}

func TestCSVOptionsChecked(t *testing.T) {
	for _, o := range []readers.CSVOptions{
		{Delimiter: '"'},
		{Delimiter: 'é'},
		{Delimiter: '\n'},
		{Quote: '\n'},
		{MaxRecordBytes: -1},
	} {
		if err := o.Check(); err == nil {
			t.Errorf("CSVOptions%+v.Check() = nil; want an error", o)
		}
	}
	path := filepath.Join(t.TempDir(), "a.csv")
	os.WriteFile(path, []byte("a,a\n1,2\n"), 0o644)
	if _, err := readers.Open(context.Background(), readers.File{Path: path}); err == nil || !strings.Contains(err.Error(), `both named "a"`) {
		t.Errorf("Open(duplicate header) = %v", err)
	}
	os.WriteFile(path, nil, 0o644)
	if _, err := readers.Open(context.Background(), readers.File{Path: path, Format: readers.FormatCSV}); !errors.Is(err, readers.ErrCorrupt) {
		t.Errorf("Open(empty CSV) = %v; want ErrCorrupt", err)
	}
}

func TestCSVCorpus(t *testing.T) {
	dir := corpusDir(t, "arrow-testing/data/csv")
	for _, name := range []string{"aggregate_test_100.csv", "aggregate_test_100.csv.gz", "aggregate_test_100_with_dates.csv"} {
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src := openDiscovered(t, filepath.Join(dir, name), readers.WithAllocator(mem))
			defer src.Close()
			rec := collect(t, src, 0)
			defer rec.Release()
			if rec.NumRows() != 100 {
				t.Errorf("rows = %d; want 100", rec.NumRows())
			}
		})
	}
}

func schemaString(s *arrow.Schema) string {
	var parts []string
	for _, f := range s.Fields() {
		parts = append(parts, f.Name+":"+f.Type.String())
	}
	return strings.Join(parts, " ")
}

// TestCSVTruncatedGzip checks that a truncated gzip file fails with ErrCorrupt, and that Open
// already reports corruption the decompressor met while it read the sample, even when the sample
// rows themselves decoded.
func TestCSVTruncatedGzip(t *testing.T) {
	var text bytes.Buffer
	text.WriteString("id,name\n")
	for i := range 2000 {
		fmt.Fprintf(&text, "%d,name %d\n", i, i*7919)
	}
	full := gz(text.Bytes())
	path := filepath.Join(t.TempDir(), "t.csv.gz")
	if err := os.WriteFile(path, full[:len(full)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := readers.Discover(context.Background(), []string{path})
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src, err := readers.Open(context.Background(), files[0], readers.WithAllocator(mem), readers.WithCSV(readers.CSVOptions{InferRows: 1}))
	if err == nil {
		src.Close()
		t.Fatalf("Open(truncated gzip) = nil error; want ErrCorrupt")
	}
	if !errors.Is(err, readers.ErrCorrupt) || !strings.Contains(err.Error(), "t.csv.gz") {
		t.Fatalf("Open(truncated gzip) = %v; want ErrCorrupt naming the file", err)
	}
}

// readCSV opens path with opts and returns its schema and rows in fixture's conventions.
func readCSV(t *testing.T, path string, opts ...readers.Option) (*arrow.Schema, []fixture.Row, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src, err := readers.Open(context.Background(), readers.File{Path: path}, append(opts, readers.WithAllocator(mem))...)
	if err != nil {
		return nil, nil, err
	}
	defer src.Close()
	var rows []fixture.Row
	err = src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
		rows = append(rows, fixture.Rows([]arrow.RecordBatch{rec})...)
		return nil
	})
	return src.Schema(), rows, err
}

// TestCSVInference checks the types inferred without a table, what a table created from the file
// (`--create-table`, `table create --like`) then has, and that the rows load into that table with
// the values they hold.
func TestCSVInference(t *testing.T) {
	const (
		day     = int64(19723) // 2024-01-01
		midnite = day * 86_400_000_000
		hour    = int64(3_600_000_000)
	)
	tests := []struct {
		name    string
		content string
		opts    readers.CSVOptions
		sql     string // the table FromArrow derives
		want    []fixture.Row
	}{
		{
			name: "booleans, dates and timestamps",
			content: "b,d,tz,ntz,mixed\n" +
				"true,2024-01-01,2024-01-01T00:00:00Z,2024-01-01 00:00:00,2024-01-01\n" +
				"FALSE,2024-01-02,2024-01-01T02:00:00+01:00,2024-01-01T01:00:00.5,2024-01-01T01:00\n" +
				"t,1970-01-01,2024-01-01 01:00:00.000001-0100,2024-01-01T00:00,2024-01-01 02:00:00\n",
			sql: "b BOOLEAN, d DATE, tz TIMESTAMP, ntz TIMESTAMP_NTZ, mixed TIMESTAMP_NTZ",
			want: []fixture.Row{
				{"b": true, "d": day, "tz": midnite, "ntz": midnite, "mixed": midnite},
				{"b": false, "d": day + 1, "tz": midnite + hour, "ntz": midnite + hour + 500_000, "mixed": midnite + hour},
				{"b": true, "d": int64(0), "tz": midnite + 2*hour + 1, "ntz": midnite, "mixed": midnite + 2*hour},
			},
		},
		{
			name: "null markers and empty fields do not break inference",
			content: "i,f,b,d,ts,s\n" +
				"1,1.5,true,2024-01-01,2024-01-01T00:00:00Z,x\n" +
				"NULL,NA,NA,NULL,NA,NULL\n" +
				",,,,,\n" +
				"\"\",\"\",\"\",\"\",\"\",\"\"\n" +
				" 7 ,2,false,2024-01-03,2024-01-01T01:00:00Z,y\n",
			opts: readers.CSVOptions{NullValues: []string{"NULL", "NA"}},
			sql:  "i BIGINT, f DOUBLE, b BOOLEAN, d DATE, ts TIMESTAMP, s STRING",
			want: []fixture.Row{
				{"i": int64(1), "f": 1.5, "b": true, "d": day, "ts": midnite, "s": "x"},
				{"i": nil, "f": nil, "b": nil, "d": nil, "ts": nil, "s": nil},
				{"i": nil, "f": nil, "b": nil, "d": nil, "ts": nil, "s": ""}, // an empty text field is text unless "" is a null text
				{"i": nil, "f": nil, "b": nil, "d": nil, "ts": nil, "s": ""},
				{"i": int64(7), "f": 2.0, "b": false, "d": day + 2, "ts": midnite + hour, "s": "y"},
			},
		},
		{
			name:    "layouts decide the zone",
			content: "zoned,local,day\n01/01/2024 10:00 +0100,01/01/2024 10:00,01.01.2024\n",
			opts:    readers.CSVOptions{TimestampFormat: "02/01/2006 15:04 -0700", DateFormat: "02.01.2006"},
			sql:     "zoned TIMESTAMP, local STRING, day DATE",
			want:    []fixture.Row{{"zoned": midnite + 9*hour, "local": "01/01/2024 10:00", "day": day}},
		},
		{
			name:    "a layout without a zone",
			content: "local\n01/01/2024 10:00\n",
			opts:    readers.CSVOptions{TimestampFormat: "02/01/2006 15:04"},
			sql:     "local TIMESTAMP_NTZ",
			want:    []fixture.Row{{"local": midnite + 10*hour}},
		},
		{
			name:    "what is not one type stays text",
			content: "a,b,c,d\n1,true,2024-01-01,yes\n1.5,1,2024-13-01,no\n",
			sql:     "a DOUBLE, b STRING, c STRING, d STRING", // 1 is a number, not a boolean; yes is text
			want: []fixture.Row{
				{"a": 1.0, "b": "true", "c": "2024-01-01", "d": "yes"},
				{"a": 1.5, "b": "1", "c": "2024-13-01", "d": "no"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.csv")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			csv := readers.WithCSV(tt.opts)
			inferred, rows, err := readCSV(t, path, csv)
			if err != nil {
				t.Fatalf("read without a table = %v", err)
			}
			table, err := tableschema.FromArrow(inferred)
			if err != nil {
				t.Fatalf("FromArrow(%s) = %v", inferred, err)
			}
			if got := table.SQL(); got != tt.sql {
				t.Errorf("inferred table = %s; want %s", got, tt.sql)
			}
			if diffs := fixture.DiffRows(rows, tt.want, 10); len(diffs) > 0 {
				t.Errorf("rows read with inferred types differ:\n%s", strings.Join(diffs, "\n"))
			}
			// The load into the table created from the file: parsed straight into its types.
			typed, rows, err := readCSV(t, path, csv, readers.WithTable(table))
			if err != nil {
				t.Fatalf("read with the created table = %v", err)
			}
			if !typed.Equal(table.Arrow()) {
				t.Errorf("schema with the table = %s; want %s", typed, table.Arrow())
			}
			if diffs := fixture.DiffRows(rows, tt.want, 10); len(diffs) > 0 {
				t.Errorf("rows loaded into the created table differ:\n%s", strings.Join(diffs, "\n"))
			}
		})
	}
}

// TestCSVInferenceSample checks that inference reads only its sample, and that a later row that
// does not fit the inferred type is a bad row naming its line and column, not a silent text.
func TestCSVInferenceSample(t *testing.T) {
	var b strings.Builder
	b.WriteString("n,d\n")
	for i := range 50 {
		fmt.Fprintf(&b, "%d,2024-01-%02d\n", i, i%28+1)
	}
	b.WriteString("SECRET,2024-02-01\n")
	path := filepath.Join(t.TempDir(), "f.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	schema, _, err := readCSV(t, path, readers.WithCSV(readers.CSVOptions{InferRows: 10}))
	var re *readers.RowError
	if !errors.As(err, &re) || re.Line != 52 || re.Column != "n" || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("read = %v; want a bad row at line 52, column n, without the value", err)
	}
	if got := schemaString(schema); got != "n:int64 d:date32" {
		t.Errorf("Schema() = %s; want n:int64 d:date32 from the first 10 rows", got)
	}
	schema, rows, err := readCSV(t, path)
	if err != nil || schemaString(schema) != "n:large_utf8 d:date32" || len(rows) != 51 {
		t.Errorf("read with the whole file sampled = %s, %d rows, %v; want n as text, 51 rows", schemaString(schema), len(rows), err)
	}
}

// TestCSVInvalidUTF8: a STRING field whose bytes are not UTF-8 is a bad row naming the file, the
// line and the column (it must not reach the target, which would refuse the whole frame without
// saying where); a BINARY column takes the same bytes as they are.
func TestCSVInvalidUTF8(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	path := filepath.Join(t.TempDir(), "latin1.csv")
	os.WriteFile(path, []byte("id,name\n1,plain\n2,caf\xe9\n3,\"na\xefve, quoted\"\n4,日本\n"), 0o644)
	read := func(columns string, onBad func(readers.BadRow) error) ([]string, error) {
		table, err := tableschema.ParseColumns(columns)
		if err != nil {
			t.Fatal(err)
		}
		src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithTable(table),
			readers.WithCSV(readers.CSVOptions{OnBadRow: onBad}))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		var rows []string
		err = src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
			rows = append(rows, rowsOf(rec)...)
			return nil
		})
		return rows, err
	}

	_, err := read("id BIGINT, name STRING", nil)
	var re *readers.RowError
	if !errors.As(err, &re) || re.File != path || re.Line != 3 || re.Column != "name" || !strings.Contains(re.Reason, "UTF-8") {
		t.Fatalf("STRING column with Latin-1 bytes: err = %v; want a RowError of %s line 3 column name saying UTF-8", err, path)
	}
	var bad []readers.BadRow
	rows, err := read("id BIGINT, name STRING", func(b readers.BadRow) error { bad = append(bad, b); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows, ","); got != "1|plain,4|日本" || len(bad) != 2 || bad[0].Line != 3 || bad[1].Line != 4 || bad[1].Column != "name" {
		t.Errorf("with OnBadRow: rows %s, bad rows %+v; want 1|plain,4|日本 and lines 3 and 4 of column name", got, bad)
	}
	rows, err = read("id BIGINT, name BINARY", nil)
	if err != nil || len(rows) != 4 {
		t.Errorf("BINARY column: rows %q, err %v; want all 4 rows", rows, err)
	}
}
