package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
)

// proc is a loader subprocess whose stderr lines arrive on a channel.
type proc struct {
	cmd    *exec.Cmd
	out    string // the file stdout goes to (the child writes it, so reading it races with nothing)
	lines  chan string
	stderr strings.Builder // every line, once the channel is drained
	done   chan struct{}
	err    error
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...), lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.out = filepath.Join(t.TempDir(), "stdout")
	out, err := os.Create(p.out)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p.cmd.Stdout = out
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody is reading: keep the line for the report only
			}
			p.stderr.WriteString(sc.Text() + "\n")
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stdout returns what the process wrote on stdout so far.
func (p *proc) stdout(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// await reads stderr lines until match returns true for one, and returns it.
func (p *proc) await(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("loader exited (%v) before %s; stderr:\n%s", p.err, what, p.stderr.String())
			}
			if match(line) {
				return line
			}
		case <-timeout:
			t.Fatalf("no %s within 2 minutes", what)
		}
	}
}

// wait waits for the process to end and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	go func() {
		for range p.lines {
		}
	}()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatal("loader did not end within 3 minutes")
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

func progressRows(line string) int64 {
	rest, ok := strings.CutPrefix(line, "progress: rows ")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(strings.Fields(rest)[0], ",", ""), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// scrape reads a /metrics page with the Prometheus text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels include want, and whether
// there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// serveWithMetrics starts `loader serve --metrics-addr` and returns it with its two addresses.
func serveWithMetrics(t *testing.T, wh string, extra ...string) (p *proc, addr, metrics string) {
	t.Helper()
	p = start(t, nil, append([]string{"serve", "--warehouse", wh, "--listen", "127.0.0.1:0", "--commit-interval", "50ms", "--metrics-addr", "127.0.0.1:0"}, extra...)...)
	for addr == "" {
		line := p.await(t, "the listening line", func(l string) bool {
			return strings.HasPrefix(l, "listening on ") || strings.HasPrefix(l, "metrics on http://")
		})
		if a, ok := strings.CutPrefix(line, "metrics on http://"); ok {
			metrics = strings.TrimSuffix(a, "/metrics")
		}
		if a, ok := strings.CutPrefix(line, "listening on "); ok {
			addr = a
		}
	}
	if metrics == "" {
		t.Fatal("loader serve --metrics-addr did not print where /metrics is")
	}
	go func() {
		for range p.lines {
		}
	}()
	return p, addr, metrics
}

func stopServe(t *testing.T, p *proc) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("loader serve exited %d after SIGTERM; want 0", code)
	}
}

