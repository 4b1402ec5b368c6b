package main_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/compute/metadata"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/load"
)

// objectsServer starts versitygw with bucket "lake" and points the loader's AWS environment at it.
func objectsServer(t *testing.T) *s3test.Server {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "lake")
	return srv
}

func TestLoadFromS3EveryFormat(t *testing.T) {
	srv := objectsServer(t)
	dir := t.TempDir()
	write := func(name string, fn func(string) error) string {
		p := filepath.Join(dir, name)
		if err := fn(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i := int64(0); i < 3; i++ {
		srv.PutFile(t, "lake", "pq/part-"+string(rune('0'+i))+".parquet",
			write("p.parquet", func(p string) error { return fixture.WriteParquet(p, i*1000, 1000, 200) }))
	}
	srv.Put(t, "lake", "pq/_SUCCESS", nil)
	srv.Put(t, "lake", "pq/_delta_log/00000.json", []byte("{}"))
	srv.Put(t, "lake", "pq/.hidden.parquet", []byte("not parquet"))
	csvPath := write("c.csv", func(p string) error { return fixture.WriteCSV(p, 0, 2000) })
	raw, _ := os.ReadFile(csvPath)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	srv.Put(t, "lake", "csv/rows.csv.gz", gz.Bytes())
	srv.PutFile(t, "lake", "ipc/a.arrows", write("a.arrows", func(p string) error { return fixture.WriteIPC(p, 0, 1500, 300, true) }))
	srv.PutFile(t, "lake", "ipc/b.arrow", write("b.arrow", func(p string) error { return fixture.WriteIPC(p, 1500, 1500, 300, false) }))

	wh := t.TempDir()
	mustLoader(t, "table", "create", "main.default.pq", "--warehouse", wh, "--columns", fixture.TableColumns)
	mustLoader(t, "table", "create", "main.default.csv", "--warehouse", wh, "--columns", fixture.CSVColumns)
	mustLoader(t, "table", "create", "main.default.ipc", "--warehouse", wh, "--columns", fixture.TableColumns)

	for _, c := range []struct {
		table, src string
		files      int
		ids        []int64
		want       func(int64) fixture.Row
	}{
		{"main.default.pq", "s3://lake/pq/", 3, fixture.IDs(0, 3000), fixture.Expected},
		{"main.default.csv", "s3://lake/csv/*.csv.gz", 1, fixture.IDs(0, 2000), fixture.CSVExpected},
		{"main.default.ipc", "s3://lake/ipc", 2, fixture.IDs(0, 3000), fixture.Expected},
	} {
		plan := mustLoader(t, "plan", "--table", c.table, "--warehouse", wh, c.src)
		if !strings.Contains(plan.stdout, "s3://lake/") {
			t.Errorf("plan of %s does not list the objects:\n%s", c.src, plan.stdout)
		}
		s := parseSummary(t, mustLoader(t, "load", "--table", c.table, "--warehouse", wh, "--json", c.src).stdout)
		if s.Files != c.files || s.Rows != int64(len(c.ids)) || s.VerifiedRows == nil || *s.VerifiedRows != s.Rows {
			t.Errorf("%s: summary %+v; want %d files, %d rows verified", c.src, s, c.files, len(c.ids))
		}
		if s.ObjectRequests <= 0 || s.ObjectBytes <= 0 {
			t.Errorf("%s: object_requests %d, object_bytes %d; want both counted", c.src, s.ObjectRequests, s.ObjectBytes)
		}
		if diffs := fixture.Diff(scanTable(t, wh, c.table), c.ids, c.want, 10); len(diffs) > 0 {
			t.Errorf("%s: table differs:\n%s", c.src, strings.Join(diffs, "\n"))
		}
	}

	// Resume: a second run loads nothing; a rewritten object loads as new, the rest stay skipped.
	args := []string{"load", "--table", "main.default.pq", "--warehouse", wh, "--json", "s3://lake/pq/"}
	again := parseSummary(t, mustLoader(t, args...).stdout)
	if again.Rows != 0 || again.SkippedUnits != 15 {
		t.Errorf("re-run: %+v; want nothing loaded, 15 units skipped", again)
	}
	srv.PutFile(t, "lake", "pq/part-0.parquet", write("p.parquet", func(p string) error { return fixture.WriteParquet(p, 3000, 1000, 200) }))
	third := parseSummary(t, mustLoader(t, args...).stdout)
	if third.Rows != 1000 || third.SkippedUnits != 10 {
		t.Errorf("after rewriting part-0: %+v; want its 1000 new rows loaded, 10 units skipped", third)
	}
	if diffs := fixture.Diff(scanTable(t, wh, "main.default.pq"), fixture.IDs(0, 4000), fixture.Expected, 10); len(diffs) > 0 {
		t.Errorf("after the rewrite: %s", strings.Join(diffs, "\n"))
	}
}

func TestLoadFromS3Failures(t *testing.T) {
	srv := objectsServer(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "g.parquet")
	if err := fixture.WriteParquet(good, 0, 500, 100); err != nil {
		t.Fatal(err)
	}
	srv.PutFile(t, "lake", "mixed/a.parquet", good)
	data, _ := os.ReadFile(good)
	srv.Put(t, "lake", "mixed/b.parquet", data[:len(data)/2]) // truncated
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)

	r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--on-error", "skip-file", "s3://lake/mixed/")
	if r.code != 3 || !strings.Contains(r.stderr, "s3://lake/mixed/b.parquet") {
		t.Errorf("a truncated object under skip-file: exit %d, stderr %q; want 3 naming s3://lake/mixed/b.parquet", r.code, r.stderr)
	}
	if !regexp.MustCompile(`object storage: \d+ requests, [0-9.]+ MB read, 0 GETs sent again`).MatchString(r.stdout) {
		t.Errorf("the summary does not count the object-store requests:\n%s", r.stdout)
	}
	if n := lastLineInt(t, mustLoader(t, "table", "count", tableName, "--warehouse", wh).stdout); n != 500 {
		t.Errorf("count = %d; want the good object's 500 rows", n)
	}
	for _, c := range []struct{ src, want string }{
		{"s3://nobucket/x/", "NoSuchBucket"},
		{"s3://lake/missing.parquet", "s3://lake/missing.parquet"},
	} {
		if r := loader(t, "load", "--table", tableName, "--warehouse", wh, c.src); r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("load %s: exit %d, stderr %q; want 1 naming %q", c.src, r.code, r.stderr, c.want)
		}
	}
	srv.AddUser(t, "reader2", "reader2secretkey")
	srv.Env(t, "reader2", "reader2secretkey")
	r = loader(t, "load", "--table", tableName, "--warehouse", wh, "s3://lake/mixed/a.parquet")
	if r.code != 1 || !strings.Contains(r.stderr, "AccessDenied") || !strings.Contains(r.stderr, "s3://lake/mixed/a.parquet") {
		t.Errorf("another account: exit %d, stderr %q; want 1 naming the URL and AccessDenied", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "reader2secretkey") {
		t.Errorf("stderr shows the secret: %s", r.stderr)
	}
}

// TestKillFromS3Resumes stops the loader mid-load from a bucket, by SIGINT (a clean stop: the next
// run loads exactly the rest, as it does for local files) and by SIGKILL (the next run loses
// nothing; rows acknowledged but not yet in the manifest when it was killed are sent again, as for
// local files).
func TestKillFromS3Resumes(t *testing.T) {
	srv := objectsServer(t)
	data := writeParquetParts(t, 4, 1500)
	srv.PutDir(t, "lake", "k/", data)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			wh := t.TempDir()
			mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
			sink := serve(t, wh, "--fault-ack-delay", "30ms")
			args := []string{"load", "--table", tableName, "--endpoint", "grpc://" + sink.addr, "--json", "--streams", "2",
				"--max-frame-bytes", "16KiB", "--max-inflight-bytes", "64KiB", "--manifest-dir", t.TempDir(), "s3://lake/k/"}
			cmd := exec.Command(binary, args...)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Minute)
			for {
				r := mustLoader(t, "table", "count", tableName, "--endpoint", "grpc://"+sink.addr)
				if lastLineInt(t, r.stdout) > 0 || time.Now().After(deadline) {
					break
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			second := parseSummary(t, mustLoader(t, args...).stdout)
			if sig == syscall.SIGINT {
				first := parseSummary(t, out.String())
				// The second run resumes by row range, within a unit the first one left part-way.
				if first.Rows <= 0 || first.Rows+second.Rows != 6000 {
					t.Errorf("runs loaded %d + %d rows (second skipped %d units); want 6000 in all, the second resuming",
						first.Rows, second.Rows, second.SkippedUnits)
				}
			}
			sink.stop(t)
			seen := map[int64]int{}
			for _, r := range scanTable(t, wh, tableName) {
				seen[r["id"].(int64)]++
			}
			dups := 0
			for id := int64(0); id < 6000; id++ {
				if seen[id] == 0 {
					t.Fatalf("id %d is missing after the resume", id)
				}
				dups += seen[id] - 1
			}
			if sig == syscall.SIGINT && dups > 0 {
				t.Errorf("%d rows loaded twice after a clean stop", dups)
			}
			t.Logf("%s: resumed run loaded %d rows, skipped %d units; %d rows sent twice", sig, second.Rows, second.SkippedUnits, dups)
		})
	}
}

