package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/proctest"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// binary is the loader built once for every test in TestMain.
var binary string

func TestMain(m *testing.M) { os.Exit(proctest.BuildAndRun(m, ".", "loader", &binary)) }

type result struct {
	stdout, stderr string
	code           int
}

// loader runs the binary to completion with a deadline.
func loader(t *testing.T, args ...string) result {
	t.Helper()
	r, _ := runFor(t, 3*time.Minute, args...)
	return r
}

// runFor runs the binary for at most timeout and reports whether it ended by itself.
func runFor(t *testing.T, timeout time.Duration, args ...string) (r result, ended bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("loader %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}, ctx.Err() == nil
}

func mustLoader(t *testing.T, args ...string) result {
	t.Helper()
	r := loader(t, args...)
	if r.code != 0 {
		t.Fatalf("loader %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// server is a `loader serve` subprocess.
type server struct {
	cmd  *exec.Cmd
	addr string
	done chan error
}

func serve(t *testing.T, warehouse string, extra ...string) *server {
	t.Helper()
	args := append([]string{"serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0", "--commit-interval", "50ms"}, extra...)
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1)}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(time.Minute)
	for s.addr == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("loader serve exited before listening")
			}
			if a, found := strings.CutPrefix(line, "listening on "); found {
				s.addr = a
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatal("loader serve did not print its address within a minute")
		}
	}
	go func() {
		for range lines { // keep draining so the server never blocks on stderr
		}
	}()
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("loader serve exited with %v after SIGTERM; want 0", err)
		}
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		t.Error("loader serve did not stop within a minute of SIGTERM")
	}
}

const tableName = "main.default.events"

func writeParquetParts(t *testing.T, parts int, rowsPer int64) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i < parts; i++ {
		if err := fixture.WriteParquet(filepath.Join(dir, fmt.Sprintf("part-%d.parquet", i)), int64(i)*rowsPer, rowsPer, 200); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// parseSummary reads the --json summary, checking the agreed keys are there.
func parseSummary(t *testing.T, stdout string) load.Summary {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("--json output %q is not one JSON object: %v", stdout, err)
	}
	for _, k := range []string{"files", "rows", "bytes", "seconds", "rows_per_second", "bytes_per_second", "streams", "retries", "skipped_units", "possibly_duplicated_rows", "verified_rows"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("--json output lacks key %q: %s", k, stdout)
		}
	}
	var s load.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func lastLineInt(t *testing.T, stdout string) int64 {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	n, err := strconv.ParseInt(strings.TrimSpace(lines[len(lines)-1]), 10, 64)
	if err != nil {
		t.Fatalf("last line of %q is not an integer", stdout)
	}
	return n
}

func TestTableCommands(t *testing.T) {
	wh := t.TempDir()
	r := mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	if !strings.Contains(r.stdout, "created "+tableName) {
		t.Errorf("table create printed %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(wh, "main", "default", "events", "_delta_log", "00000000000000000000.json")); err != nil {
		t.Errorf("version 0 of the Delta log: %v", err)
	}
	if r := loader(t, "table", "create", tableName, "--warehouse", wh, "--columns", "a INT"); r.code != 1 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("creating twice: exit %d, stderr %q; want 1 and 'exists'", r.code, r.stderr)
	}
	src := filepath.Join(t.TempDir(), "like.parquet")
	if err := fixture.WriteParquet(src, 0, 5, 5); err != nil {
		t.Fatal(err)
	}
	mustLoader(t, "table", "create", "main.default.liked", "--warehouse", wh, "--like", src)
	r = mustLoader(t, "table", "describe", "main.default.liked", "--warehouse", wh)
	for _, want := range []string{"st", "STRUCT<b: STRING, a: SMALLINT>", "ts", "TIMESTAMP", "ntz", "TIMESTAMP_NTZ", "DECIMAL(8,2)", "ARRAY<STRING>", "id", "NOT NULL"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe of a --like table lacks %q:\n%s", want, r.stdout)
		}
	}
	r = mustLoader(t, "table", "list", "--warehouse", wh)
	if got := strings.Fields(r.stdout); fmt.Sprint(got) != "[main.default.events main.default.liked]" {
		t.Errorf("table list = %v", got)
	}
	if n := lastLineInt(t, mustLoader(t, "table", "count", tableName, "--warehouse", wh).stdout); n != 0 {
		t.Errorf("count of a new table = %d", n)
	}
	for _, bad := range [][]string{
		{"table", "create", "two.parts", "--warehouse", wh, "--columns", "a INT"},
		{"table", "create", "a.b.c", "--warehouse", wh},
		{"table", "create", "a.b.c", "--warehouse", wh, "--columns", "a UUID"},
		{"table", "count", tableName, "--bogus-flag"},
		{"load", "--table", tableName},
		{"serve", "--warehouse", wh, "--stream-rate-limit", "fast"},
		{"serve", "--warehouse", wh, "--stream-rate-limit", "0"},
		{"load", "--table", tableName, "--compression", "gzip", "x.parquet"},
		{"load", "--table", tableName, "--manifest-lock-timeout", "0s", "x.parquet"},
	} {
		if r := loader(t, bad...); r.code != 2 {
			t.Errorf("loader %v: exit %d; want 2 (usage)\n%s", bad, r.code, r.stderr)
		}
	}
	if r := mustLoader(t, "--help"); !strings.Contains(r.stdout, "130") || !strings.Contains(r.stdout, "partial") {
		t.Errorf("--help does not document exit statuses:\n%s", r.stdout)
	}
}