// TestShardsOnOneServe runs three shards as processes against one `loader serve`, as a Kubernetes
// Indexed Job would: shard 1 is started twice at once (the second fails on the manifest lock), then
// killed with SIGKILL mid-load and run again beside shards 0 and 2. Shard 0 serves /metrics, which
// is scraped during and after its load; the sink's /metrics is compared with the table.
func TestShardsOnOneServe(t *testing.T) {
	const files, rowsPer = 9, 2000
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	data := writeParquetParts(t, files, rowsPer)
	perShard := make([]int, 3)
	for i := range files {
		perShard[load.HashShard(fmt.Sprintf("part-%d.parquet", i), 3)]++
	}
	for k, n := range perShard {
		if n == 0 {
			t.Fatalf("shard %d has no file of %d (hash assignment %v); the test needs every shard busy", k, files, perShard)
		}
	}
	srv, addr, sinkMetrics := serveWithMetrics(t, wh, "--fault-ack-delay", "30ms")
	manifests := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"load", "--table", tableName, "--endpoint", "grpc://" + addr, "--json", "--shard-count", "3",
			"--manifest-dir", manifests, "--max-frame-bytes", "8KiB", "--progress-interval", "20ms"}, append(extra, data)...)
	}
	shard := func(k int) []string { return []string{"JOB_COMPLETION_INDEX=" + strconv.Itoa(k)} }

	// Shard 1, slowly; once it has rows acknowledged, a second shard 1 is refused.
	first := start(t, shard(1), args("--streams", "1", "--max-inflight-bytes", "32KiB")...)
	first.await(t, "acknowledged rows", func(l string) bool { return progressRows(l) > 0 })
	twin := start(t, shard(1), args()...)
	if code := twin.wait(t); code != 1 || !strings.Contains(twin.stderr.String(), "in use by another loader") {
		t.Fatalf("a second shard 1 at once: exit %d, stderr %s; want 1 and the manifest lock", code, twin.stderr.String())
	}
	// Killed once its manifest records acknowledged rows (checked at each progress line).
	first.await(t, "acknowledged rows in the manifest", func(l string) bool {
		if progressRows(l) <= 0 {
			return false
		}
		got, _ := filepath.Glob(filepath.Join(manifests, "shard-1-of-3", "*.jsonl"))
		for _, m := range got {
			if b, err := os.ReadFile(m); err == nil && bytes.Contains(b, []byte(`"from"`)) {
				return true
			}
		}
		return false
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t); code != -1 {
		t.Fatalf("shard 1 ended with %d before SIGKILL; make its load slower", code)
	}

	status := []string{"status", "--shards", "--table", tableName, "--endpoint", "grpc://" + addr, "--manifest-dir", manifests, "--json", data}
	r := loader(t, status...)
	before := statusReport(t, r.stdout)
	if r.code != 1 || before.Done != 0 || before.Shards[1].State != load.ShardPending || before.Shards[0].State != load.ShardNotStarted ||
		before.Shards[1].Rows == 0 {
		t.Errorf("status --shards after the kill: exit %d, %+v; want 1, shard 1 pending with rows, the others not started", r.code, before)
	}

	// All three, with shard 1 resuming; shard 0 serves metrics and lingers until told to stop.
	w0 := start(t, shard(0), args("--metrics-addr", "127.0.0.1:0", "--metrics-linger", "10m")...)
	w1 := start(t, shard(1), args()...)
	w2 := start(t, shard(2), args()...)
	line := w0.await(t, "the metrics address", func(l string) bool { return strings.HasPrefix(l, "metrics on http://") })
	metricsAddr := strings.TrimSuffix(strings.TrimPrefix(line, "metrics on http://"), "/metrics")
	during := scrape(t, metricsAddr)
	labels := map[string]string{"table": tableName, "target": "grpc://" + addr, "shard": "shard-0-of-3"}
	if _, ok := value(during, "loader_rows_acked_total", labels); !ok {
		t.Errorf("/metrics during the load has no loader_rows_acked_total%v", labels)
	}
	for _, w := range []*proc{w1, w2} {
		if code := w.wait(t); code != 0 {
			t.Fatalf("shard exited %d: %s", code, w.stderr.String())
		}
	}
	// Shard 0's summary is printed before it lingers.
	w0.await(t, "the linger", func(l string) bool { return strings.HasPrefix(l, "serving metrics ") })
	s0 := parseSummary(t, w0.stdout(t))
	after := scrape(t, metricsAddr)
	for name, want := range map[string]int64{
		"loader_rows_acked_total": s0.Rows, "loader_bytes_acked_total": s0.Bytes, "loader_rows_read_total": s0.RowsRead,
		"loader_retries_total": s0.Retries, "loader_rows_quarantined_total": s0.RowsQuarantined, "loader_inflight_bytes": 0, "loader_streams_open": 0,
	} {
		if got, ok := value(after, name, labels); !ok || int64(got) != want {
			t.Errorf("%s after the load = %v (found %v); want %d as in the summary", name, got, ok, want)
		}
	}
	if got, _ := value(after, "loader_files_total", map[string]string{"state": "found", "shard": "shard-0-of-3"}); int(got) != s0.Files {
		t.Errorf("loader_files_total{state=found} = %v; want %d", got, s0.Files)
	}
	if n, _ := value(after, "loader_ack_latency_seconds", labels); n == 0 {
		t.Error("loader_ack_latency_seconds has no samples")
	}
	_ = w0.cmd.Process.Signal(syscall.SIGTERM)
	if code := w0.wait(t); code != 0 {
		t.Errorf("shard 0 exited %d after SIGTERM ended its linger; want 0: %s", code, w0.stderr.String())
	}

	s1, s2 := parseSummary(t, w1.stdout(t)), parseSummary(t, w2.stdout(t))
	for k, s := range []load.Summary{s0, s1, s2} {
		if s.Shard == nil || s.Shard.Index != k || s.Shard.Count != 3 || s.Shard.IndexFrom != "JOB_COMPLETION_INDEX" || s.Shard.CountFrom != "flag" {
			t.Errorf("shard %d summary says shard %+v; want index %d of 3 from JOB_COMPLETION_INDEX", k, s.Shard, k)
		}
		if s.Files != perShard[k] {
			t.Errorf("shard %d loaded %d files; want its own %d", k, s.Files, perShard[k])
		}
	}
	if s1.Rows >= int64(perShard[1]*rowsPer) {
		t.Errorf("shard 1 re-run loaded %d rows, all of its %d; want it to resume after the kill", s1.Rows, perShard[1]*rowsPer)
	}
	if s0.Rows != int64(perShard[0]*rowsPer) || s2.Rows != int64(perShard[2]*rowsPer) {
		t.Errorf("shards 0 and 2 loaded %d and %d rows; want %d and %d", s0.Rows, s2.Rows, perShard[0]*rowsPer, perShard[2]*rowsPer)
	}

	r = loader(t, status...)
	done := statusReport(t, r.stdout)
	if r.code != 0 || done.Done != 3 || done.Rows != files*rowsPer {
		t.Errorf("status --shards at the end: exit %d, %+v; want 0, 3 shards done, %d rows", r.code, done, files*rowsPer)
	}
	for k, st := range done.Shards {
		if st.Rows != int64(perShard[k]*rowsPer) || st.UnitsPending != 0 || st.Bytes != st.BytesTotal {
			t.Errorf("status of shard %d = %+v; want %d rows, nothing pending", k, st, perShard[k]*rowsPer)
		}
	}

	sinkAcked, ok := value(scrape(t, sinkMetrics), "sink_rows_acked_total", map[string]string{"table": tableName})
	if !ok {
		t.Fatal("the sink's /metrics has no sink_rows_acked_total for the table")
	}
	stopServe(t, srv)
	rows := scanTable(t, wh, tableName)
	seen := map[any]int{}
	for _, r := range rows {
		seen[r["id"]]++
	}
	if len(seen) != files*rowsPer {
		t.Fatalf("table holds %d distinct ids; want every one of %d", len(seen), files*rowsPer)
	}
	if int64(sinkAcked) != int64(len(rows)) {
		t.Errorf("sink_rows_acked_total = %v; want the %d rows the table holds", sinkAcked, len(rows))
	}
	// Rows shard 1 sent before SIGKILL that were made durable but whose ack it never recorded are
	// sent again by the re-run; the sink stores each unit range once, so none is there twice.
	if len(rows) != len(seen) {
		t.Errorf("table holds %d rows for %d ids: %d duplicated by the killed shard; want each row once", len(rows), len(seen), len(rows)-len(seen))
	}
}

