package warehouse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

func mustName(t testing.TB, s string) tableschema.TableName {
	t.Helper()
	n, err := tableschema.ParseTableName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustColumns(t testing.TB, s string) *tableschema.Schema {
	t.Helper()
	sch, err := tableschema.ParseColumns(s)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func openWH(t testing.TB, opts ...warehouse.Option) *warehouse.Warehouse {
	t.Helper()
	wh, err := warehouse.Open(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// checkedTable creates table c.s.t of cols in a new warehouse that allocates from the checked
// allocator it returns, which must hold nothing once the test and its deferred releases are done.
func checkedTable(t *testing.T, cols string) (*memory.CheckedAllocator, *warehouse.Table) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem, createTable(t, openWH(t, warehouse.WithAllocator(mem)), "c.s.t", cols)
}

func createTable(t testing.TB, wh *warehouse.Warehouse, name, cols string) *warehouse.Table {
	t.Helper()
	tbl, err := wh.CreateTable(context.Background(), mustName(t, name), mustColumns(t, cols))
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// readLog parses one commit file into a list of single-key objects.
func readLog(t testing.TB, tbl *warehouse.Table, version int64) []map[string]map[string]any {
	t.Helper()
	path := filepath.Join(tbl.Dir(), "_delta_log", fmt.Sprintf("%020d.json", version))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]map[string]any
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(m) != 1 {
			t.Fatalf("%s: line with %d actions", path, len(m))
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func actionsOf(log []map[string]map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, a := range log {
		if v, ok := a[kind]; ok {
			out = append(out, v)
		}
	}
	return out
}

func TestCreateTableVersionZero(t *testing.T) {
	tests := []struct {
		name, cols string
		wantProto  map[string]any
	}{
		{"plain", "id BIGINT NOT NULL, name STRING", map[string]any{"minReaderVersion": json.Number("1"), "minWriterVersion": json.Number("2")}},
		{"ntz top", "id BIGINT, at TIMESTAMP_NTZ", map[string]any{
			"minReaderVersion": json.Number("3"), "minWriterVersion": json.Number("7"),
			"readerFeatures": []any{"timestampNtz"}, "writerFeatures": []any{"timestampNtz"}}},
		{"ntz nested", "id BIGINT, s STRUCT<a: ARRAY<TIMESTAMP_NTZ>>", map[string]any{
			"minReaderVersion": json.Number("3"), "minWriterVersion": json.Number("7"),
			"readerFeatures": []any{"timestampNtz"}, "writerFeatures": []any{"timestampNtz"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := openWH(t)
			before := time.Now().Add(-time.Second)
			tbl := createTable(t, wh, "main.default.t", tt.cols)
			if want := filepath.Join(wh.Dir(), "main", "default", "t"); tbl.Dir() != want {
				t.Errorf("Dir() = %s; want %s", tbl.Dir(), want)
			}
			log := readLog(t, tbl, 0)
			if len(log) != 3 {
				t.Fatalf("version 0 has %d actions; want 3 (commitInfo, protocol, metaData)", len(log))
			}
			ci, pr, md := actionsOf(log, "commitInfo"), actionsOf(log, "protocol"), actionsOf(log, "metaData")
			if len(ci) != 1 || len(pr) != 1 || len(md) != 1 {
				t.Fatalf("version 0 actions = %v; want one commitInfo, protocol and metaData", log)
			}
			if fmt.Sprint(pr[0]) != fmt.Sprint(tt.wantProto) {
				t.Errorf("protocol = %v; want %v", pr[0], tt.wantProto)
			}
			m := md[0]
			if id, _ := m["id"].(string); len(id) != 36 {
				t.Errorf("metaData.id = %v; want a uuid", m["id"])
			}
			if got := fmt.Sprint(m["format"]); got != "map[options:map[] provider:parquet]" {
				t.Errorf("metaData.format = %s", got)
			}
			if got := fmt.Sprint(m["partitionColumns"]); got != "[]" {
				t.Errorf("metaData.partitionColumns = %s", got)
			}
			if got := fmt.Sprint(m["configuration"]); got != "map[]" {
				t.Errorf("metaData.configuration = %s", got)
			}
			if got, want := m["schemaString"], mustColumns(t, tt.cols).DeltaJSON(); got != want {
				t.Errorf("metaData.schemaString = %v; want %v", got, want)
			}
			ct, err := m["createdTime"].(json.Number).Int64()
			if err != nil || time.UnixMilli(ct).Before(before) || time.UnixMilli(ct).After(time.Now().Add(time.Second)) {
				t.Errorf("metaData.createdTime = %v; want about now", m["createdTime"])
			}
			if ci[0]["engineInfo"] != "loader-sink" || ci[0]["operation"] != "CREATE TABLE" {
				t.Errorf("commitInfo = %v", ci[0])
			}

			snap, err := tbl.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version != 0 || snap.ID != m["id"] || len(snap.Files) != 0 || snap.NumRecords != 0 || len(snap.Txns) != 0 {
				t.Errorf("Snapshot() = %+v; want version 0, id %v, empty", snap, m["id"])
			}
			if snap.CreatedTime.UnixMilli() != ct {
				t.Errorf("Snapshot().CreatedTime = %v; want %v", snap.CreatedTime, time.UnixMilli(ct))
			}
			if !snap.Schema.Equal(mustColumns(t, tt.cols)) {
				t.Errorf("Snapshot().Schema = %s; want %s", snap.Schema.SQL(), tt.cols)
			}
		})
	}
}

func TestCreateListDescribe(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh, err := warehouse.Open(filepath.Join(dir, "new", "nested"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"b.s.t", "a.z.t", "a.s.t2", "a.s.t1"}
	for _, n := range names {
		createTable(t, wh, n, "id INT")
	}
	// Clutter that is not a table.
	if err := os.MkdirAll(filepath.Join(wh.Dir(), "a", "s", "not_a_table"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(wh.Dir(), "a", "s", "half", "_delta_log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wh.Dir(), "stray.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := wh.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "[a.s.t1 a.s.t2 a.z.t b.s.t]"
	if fmt.Sprint(got) != want {
		t.Errorf("List() = %v; want %v", got, want)
	}

	// A second Warehouse on the same directory sees the same tables and schema.
	wh2, err := warehouse.Open(wh.Dir())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := wh2.Table(ctx, mustName(t, "a.s.t1"))
	if err != nil {
		t.Fatal(err)
	}
	sch, err := tbl.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sch.SQL() != "id INT" {
		t.Errorf("Schema() = %s; want id INT", sch.SQL())
	}
	if tbl.Name().String() != "a.s.t1" {
		t.Errorf("Name() = %s", tbl.Name())
	}
	again, err := wh2.Table(ctx, mustName(t, "a.s.t1"))
	if err != nil || again != tbl {
		t.Errorf("Table() twice = %p, %v; want the same *Table %p", again, err, tbl)
	}
	rows, version, err := tbl.Count(ctx)
	if err != nil || rows != 0 || version != 0 {
		t.Errorf("Count() = %d, %d, %v; want 0, 0, nil", rows, version, err)
	}
	// The crashed create (a _delta_log without version 0) can be created for real.
	if _, err := wh.CreateTable(ctx, mustName(t, "a.s.half"), mustColumns(t, "x INT")); err != nil {
		t.Errorf("CreateTable over a log without version 0: %v", err)
	}
}

func TestCreateTableErrors(t *testing.T) {
	ctx := context.Background()
	wh := openWH(t)
	createTable(t, wh, "c.s.t", "id INT")
	if _, err := wh.CreateTable(ctx, mustName(t, "c.s.t"), mustColumns(t, "x STRING")); !errors.Is(err, warehouse.ErrTableExists) {
		t.Errorf("CreateTable twice: err = %v; want ErrTableExists", err)
	}
	if _, err := wh.Table(ctx, mustName(t, "c.s.missing")); !errors.Is(err, warehouse.ErrTableNotFound) {
		t.Errorf("Table(missing): err = %v; want ErrTableNotFound", err)
	}
	bad := tableschema.TableName{Catalog: "c", Schema: "../..", Table: "t"}
	if _, err := wh.CreateTable(ctx, bad, mustColumns(t, "x INT")); !errors.Is(err, tableschema.ErrInvalid) {
		t.Errorf("CreateTable(%s): err = %v; want ErrInvalid", bad, err)
	}
	if _, err := wh.Table(ctx, bad); !errors.Is(err, tableschema.ErrInvalid) {
		t.Errorf("Table(%s): err = %v; want ErrInvalid", bad, err)
	}
	if _, err := wh.CreateTable(ctx, mustName(t, "c.s.u"), &tableschema.Schema{}); !errors.Is(err, tableschema.ErrInvalid) {
		t.Errorf("CreateTable(no columns): err = %v; want ErrInvalid", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := wh.CreateTable(cancelled, mustName(t, "c.s.v"), mustColumns(t, "x INT")); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateTable(cancelled): err = %v; want context.Canceled", err)
	}
	if _, err := wh.Table(cancelled, mustName(t, "c.s.t")); !errors.Is(err, context.Canceled) {
		t.Errorf("Table(cancelled): err = %v; want context.Canceled", err)
	}
	if _, err := wh.List(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("List(cancelled): err = %v; want context.Canceled", err)
	}
	tbl, err := wh.Table(ctx, mustName(t, "c.s.t"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tbl.Count(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Count(cancelled): err = %v; want context.Canceled", err)
	}
	if _, err := tbl.Snapshot(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Snapshot(cancelled): err = %v; want context.Canceled", err)
	}
	if _, err := tbl.Schema(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Schema(cancelled): err = %v; want context.Canceled", err)
	}
}

func TestCreateTableConcurrent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	errs := fixture.Concurrently(8, func(i int) error {
		wh, err := warehouse.Open(dir) // separate Warehouses, like separate processes
		if err != nil {
			return err
		}
		_, err = wh.CreateTable(ctx, mustName(t, "c.s.t"), mustColumns(t, fmt.Sprintf("c%d INT", i)))
		return err
	})
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, warehouse.ErrTableExists):
			t.Errorf("CreateTable: %v", err)
		}
	}
	if created != 1 {
		t.Errorf("%d concurrent CreateTable calls succeeded; want 1", created)
	}
}

func TestLogErrors(t *testing.T) {
	ctx := context.Background()
	const v1 = "00000000000000000001.json"
	tests := []struct {
		name  string
		file  string // written into the table's _delta_log with data
		data  string
		want  error
		parts []string
	}{
		{"checkpoint", "_last_checkpoint", `{"version":10,"size":3}`, warehouse.ErrCheckpointUnsupported, []string{"checkpoint"}},
		{"garbage line", v1, "{\"commitInfo\":{}}\n{not json\n", warehouse.ErrCorruptLog, []string{v1, "line 2"}},
		{"add without path", v1, "{\"add\":{\"size\":3}}\n", warehouse.ErrCorruptLog, []string{v1, "line 1"}},
		{"two actions on a line", v1, "\n{\"txn\":{\"appId\":\"a\",\"version\":1},\"remove\":{\"path\":\"x\"}}\n", warehouse.ErrCorruptLog, []string{v1, "line 2"}},
		{"not an object", v1, "[1]\n", warehouse.ErrCorruptLog, []string{v1, "line 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := openWH(t)
			tbl := createTable(t, wh, "c.s.t", "id INT")
			write(t, filepath.Join(tbl.Dir(), "_delta_log", tt.file), tt.data)
			_, _, err := tbl.Count(ctx)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Count() err = %v; want %v", err, tt.want)
			}
			for _, p := range tt.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("Count() err = %v; want it to mention %q", err, p)
				}
			}
			if _, err := tbl.Snapshot(ctx); !errors.Is(err, tt.want) {
				t.Errorf("Snapshot() err = %v; want %v", err, tt.want)
			}
		})
	}
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