func TestLoadEmbeddedJSONAndResume(t *testing.T) {
	wh := t.TempDir()
	data := writeParquetParts(t, 3, 1000)
	args := []string{"load", "--table", tableName, "--warehouse", wh, "--create-table", "--json", "--streams", "2", data}
	s := parseSummary(t, mustLoader(t, args...).stdout)
	if s.Files != 3 || s.Rows != 3000 || s.VerifiedRows == nil || *s.VerifiedRows != 3000 || s.Streams != 2 {
		t.Errorf("summary = %+v; want 3 files, 3000 rows verified, 2 streams", s)
	}
	if n := lastLineInt(t, mustLoader(t, "table", "count", tableName, "--warehouse", wh).stdout); n != 3000 {
		t.Errorf("table count = %d; want 3000", n)
	}
	again := parseSummary(t, mustLoader(t, args...).stdout)
	if again.Rows != 0 || again.SkippedUnits != 15 || again.VerifiedRows == nil || *again.VerifiedRows != 0 {
		t.Errorf("re-run summary = %+v; want nothing loaded and all 15 units skipped", again)
	}
}

func TestServeLoadCountEveryDialect(t *testing.T) {
	wh := t.TempDir()
	protocols := []string{"zerobus", "flight", "flightsql"}
	for _, protocol := range protocols {
		mustLoader(t, "table", "create", "main.default."+protocol, "--warehouse", wh, "--columns", fixture.TableColumns)
	}
	// Two early DoPuts are cut after a few frames: the loads retry and still land every row once. Every
	// dialect's DoPut goes through the per-stream pace too.
	srv := serve(t, wh, "--token", "t1", "--token", "t2", "--fault-drop-after", "3", "--fault-drop-calls", "2", "--stream-rate-limit", "50MB/s")
	data := writeParquetParts(t, 2, 500)
	endpoint := "grpc://" + srv.addr
	retries := int64(0)
	compression := map[string]string{"zerobus": "lz4", "flight": "zstd", "flightsql": "none"} // each dialect decodes compressed bodies
	wire := map[string]int64{}
	for _, protocol := range protocols {
		s := parseSummary(t, mustLoader(t, "load", "--table", "main.default."+protocol, "--endpoint", endpoint, "--token", "t2",
			"--protocol", protocol, "--json", "--max-frame-bytes", "8KiB", "--streams", "2", "--compression", compression[protocol], data).stdout)
		if s.Rows != 1000 || s.VerifiedRows == nil || *s.VerifiedRows != 1000 {
			t.Errorf("%s: summary = %+v; want 1000 rows verified", protocol, s)
		}
		retries += s.Retries
		wire[protocol] = s.Bytes
		if n := lastLineInt(t, mustLoader(t, "table", "count", "main.default."+protocol, "--endpoint", endpoint, "--token", "t1").stdout); n != 1000 {
			t.Errorf("%s: table count --endpoint = %d; want 1000", protocol, n)
		}
	}
	if retries == 0 {
		t.Error("no load retried; the sink was told to drop two streams")
	}
	if wire["zerobus"] >= wire["flightsql"] || wire["flight"] >= wire["flightsql"] {
		t.Errorf("bytes sent with lz4 %d, zstd %d, none %d; want compression to send fewer", wire["zerobus"], wire["flight"], wire["flightsql"])
	}
	if r := loader(t, "load", "--table", "main.default.zerobus", "--endpoint", endpoint, "--token", "nope", data); r.code != 1 ||
		!strings.Contains(strings.ToLower(r.stderr), "unauthenticated") {
		t.Errorf("wrong token: exit %d, stderr %q; want 1 and Unauthenticated", r.code, r.stderr)
	}
	srv.stop(t)
	// After a clean stop everything acknowledged is committed, and every value is what the files hold.
	for _, protocol := range protocols {
		r := mustLoader(t, "table", "count", "main.default."+protocol, "--warehouse", wh, "--json")
		var c struct{ Committed, Acknowledged int64 }
		if err := json.Unmarshal([]byte(r.stdout), &c); err != nil || c.Committed != 1000 || c.Acknowledged != 0 {
			t.Errorf("%s: count --json after stop = %s (%v); want committed 1000, acknowledged 0", protocol, r.stdout, err)
		}
		if diffs := fixture.Diff(scanTable(t, wh, "main.default."+protocol), fixture.IDs(0, 1000), fixture.Expected, 10); len(diffs) > 0 {
			t.Errorf("%s: table differs from the files:\n  %s", protocol, strings.Join(diffs, "\n  "))
		}
	}
}

