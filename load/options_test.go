package load_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/schemamatch"
)

// writeJSONParquet writes rows given as JSON into a Parquet file of the given schema.
func writeJSONParquet(t *testing.T, path string, schema *arrow.Schema, rowsJSON string) {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rowsJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fixture.WriteParquetRecord(path, rec, nil); err != nil {
		t.Fatal(err)
	}
}

var idName = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func withTable(t *testing.T, columns string, sources ...string) (load.Config, string) {
	t.Helper()
	dir, _ := newWarehouse(t, columns)
	cfg := baseConfig(t, memory.DefaultAllocator, sources...)
	cfg.Target = embeddedAt(dir)
	return cfg, dir
}

// column returns one column of the table, ordered by id.
func column(t *testing.T, dir, col string) []any {
	t.Helper()
	rows := scan(t, dir)
	sort.Slice(rows, func(i, j int) bool { return rows[i]["id"].(int64) < rows[j]["id"].(int64) })
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r[col]
	}
	return out
}

func readNDJSON(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line %q is not JSON: %v", path, sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestQuarantineBadCSVRowsAndFiles(t *testing.T) {
	data := t.TempDir()
	csv := filepath.Join(data, "a.csv")
	content := "id,name\n1,one\nSECRET,two\n3,three\n4,four,extra\n5,five\n"
	if err := os.WriteFile(csv, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file whose schema cannot load: its column "other" is not in the table.
	writeJSONParquet(t, filepath.Join(data, "b.parquet"), arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "other", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil), `[{"id": 9, "other": 1}]`)

	cfg, dir := withTable(t, "id BIGINT NOT NULL, name STRING", data)
	cfg.OnError = load.OnErrorQuarantine
	cfg.QuarantineDir = t.TempDir()
	sum, err := load.Run(context.Background(), cfg)
	if !errors.Is(err, load.ErrPartial) {
		t.Fatalf("Run = %v; want ErrPartial (a file failed)", err)
	}
	if sum.Rows != 3 || sum.RowsQuarantined != 2 || sum.RowsRead != 5 || sum.RowsRefused != 0 || len(sum.FailedFiles) != 1 {
		t.Errorf("summary = %+v; want 3 loaded, 2 quarantined, 5 read, 1 failed file", sum)
	}
	if got := column(t, dir, "name"); strings.Join(toStrings(got), ",") != "one,three,five" {
		t.Errorf("names loaded = %v; want one, three, five", got)
	}
	rows := readNDJSON(t, filepath.Join(sum.QuarantineDir, "rows.ndjson"))
	if len(rows) != 2 || rows[0]["line"] != 3.0 || rows[0]["column"] != "id" || rows[1]["line"] != 5.0 || rows[0]["file"] != csv {
		t.Errorf("rows.ndjson = %v; want lines 3 (column id) and 5 of %s", rows, csv)
	}
	if fields, _ := rows[0]["fields"].([]any); len(fields) != 2 || fields[0] != "SECRET" {
		t.Errorf("quarantined row fields = %v; want the raw row, to fix and reload", rows[0]["fields"])
	}
	for _, r := range rows {
		if strings.Contains(r["reason"].(string), "SECRET") {
			t.Errorf("reason %q contains the value", r["reason"])
		}
	}
	files := readNDJSON(t, filepath.Join(sum.QuarantineDir, "files.ndjson"))
	if len(files) != 1 || !strings.HasSuffix(files[0]["path"].(string), "b.parquet") || !strings.Contains(files[0]["error"].(string), `"other"`) {
		t.Errorf("files.ndjson = %v; want b.parquet naming column other", files)
	}
}

func toStrings(v []any) []string {
	out := make([]string, len(v))
	for i, x := range v {
		s, _ := x.(string)
		out[i] = s
	}
	return out
}