func statusReport(t *testing.T, stdout string) load.ShardsReport {
	t.Helper()
	var r load.ShardsReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || len(r.Shards) != r.Count {
		t.Fatalf("status --shards --json printed %q (%v)", stdout, err)
	}
	return r
}

// TestPlanShardsCLI makes a plan with `loader plan --shards 3 --json` and loads its three shards with
// --plan into the embedded sink: the big file is split by row groups and every row lands once.
func TestPlanShardsCLI(t *testing.T) {
	wh := t.TempDir()
	data := t.TempDir()
	if err := fixture.WriteParquet(filepath.Join(data, "big.parquet"), 0, 3000, 300); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := fixture.WriteParquet(filepath.Join(data, fmt.Sprintf("small-%d.parquet", i)), 3000+int64(i)*100, 100, 100); err != nil {
			t.Fatal(err)
		}
	}
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	out := mustLoader(t, "plan", "--shards", "3", "--json", data).stdout
	plan, err := load.ReadShardPlan(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	split := 0
	for _, a := range plan.Assignments {
		for _, f := range a.Files {
			if f.Rel == "big.parquet" && len(f.Units) > 0 {
				split++
			}
		}
	}
	if split < 2 {
		t.Fatalf("big.parquet is split over %d shards; want several:\n%s", split, out)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := loader(t, "load", "--table", tableName, "--warehouse", wh, "--plan", planFile, "--shard-index", "0", "--shard-count", "4"); r.code != 2 {
		t.Errorf("--plan of 3 shards with --shard-count 4: exit %d; want 2\n%s", r.code, r.stderr)
	}
	var total int64
	for k := range 3 {
		s := parseSummary(t, mustLoader(t, "load", "--table", tableName, "--warehouse", wh, "--plan", planFile, "--shard-index", strconv.Itoa(k), "--json").stdout)
		if s.Shard == nil || s.Shard.Assignment != "plan" || s.Shard.CountFrom != "plan" {
			t.Errorf("shard %d summary says %+v; want a plan shard whose count came from the plan", k, s.Shard)
		}
		total += s.Rows
	}
	if total != 3200 {
		t.Errorf("plan shards loaded %d rows; want 3200", total)
	}
	if diffs := fixture.Diff(scanTable(t, wh, tableName), fixture.IDs(0, 3200), fixture.Expected, 10); len(diffs) > 0 {
		t.Errorf("table differs from the files:\n  %s", strings.Join(diffs, "\n  "))
	}
}