// TestShardsAndBenchFromS3 runs the commands that take their sources from elsewhere than the command
// line, or discover them on their own, on a bucket: a shard plan made with `plan --shards` and loaded
// with --plan alone (its sources come from the plan), `status --shards` over it, and `bench`, whose
// rivals read local files only and are skipped with a note.
func TestShardsAndBenchFromS3(t *testing.T) {
	srv := objectsServer(t)
	data := writeParquetParts(t, 3, 1000)
	for i := range 3 {
		srv.PutFile(t, "lake", fmt.Sprintf("sh/part-%d.parquet", i), filepath.Join(data, fmt.Sprintf("part-%d.parquet", i)))
	}
	wh, manifests := t.TempDir(), t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)

	out := mustLoader(t, "plan", "--shards", "2", "--json", "s3://lake/sh/").stdout
	plan, err := load.ReadShardPlan(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Files != 3 {
		t.Fatalf("the plan of s3://lake/sh/ has %d files; want 3:\n%s", plan.Files, out)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	var total int64
	for k := range 2 {
		s := parseSummary(t, mustLoader(t, "load", "--table", tableName, "--warehouse", wh, "--manifest-dir", manifests,
			"--plan", planFile, "--shard-index", strconv.Itoa(k), "--json").stdout)
		total += s.Rows
	}
	if total != 3000 {
		t.Errorf("the plan's shards loaded %d rows; want 3000", total)
	}
	if diffs := fixture.Diff(scanTable(t, wh, tableName), fixture.IDs(0, 3000), fixture.Expected, 10); len(diffs) > 0 {
		t.Errorf("table differs from the objects:\n  %s", strings.Join(diffs, "\n  "))
	}
	rep := statusReport(t, mustLoader(t, "status", "--shards", "--table", tableName, "--warehouse", wh, "--manifest-dir", manifests,
		"--plan", planFile, "--json").stdout)
	if rep.Done != 2 || rep.Rows != 3000 {
		t.Errorf("status --shards: %d of %d shards done, %d rows; want 2 done, 3000 rows", rep.Done, rep.Count, rep.Rows)
	}

	// the object-store series on /metrics count what the summary counts
	w := start(t, nil, "load", "--table", tableName, "--warehouse", wh, "--manifest-dir", manifests, "--force", "--json", "--quiet",
		"--metrics-addr", "127.0.0.1:0", "--metrics-linger", "10m", "s3://lake/sh/")
	line := w.await(t, "the linger", func(l string) bool { return strings.HasPrefix(l, "serving metrics on http://") })
	metricsAddr, _, _ := strings.Cut(strings.TrimPrefix(line, "serving metrics on http://"), "/metrics")
	sum := parseSummary(t, w.stdout(t))
	fams := scrape(t, metricsAddr)
	mlabels := map[string]string{"table": tableName, "target": "embedded", "shard": "none"}
	for name, want := range map[string]int64{"loader_object_requests_total": sum.ObjectRequests, "loader_object_bytes_total": sum.ObjectBytes} {
		if got, ok := value(fams, name, mlabels); !ok || int64(got) != want || want <= 0 {
			t.Errorf("%s = %v (found %v); want %d as in the summary", name, got, ok, want)
		}
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	w.wait(t)

	res := filepath.Join(t.TempDir(), "results")
	r := mustLoader(t, "bench", "s3://lake/sh/", "--streams", "1", "--repeat", "1", "--out", res, "--quiet")
	o := readBenchOutput(t, res)
	if o.number(t, "e2e_mb_s") <= 0 || o.number(t, "decode_ceiling_mb_s") <= 0 || o.number(t, "transport_ceiling_mb_s") <= 0 {
		t.Errorf("summary.json = %v; want loader, decode and transport figures", o.summary)
	}
	if string(o.summary["adbc_mb_s"]) != "null" || !strings.Contains(r.stdout, "s3://lake/sh/part-0.parquet is in an object store") {
		t.Errorf("adbc_mb_s = %s; want null, with a note that the rivals read local files only:\n%s", o.summary["adbc_mb_s"], r.stdout)
	}

	for _, bad := range [][]string{{"--object-attempts", "0"}, {"--object-stall-timeout", "0s"}} {
		if r := loader(t, append([]string{"load", "--table", tableName, "--warehouse", wh, "s3://lake/sh/"}, bad...)...); r.code != 2 || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("load %v: exit %d, stderr %q; want 2 naming the flag", bad, r.code, r.stderr)
		}
	}
}

// TestObjectAttemptsFlag points the loader at an S3 endpoint that answers every request with 503
// SlowDown: --object-attempts N sends the listing N times, then fails naming the cause.
func TestObjectAttemptsFlag(t *testing.T) {
	slow := s3test.Answer(t, http.StatusServiceUnavailable, http.Header{"Content-Type": {"application/xml"}},
		s3test.ErrorXML("SlowDown", "Please reduce your request rate."))
	s3test.EnvFor(t, slow.URL, s3test.AccessKey, s3test.SecretKey)
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	for _, n := range []int{2, 3} {
		slow.Requests.Store(0)
		r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--object-attempts", strconv.Itoa(n), "s3://lake/x/")
		if r.code == 0 || !strings.Contains(r.stderr, "SlowDown") {
			t.Errorf("--object-attempts %d against an endpoint that always throttles: exit %d, stderr %q; want a failure naming SlowDown", n, r.code, r.stderr)
		}
		if got := slow.Requests.Load(); got != int64(n) {
			t.Errorf("--object-attempts %d: the endpoint saw %d requests; want %d", n, got, n)
		}
	}
}

// Without credentials for GCS or an account for Azure, a load says what to set. (gcsblob's own
// opener printed a warning on stdout, into --json output, and then failed every request talking of
// a private key.)
func TestCloudCredentialsMissing(t *testing.T) {
	if metadata.OnGCE() {
		t.Skip("on Google Cloud the metadata server gives credentials")
	}
	for _, k := range []string{"STORAGE_EMULATOR_HOST", "STORAGE_EMULATOR_HOST_GRPC", "GOOGLE_APPLICATION_CREDENTIALS",
		"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	for _, c := range []struct{ src, want string }{
		{"gs://lake/events/", "GOOGLE_APPLICATION_CREDENTIALS"},
		{"azblob://lake/events/", "AZURE_STORAGE_ACCOUNT"},
	} {
		r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--json", c.src)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, strings.TrimSuffix(c.src, "/events/")) {
			t.Errorf("load %s without credentials: exit %d, stderr %q; want 1 naming the bucket and %s", c.src, r.code, r.stderr, c.want)
		}
		if strings.Contains(r.stdout, "Warning") {
			t.Errorf("load --json %s printed a warning on stdout: %q", c.src, r.stdout)
		}
	}
}