func TestSkipFileLoadsTheRest(t *testing.T) {
	data := t.TempDir()
	writeJSONParquet(t, filepath.Join(data, "a.parquet"), idName, `[{"id": 1, "name": "a"}]`)
	writeJSONParquet(t, filepath.Join(data, "b.parquet"), arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String}}, nil), `[{"id": "x"}]`)
	writeJSONParquet(t, filepath.Join(data, "c.parquet"), idName, `[{"id": 3, "name": "c"}]`)
	cfg, dir := withTable(t, "id BIGINT NOT NULL, name STRING", data)

	if _, err := load.Run(context.Background(), cfg); !errors.Is(err, schemamatch.ErrMismatch) || !strings.Contains(err.Error(), "b.parquet") {
		t.Fatalf("Run with --on-error fail = %v; want a mismatch naming b.parquet", err)
	}
	cfg.OnError = load.OnErrorSkipFile
	sum, err := load.Run(context.Background(), cfg)
	if !errors.Is(err, load.ErrPartial) || len(sum.FailedFiles) != 1 || !strings.HasSuffix(sum.FailedFiles[0].Path, "b.parquet") {
		t.Fatalf("Run with skip-file = %v, %+v; want ErrPartial listing b.parquet", err, sum)
	}
	if got := column(t, dir, "id"); len(got) != 2 {
		t.Errorf("ids loaded = %v; want 1 and 3", got)
	}
}

func TestIncludeExcludeAndHivePartitions(t *testing.T) {
	data := t.TempDir()
	writeJSONParquet(t, filepath.Join(data, "region=eu", "day=2024-01-02", "p.parquet"), idName, `[{"id": 1, "name": "a"}]`)
	writeJSONParquet(t, filepath.Join(data, "region=us", "day=2024-01-03", "p.parquet"), idName, `[{"id": 2, "name": "b"}]`)
	writeJSONParquet(t, filepath.Join(data, "region=us", "day=2024-01-03", "skip.parquet"), idName, `[{"id": 3, "name": "c"}]`)
	if err := os.WriteFile(filepath.Join(data, "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, dir := withTable(t, "id BIGINT NOT NULL, name STRING, region STRING, day DATE", data)
	cfg.Include = []string{"**/*.parquet"}
	cfg.Exclude = []string{"**/skip.parquet"}
	sum := run(t, cfg)
	if sum.Files != 2 || sum.Rows != 2 {
		t.Errorf("summary = %+v; want 2 files and rows", sum)
	}
	if got := column(t, dir, "region"); strings.Join(toStrings(got), ",") != "eu,us" {
		t.Errorf("region = %v; want eu, us from the directories", got)
	}
	if got := column(t, dir, "day"); len(got) != 2 || got[0] != int64(19724) || got[1] != int64(19725) {
		t.Errorf("day = %v; want 2024-01-02 and 2024-01-03 as DATE", got)
	}
}

func TestStrictModeRefusesCasts(t *testing.T) {
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 10, 10); err != nil {
		t.Fatal(err)
	}
	cfg, _ := withTable(t, fixture.TableColumns, src)
	cfg.SchemaMode = schemamatch.ModeStrict
	_, err := load.Run(context.Background(), cfg)
	var me *schemamatch.MismatchError
	if !errors.As(err, &me) || len(me.Problems) < 5 {
		t.Fatalf("strict load = %v; want one MismatchError listing every cast column", err)
	}
	for _, col := range []string{`"s"`, `"ts"`, `"dec"`, `"i16"`} {
		if !strings.Contains(err.Error(), col) {
			t.Errorf("strict error does not name column %s:\n%v", col, err)
		}
	}
}

func TestRescueColumnNamesEachFile(t *testing.T) {
	data := t.TempDir()
	extra := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "Name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	a, b := filepath.Join(data, "a.parquet"), filepath.Join(data, "b.parquet")
	writeJSONParquet(t, a, extra, `[{"id": 1, "Name": "x", "note": "hello"}]`)
	writeJSONParquet(t, b, extra, `[{"id": 2, "Name": "y", "note": "world"}]`)
	cfg, dir := withTable(t, "id BIGINT NOT NULL, name STRING, _rescued_data STRING", data)
	cfg.RescueColumn, cfg.CaseInsensitive = "_rescued_data", true
	run(t, cfg)
	if got := column(t, dir, "name"); strings.Join(toStrings(got), ",") != "x,y" {
		t.Errorf("name = %v; want x, y matched case-insensitively", got)
	}
	rescued := column(t, dir, "_rescued_data")
	for i, want := range []string{a, b} {
		var m map[string]any
		if err := json.Unmarshal([]byte(rescued[i].(string)), &m); err != nil {
			t.Fatalf("row %d rescued %v: %v", i, rescued[i], err)
		}
		if m[schemamatch.FilePathKey] != want {
			t.Errorf("row %d rescued %v; want %s = %s", i, m, schemamatch.FilePathKey, want)
		}
	}
	if !strings.Contains(rescued[0].(string), `"note":"hello"`) {
		t.Errorf("row 0 rescued %v; want the note column", rescued[0])
	}
}

func TestCSVDialect(t *testing.T) {
	src := filepath.Join(t.TempDir(), "export.txt.csv")
	content := "1;'semi;colon';02/01/2024 10:30\n2;\\N;03/01/2024 11:00\n3;'it''s';\\N\n"
	if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, dir := withTable(t, "id BIGINT NOT NULL, name STRING, ts TIMESTAMP_NTZ", src)
	cfg.CSV.NoHeader, cfg.CSV.Columns = true, []string{"id", "name", "ts"}
	cfg.CSV.Delimiter, cfg.CSV.Quote = ';', '\''
	cfg.CSV.NullValues, cfg.CSV.TimestampFormat = []string{`\N`}, "02/01/2006 15:04"
	run(t, cfg)
	if got := column(t, dir, "name"); len(got) != 3 || got[0] != "semi;colon" || got[1] != nil || got[2] != "it's" {
		t.Errorf("name = %#v; want semi;colon, null, it's", got)
	}
	ts := column(t, dir, "ts")
	want := time.Date(2024, 1, 2, 10, 30, 0, 0, time.UTC).UnixMicro()
	if len(ts) != 3 || ts[0] != want || ts[2] != nil {
		t.Errorf("ts = %v; want %d first and a null last", ts, want)
	}
}

func TestStalledDecoderFailsItsFile(t *testing.T) {
	data := t.TempDir()
	fifo := filepath.Join(data, "slow.csv")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	writeJSONParquet(t, filepath.Join(data, "ok.parquet"), idName, `[{"id": 1, "name": "a"}]`)
	// The writer sends a header and one row, then stalls with the pipe open.
	release := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		w.WriteString("id,name\n2,b\n")
		<-release
	}()
	defer func() { close(release); <-writerDone }()

	cfg, dir := withTable(t, "id BIGINT NOT NULL, name STRING", data)
	cfg.OnError, cfg.StallTimeout = load.OnErrorSkipFile, 300*time.Millisecond
	sum, err := load.Run(context.Background(), cfg)
	if !errors.Is(err, load.ErrPartial) || len(sum.FailedFiles) != 1 || !strings.Contains(sum.FailedFiles[0].Error, "stalled") {
		t.Fatalf("Run = %v, %+v; want slow.csv failed as stalled", err, sum)
	}
	if got := column(t, dir, "id"); len(got) != 1 {
		t.Errorf("ids = %v; want only the healthy file's row", got)
	}
}

