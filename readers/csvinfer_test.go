package readers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

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