// scanTable reads a table of a warehouse on disk in canonical form.
func scanTable(t *testing.T, dir, name string) []fixture.Row {
	t.Helper()
	wh, err := warehouse.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := tableschema.ParseTableName(name)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := wh.Table(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	var rows []fixture.Row
	err = tbl.Scan(context.Background(), func(rec arrow.RecordBatch) error {
		rows = append(rows, fixture.Rows([]arrow.RecordBatch{rec})...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestPartialLoadExitsThree(t *testing.T) {
	wh := t.TempDir()
	data := writeParquetParts(t, 2, 100)
	if err := os.WriteFile(filepath.Join(data, "broken.parquet"), []byte("PAR1 this is not parquet PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--on-error", "skip-file", data)
	if r.code != 3 || !strings.Contains(r.stderr, "broken.parquet") {
		t.Errorf("load with a broken file: exit %d, stderr %q; want 3 naming broken.parquet", r.code, r.stderr)
	}
	if n := lastLineInt(t, mustLoader(t, "table", "count", tableName, "--warehouse", wh).stdout); n != 200 {
		t.Errorf("count after partial load = %d; want 200", n)
	}
	if r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--force", data); r.code != 1 || !strings.Contains(r.stderr, "broken.parquet") {
		t.Errorf("load with a broken file, --on-error fail: exit %d, stderr %q; want 1 naming the file", r.code, r.stderr)
	}
}

func TestInterruptExits130AndResumes(t *testing.T) {
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	srv := serve(t, wh, "--fault-ack-delay", "30ms")
	data := writeParquetParts(t, 4, 1500)
	manifests := t.TempDir()
	args := []string{"load", "--table", tableName, "--endpoint", "grpc://" + srv.addr, "--json", "--streams", "2",
		"--max-frame-bytes", "16KiB", "--max-inflight-bytes", "64KiB", "--manifest-dir", manifests, data}

	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the table has started to grow.
	deadline := time.Now().Add(time.Minute)
	for {
		r := mustLoader(t, "table", "count", tableName, "--endpoint", "grpc://"+srv.addr)
		if lastLineInt(t, r.stdout) > 0 || time.Now().After(deadline) {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("interrupted load: %v (stderr %s); want exit 130", err, errb.String())
	}
	first := parseSummary(t, out.String())
	if first.Rows <= 0 || first.Rows >= 6000 {
		t.Fatalf("interrupted load acknowledged %d rows; want some but not all of 6000", first.Rows)
	}
	if first.NotVerified != "the load was interrupted" || !strings.Contains(errb.String(), "loader: interrupted;") || strings.Contains(errb.String(), "context canceled") {
		t.Errorf("interrupted load: not_verified %q, stderr %q; want it called an interrupt, not a failure or a cancelled context", first.NotVerified, errb.String())
	}
	second := parseSummary(t, mustLoader(t, args...).stdout)
	if first.Rows+second.Rows != 6000 {
		t.Errorf("runs loaded %d + %d rows; want 6000", first.Rows, second.Rows)
	}
	if n := lastLineInt(t, mustLoader(t, "table", "count", tableName, "--endpoint", "grpc://"+srv.addr).stdout); n != 6000 {
		t.Errorf("table holds %d rows; want each of the 6000 exactly once", n)
	}
}

func TestGenerateAndDemoShape(t *testing.T) {
	out := t.TempDir()
	r := mustLoader(t, "generate", "--out", out, "--rows", "20000", "--files", "3", "--row-group-rows", "4000")
	if !strings.Contains(r.stdout, "wrote 20000 rows in 3 files") {
		t.Errorf("generate printed %q", r.stdout)
	}
	wh := t.TempDir()
	mustLoader(t, "table", "create", "demo.default.events", "--warehouse", wh, "--like", filepath.Join(out, "part-00000.parquet"))
	s := parseSummary(t, mustLoader(t, "load", "--table", "demo.default.events", "--warehouse", wh, "--json", out).stdout)
	if s.Rows != 20000 || s.VerifiedRows == nil || *s.VerifiedRows != 20000 {
		t.Errorf("demo load summary = %+v; want 20000 rows verified", s)
	}
}

// TestFlightSQLCreateAndFailedLoads: Flight SQL --create-table creates the table with the given
// columns through `loader serve` and verifies the load with SELECT count(*); failed loads print
// their error in the JSON summary, say why they are not verified, and hint at the flag that helps.
func TestFlightSQLCreateAndFailedLoads(t *testing.T) {
	wh := t.TempDir()
	srv := serve(t, wh)
	endpoint := "grpc://" + srv.addr
	data := writeParquetParts(t, 2, 500)
	s := parseSummary(t, mustLoader(t, "load", "--table", tableName, "--endpoint", endpoint, "--protocol", "flightsql",
		"--create-table", "--table-schema", fixture.TableColumns, "--json", data).stdout)
	if s.Rows != 1000 || s.VerifiedRows == nil || *s.VerifiedRows != 1000 {
		t.Errorf("flightsql --create-table: summary = %+v; want 1000 rows verified", s)
	}
	if n := lastLineInt(t, mustLoader(t, "table", "count", tableName, "--endpoint", endpoint, "--protocol", "flightsql").stdout); n != 1000 {
		t.Errorf("table count --protocol flightsql = %d; want 1000", n)
	}

	// Zerobus cannot create tables: a usage error, with a hint.
	r := loader(t, "load", "--table", "main.default.other", "--endpoint", endpoint, "--create-table", data)
	if r.code != 2 || !strings.Contains(r.stderr, "cannot create tables") || !strings.Contains(r.stderr, "hint: --create-table works with") {
		t.Errorf("zerobus --create-table: exit %d, stderr %q; want 2, saying it cannot create tables, with a hint", r.code, r.stderr)
	}

	// A missing table: exit 1, the error in the JSON, a hint on stderr.
	r = loader(t, "load", "--table", "main.default.missing", "--warehouse", t.TempDir(), "--json", data)
	var out struct {
		Error        string `json:"error"`
		NotVerified  string `json:"not_verified"`
		VerifiedRows *int64 `json:"verified_rows"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("--json output of a failed load %q: %v", r.stdout, err)
	}
	if r.code != 1 || !strings.Contains(out.Error, "does not exist") || out.NotVerified != "the load failed" || out.VerifiedRows != nil ||
		!strings.Contains(r.stderr, "hint: create it first") {
		t.Errorf("load into a missing table: exit %d, %+v, stderr %q; want 1, the error in the JSON, not verified, a hint", r.code, out, r.stderr)
	}

	// A load that fails part-way says so in its human summary.
	if err := os.WriteFile(filepath.Join(data, "zz-broken.parquet"), []byte("PAR1 not parquet PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = loader(t, "load", "--table", tableName, "--endpoint", endpoint, "--protocol", "flightsql", "--force", data)
	if r.code != 1 || !strings.Contains(r.stdout, "not verified: the load failed") || !strings.Contains(r.stderr, "zz-broken.parquet") {
		t.Errorf("failed load: exit %d, stdout %q, stderr %q; want 1, 'not verified: the load failed', naming the file", r.code, r.stdout, r.stderr)
	}
}

// TestPageLimit: a valid file with a page over --max-page-bytes fails naming the file, the page size
// and the limit, with a hint to raise it; raised, the same file loads.
func TestPageLimit(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for i := range 2000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("y", 1000)) // ~2 MB in one page, compressed to little
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "huge-page.parquet")
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(64<<20),
		parquet.WithCompression(compress.Codecs.Zstd))
	if err := fixture.WriteParquetRecord(path, rec, props); err != nil {
		t.Fatal(err)
	}

	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", "id BIGINT NOT NULL, s STRING")
	r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--max-page-bytes", "1MiB", path)
	if r.code != 1 || !strings.Contains(r.stderr, "huge-page.parquet") || !strings.Contains(r.stderr, "exceeds the page limit of 1048576 bytes") ||
		!strings.Contains(r.stderr, "hint: raise the page limit with --max-page-bytes") || strings.Contains(r.stderr, "corrupt") {
		t.Errorf("load with a 1 MiB page limit: exit %d, stderr %q; want 1, naming the file and the limit, with a hint, not corrupt", r.code, r.stderr)
	}
	s := parseSummary(t, mustLoader(t, "load", "--table", tableName, "--warehouse", wh, "--max-page-bytes", "8MiB", "--json", path).stdout)
	if s.Rows != 2000 || s.VerifiedRows == nil || *s.VerifiedRows != 2000 {
		t.Errorf("load with an 8 MiB page limit: %+v; want 2000 rows verified", s)
	}
}
