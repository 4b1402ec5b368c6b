package main_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gocarina/gocsv"

	"github.com/loaderproject/loader/bench"
)

// benchSummaryKeys are summary.json's keys, the contract, from the one list both packages' tests read.
var benchSummaryKeys = contractKeys("../../bench/testdata/summary_keys.txt")

// contractKeys reads a key list: one per line, # comments.
func contractKeys(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(fmt.Sprintf("the summary.json contract %s: %v", path, err))
	}
	var keys []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	return keys
}

// benchOutput is what `loader bench` wrote into its --out directory.
type benchOutput struct {
	summary map[string]json.RawMessage
	rows    []bench.Row
}

// readBenchOutput parses summary.json, results.csv, throughput.svg (XML with an <svg> root) and
// throughput.png, failing the test if one is missing or malformed.
func readBenchOutput(t *testing.T, dir string) benchOutput {
	t.Helper()
	var out benchOutput
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out.summary); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	var keys []string
	for k := range out.summary {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := slices.Sorted(slices.Values(benchSummaryKeys))
	if !slices.Equal(keys, want) {
		t.Errorf("summary.json keys = %v; want exactly %v", keys, want)
	}
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gocsv.UnmarshalFile(f, &out.rows); err != nil {
		t.Fatalf("results.csv does not parse with gocsv: %v", err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "throughput.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("throughput.svg is not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("throughput.svg's root element is <%s>; want <svg>", root)
	}
	pf, err := os.Open(filepath.Join(dir, "throughput.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if _, err := png.Decode(pf); err != nil {
		t.Errorf("throughput.png: %v", err)
	}
	return out
}

func (o benchOutput) number(t *testing.T, key string) float64 {
	t.Helper()
	var v *float64
	if err := json.Unmarshal(o.summary[key], &v); err != nil || v == nil {
		t.Fatalf("summary.json %s = %s; want a number", key, o.summary[key])
	}
	return *v
}

func (o benchOutput) kinds() map[string]int {
	m := map[string]int{}
	for _, r := range o.rows {
		k := r.Kind
		if r.Throttled {
			k += " throttled"
		}
		m[k]++
	}
	return m
}

// serveSupports reports whether `loader serve` has the flag.
func serveSupports(t *testing.T, flag string) bool {
	return strings.Contains(mustLoader(t, "serve", "--help").stdout, flag)
}

// leftSinks lists the running `loader serve` processes of a bench (their warehouses are in its
// temporary directory), on Linux.
func leftSinks(t *testing.T) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var left []string
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[0] == binary && args[1] == "serve" && strings.Contains(string(b), "loader-bench-") {
			left = append(left, strings.Join(args, " "))
		}
	}
	return left
}