// A bucket in another region than AWS_REGION is followed to its region (as boto3 and the AWS CLI
// do), and the load reads every row; --log-level info says so. The store here is versitygw in
// eu-west-3, which refuses requests signed for us-east-1 naming its region.
func TestLoadFromABucketInAnotherRegion(t *testing.T) {
	srv := s3test.StartIn(t, "eu-west-3")
	srv.Env(t, s3test.AccessKey, s3test.SecretKey) // AWS_REGION=us-east-1
	srv.CreateBucket(t, "far")
	dir := t.TempDir()
	for i := int64(0); i < 2; i++ {
		p := filepath.Join(dir, fmt.Sprintf("part-%d.parquet", i))
		if err := fixture.WriteParquet(p, i*1000, 1000, 250); err != nil {
			t.Fatal(err)
		}
		srv.PutFile(t, "far", fmt.Sprintf("events/part-%d.parquet", i), p)
	}
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	r := mustLoader(t, "load", "--table", tableName, "--warehouse", wh, "--json", "--log-level", "info", "s3://far/events/")
	if s := parseSummary(t, r.stdout); s.Rows != 2000 || s.VerifiedRows == nil || *s.VerifiedRows != 2000 {
		t.Errorf("summary %+v; want 2000 rows verified", s)
	}
	if !strings.Contains(r.stderr, "following it") || !strings.Contains(r.stderr, "region=eu-west-3") {
		t.Errorf("stderr %q; want a line saying the bucket is followed to eu-west-3", r.stderr)
	}
	if diffs := fixture.Diff(scanTable(t, wh, tableName), fixture.IDs(0, 2000), fixture.Expected, 10); len(diffs) > 0 {
		t.Errorf("table differs:\n%s", strings.Join(diffs, "\n"))
	}
}