func TestPlanIsADryRun(t *testing.T) {
	data := t.TempDir()
	writeJSONParquet(t, filepath.Join(data, "a.parquet"), idName, `[{"id": 1, "name": "a"}, {"id": 2, "name": null}]`)
	writeJSONParquet(t, filepath.Join(data, "b.parquet"), idName, `[{"id": 3, "name": "c"}]`)
	writeJSONParquet(t, filepath.Join(data, "c.parquet"), arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32}, {Name: "zzz", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
	}, nil), `[{"id": 4, "zzz": 1}]`)
	cfg, dir := withTable(t, "id BIGINT NOT NULL, name STRING, extra DOUBLE", data)
	rep, err := load.Plan(context.Background(), cfg)
	if !errors.Is(err, load.ErrWouldFail) {
		t.Fatalf("Plan = %v; want ErrWouldFail for c.parquet", err)
	}
	if len(rep.Files) != 3 || rep.Rows != 4 || rep.Units != 3 || len(rep.Schemas) != 2 || rep.FailingFiles != 1 || rep.TableFrom != "target" {
		t.Errorf("report = %+v; want 3 files, 4 rows, 3 units, 2 schemas, 1 failing", rep)
	}
	steps := map[string]string{}
	for _, s := range rep.Schemas[0].Steps {
		steps[s.Column] = s.Action
	}
	if !strings.Contains(steps["name"], "large_utf8") || !strings.Contains(steps["extra"], "null") || len(rep.Schemas[0].Files) != 2 {
		t.Errorf("schema 1 steps = %v (files %v); want name cast, extra filled with nulls, 2 files", steps, rep.Schemas[0].Files)
	}
	if p := rep.Schemas[1].Problems; len(p) != 1 || p[0].Column != "zzz" {
		t.Errorf("schema 2 problems = %v; want zzz not in the table (id int32 widens fine)", p)
	}
	if got := len(scan(t, dir)); got != 0 {
		t.Errorf("a dry run wrote %d rows", got)
	}
}