func TestBenchLocalSinks(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	args := []string{"bench", "--rows", "20000", "--files", "2", "--streams", "1,2", "--repeat", "1", "--out", out}
	throttled := serveSupports(t, "--stream-rate-limit")
	if throttled {
		// --throttle-run makes each throttled loader run load the dataset a few times (hard links).
		args = append(args, "--throttle", "40MB,20ms", "--throttle-run", "250ms")
	} else {
		t.Log("loader serve has no --stream-rate-limit yet: the throttled sweep is not tested")
	}
	r := mustLoader(t, args...)
	for _, want := range []string{"median MB/s", "decode_ceiling", "transport_ceiling", "sink_ceiling", "adbc", "handwritten", "rows written"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "bench: 2/") || !strings.Contains(r.stderr, "loader streams=1 connections=1 run 1/1") {
		t.Errorf("stderr has no progress lines:\n%s", r.stderr)
	}
	o := readBenchOutput(t, out)
	for _, k := range []string{"e2e_mb_s", "decode_ceiling_mb_s", "transport_ceiling_mb_s", "sink_ceiling_mb_s", "adbc_mb_s",
		"handwritten_mb_s", "e2e_vs_decode_ceiling", "e2e_vs_adbc", "dataset_bytes", "best_streams", "max_inflight_bytes"} {
		if o.number(t, k) <= 0 {
			t.Errorf("summary.json %s = %s; want a positive number", k, o.summary[k])
		}
	}
	if o.number(t, "dataset_rows") != 20000 || string(o.summary["format"]) != `"parquet"` {
		t.Errorf("summary.json dataset_rows %s, format %s; want 20000 parquet", o.summary["dataset_rows"], o.summary["format"])
	}
	// Each run sends the dataset once (2 loader runs, 2 rivals, 2 ceilings, and the 2 throttled
	// rivals), but a throttled loader run as many times as its dataset_copies say.
	runs := 6.0
	var th struct {
		Results []struct {
			Streams       int `json:"streams"`
			DatasetCopies int `json:"dataset_copies"`
		} `json:"results"`
	}
	if throttled {
		runs += 2
		if err := json.Unmarshal(o.summary["throttled"], &th); err != nil {
			t.Fatalf("summary.json throttled = %s: %v", o.summary["throttled"], err)
		}
		for _, r := range th.Results {
			runs += float64(r.DatasetCopies)
		}
		if len(th.Results) != 2 || th.Results[0].DatasetCopies < 2 {
			t.Errorf("throttled results = %+v; want 2 stream counts, the first loading the dataset at least twice", th.Results)
		}
	}
	if got := o.number(t, "rows_written"); got != 20000*runs {
		t.Errorf("rows_written = %v; want %v", got, 20000*runs)
	}
	kinds := o.kinds()
	want := map[string]int{"decode_ceiling": 1, "loader": 2, "adbc": 1, "handwritten": 1, "transport_ceiling": 1, "sink_ceiling": 1}
	if throttled {
		want["loader throttled"], want["adbc throttled"], want["handwritten throttled"] = 2, 1, 1
	}
	if !maps.Equal(kinds, want) {
		t.Errorf("results.csv configurations = %v; want %v", kinds, want)
	}
	for _, row := range o.rows {
		if row.Repeats != 1 || row.MedianMBs <= 0 || row.MinMBs > row.MedianMBs || row.MedianMBs > row.MaxMBs || row.MedianRowsS <= 0 {
			t.Errorf("results.csv row %+v: want 1 repeat and min <= median <= max, all positive", row)
		}
	}
	if throttled {
		var th map[string]json.RawMessage
		if err := json.Unmarshal(o.summary["throttled"], &th); err != nil {
			t.Fatalf("summary.json throttled = %s: %v", o.summary["throttled"], err)
		}
		if string(th["rate_bytes_per_s"]) != "40000000" || string(th["latency_ms"]) != "20" {
			t.Errorf("throttled = %s; want rate 40000000 and latency 20", o.summary["throttled"])
		}
	} else if string(o.summary["throttled"]) != "null" {
		t.Errorf("summary.json throttled = %s without --throttle; want null", o.summary["throttled"])
	}
	if left := leftSinks(t); len(left) > 0 {
		t.Errorf("sinks left running after the bench: %v", left)
	}
}

func TestBenchRemoteEndpointSkipsWhatNeedsItsSinks(t *testing.T) {
	wh := t.TempDir()
	data := writeParquetParts(t, 2, 1500)
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--like", filepath.Join(data, "part-0.parquet"))
	srv := serve(t, wh, "--discard")
	out := filepath.Join(t.TempDir(), "results")
	r := mustLoader(t, "bench", data, "--endpoint", "grpc://"+srv.addr, "--table", tableName, "--streams", "1,2", "--repeat", "2", "--out", out, "--quiet")
	if !strings.Contains(r.stdout, "WRITES 12,000 rows into "+tableName) || !strings.Contains(r.stdout, "3,000 rows x 4 runs") {
		t.Errorf("stdout does not say what it writes first:\n%s", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("--quiet printed on stderr: %s", r.stderr)
	}
	o := readBenchOutput(t, out)
	for _, k := range []string{"transport_ceiling_mb_s", "sink_ceiling_mb_s", "adbc_mb_s", "handwritten_mb_s", "e2e_vs_adbc", "throttled"} {
		if string(o.summary[k]) != "null" {
			t.Errorf("summary.json %s = %s against a remote endpoint; want null", k, o.summary[k])
		}
	}
	if o.number(t, "e2e_mb_s") <= 0 || o.number(t, "rows_written") != 12000 || o.number(t, "decode_ceiling_mb_s") <= 0 {
		t.Errorf("summary.json = %v; want e2e and decode figures and 12000 rows written", o.summary)
	}
	if !strings.Contains(r.stdout, "note: remote endpoint") {
		t.Errorf("stdout has no note of what was skipped:\n%s", r.stdout)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--streams", "1,2,x"}, `"--streams"`},
		{[]string{"bench", "--connections", "0"}, `"--connections"`},
		{[]string{"bench", "--throttle", "25MB"}, `"--throttle"`},
		{[]string{"bench", "--throttle", "fast,150ms"}, `"--throttle"`},
		{[]string{"bench", "--format", "orc"}, "--format"},
		{[]string{"bench", "--repeat", "0"}, "--repeat"},
		{[]string{"bench", "data/", "--rows", "10"}, "--rows"},
		{[]string{"bench", "--endpoint", "grpc://127.0.0.1:1"}, "--table"},
	} {
		r := loader(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("loader %s: exit %d, stderr %q; want 2 and an error naming %s", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}