// A warehouse's CSV export names its files without an extension (Redshift's UNLOAD: 0000_part_00,
// BigQuery's EXPORT DATA: 000000000000). Their bytes cannot say CSV, so without --input-format no
// file is found; with --input-format csv every one loads, from a local directory and from a bucket
// alike.
func TestInputFormatForExports(t *testing.T) {
	srv := objectsServer(t)
	local := t.TempDir()
	for i, name := range []string{"0000_part_00", "0001_part_00"} {
		if err := fixture.WriteCSV(filepath.Join(local, name), int64(i*700), 700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(local, "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	srv.PutDir(t, "lake", "unload/", local)
	wh := t.TempDir()
	for _, c := range []struct{ table, src string }{{"main.default.local", local}, {"main.default.s3", "s3://lake/unload/"}} {
		mustLoader(t, "table", "create", c.table, "--warehouse", wh, "--columns", fixture.CSVColumns)
		r := loader(t, "load", "--table", c.table, "--warehouse", wh, "--manifest-dir", t.TempDir(), c.src)
		if r.code == 0 || !strings.Contains(r.stderr, "no files") {
			t.Errorf("%s without --input-format: exit %d, stderr %q; want no files found", c.src, r.code, r.stderr)
		}
		if r := loader(t, "load", "--table", c.table, "--warehouse", wh, "--input-format", "tsv2", c.src); r.code != 2 || !strings.Contains(r.stderr, "--input-format") {
			t.Errorf("--input-format tsv2: exit %d, stderr %q; want a usage error naming the flag", r.code, r.stderr)
		}
		s := parseSummary(t, mustLoader(t, "load", "--table", c.table, "--warehouse", wh, "--json",
			"--manifest-dir", t.TempDir(), "--input-format", "csv", c.src).stdout)
		if s.Files != 2 || s.Rows != 1400 {
			t.Errorf("%s: summary %+v; want 2 files, 1400 rows", c.src, s)
		}
		if diffs := fixture.Diff(scanTable(t, wh, c.table), fixture.IDs(0, 1400), fixture.CSVExpected, 10); len(diffs) > 0 {
			t.Errorf("%s: table differs:\n%s", c.src, strings.Join(diffs, "\n"))
		}
	}
}
