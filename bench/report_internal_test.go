package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocarina/gocsv"
)

// summaryKeys are summary.json's keys, the contract, from the one list both packages' tests read.
var summaryKeys = contractKeys("testdata/summary_keys.txt")

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

var throttledKeys = []string{"rate_bytes_per_s", "latency_ms", "results", "best_mb_s", "best_streams", "adbc_mb_s",
	"handwritten_mb_s", "best_vs_adbc", "best_vs_handwritten"}

// run makes a sample that took secs seconds for the 100 MB dataset of testReport.
func run(secs float64) Sample {
	return Sample{Seconds: secs, CPUSeconds: secs / 2, PeakRSS: 50 << 20, Rows: 1000}
}

// testReport is a report of a 100 MB (framed) dataset: the loader at 1, 2 and 4 streams (50, 80,
// 100 MB/s), every ceiling and rival, and optionally a throttle of 30 MB/s per stream.
func testReport(throttle bool) *Report {
	rep := &Report{Format: "parquet", Files: 2, DatasetRows: 1000, DatasetBytes: 100e6, MaxInflightBytes: 256 << 20,
		MaxFrameBytes: 2 << 20, Decoders: 2, Repeat: 2, Protocol: "zerobus", Table: "bench.default.events", RowsWritten: 12000}
	add := func(kind Kind, throttled bool, streams int, secs ...float64) {
		r := &Result{Kind: kind, Throttled: throttled, Streams: streams, Connections: min(streams, 8)}
		for _, s := range secs {
			r.Samples = append(r.Samples, run(s))
		}
		rep.Results = append(rep.Results, r)
	}
	add(KindDecode, false, 0, 0.5, 0.5)      // 200 MB/s
	add(KindLoader, false, 1, 2, 2)          // 50
	add(KindLoader, false, 2, 1.25, 1.25)    // 80
	add(KindLoader, false, 4, 0.9, 1.1)      // 101 (the median of 111 and 91)
	add(KindADBC, false, 1, 4, 4)            // 25
	add(KindHandwritten, false, 1, 2.5, 2.5) // 40
	add(KindTransport, false, 4, 0.25, 0.25) // 400
	add(KindSink, false, 4, 1, 1)            // 100
	if throttle {
		rep.Throttle = &Throttle{Rate: 30e6, Latency: 150 * time.Millisecond}
		add(KindLoader, true, 1, 4, 4)       // 25 of min(30, 100)
		add(KindLoader, true, 2, 2, 2)       // 50 of min(60, 100)
		add(KindLoader, true, 4, 1.25, 1.25) // 80 of min(120, 100)
		add(KindADBC, true, 1, 5, 5)         // 20
		add(KindHandwritten, true, 1, 4, 4)  // 25
	}
	return rep
}

func keysOf(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func checkKeys(t *testing.T, what string, m map[string]json.RawMessage, want []string) {
	t.Helper()
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		t.Errorf("%s keys = %v; want exactly %v", what, got, w)
	}
}

func near(a *float64, want float64) bool {
	return a != nil && math.Abs(*a-want) < 1e-9*max(1, math.Abs(want))
}

func TestSummary(t *testing.T) {
	s := testReport(true).Summary()
	for _, c := range []struct {
		name string
		got  *float64
		want float64
	}{
		{"e2e_mb_s", s.E2EMBs, 101.01010101010101}, // median of 100/0.9 and 100/1.1
		{"decode_ceiling_mb_s", s.DecodeCeilingMBs, 200},
		{"transport_ceiling_mb_s", s.TransportCeilingMBs, 400},
		{"sink_ceiling_mb_s", s.SinkCeilingMBs, 100},
		{"adbc_mb_s", s.ADBCMBs, 25},
		{"handwritten_mb_s", s.HandwrittenMBs, 40},
		{"e2e_vs_decode_ceiling", s.E2EVsDecodeCeiling, 101.01010101010101 / 200},
		{"e2e_vs_adbc", s.E2EVsADBC, 101.01010101010101 / 25},
		{"cpu_s_per_gb", s.CPUSPerGB, 5},           // half a second of CPU per wall second, 0.1 GB a second
		{"adbc_cpu_s_per_gb", s.ADBCCPUSPerGB, 20}, // 2 s of CPU for 0.1 GB
		{"cpu_vs_adbc", s.CPUVsADBC, 0.25},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
	if s.BestStreams == nil || *s.BestStreams != 4 || *s.BestConnections != 4 || s.PeakRSSBytes == nil || *s.PeakRSSBytes != 50<<20 {
		t.Errorf("best = %v streams, %v connections, peak %v; want 4, 4, 50 MiB", s.BestStreams, s.BestConnections, s.PeakRSSBytes)
	}
	th := s.Throttled
	if th == nil || th.RateBytesPerS != 30e6 || th.LatencyMs != 150 || len(th.Results) != 3 {
		t.Fatalf("throttled = %+v; want 30 MB/s, 150 ms and 3 results", th)
	}
	for i, want := range []struct{ streams, mbs, expected float64 }{{1, 25, 30}, {2, 50, 60}, {4, 80, 101.01010101010101}} {
		r := th.Results[i]
		if float64(r.Streams) != want.streams || !near(r.MBs, want.mbs) || !near(r.ExpectedMBs, want.expected) || !near(r.Ratio, want.mbs/want.expected) {
			t.Errorf("throttled result %d = %d streams %v MB/s of %v (%v); want %v streams %v of %v", i, r.Streams, *r.MBs, *r.ExpectedMBs, *r.Ratio, want.streams, want.mbs, want.expected)
		}
	}
	if !near(th.BestMBs, 80) || *th.BestStreams != 4 || !near(th.BestVsADBC, 4) || !near(th.BestVsHandwritten, 80.0/25) {
		t.Errorf("throttled best = %v at %v streams, vs ADBC %v, vs hand-written %v; want 80 at 4, 4, 3.2", *th.BestMBs, *th.BestStreams, *th.BestVsADBC, *th.BestVsHandwritten)
	}
}

func TestSummaryKeysAreAlwaysThereAndNullWhenSkipped(t *testing.T) {
	// A remote run: the loader and the decode ceiling only, and nothing known of CPU or RSS.
	rep := testReport(false)
	var kept []*Result
	for _, r := range rep.Results {
		if r.Kind == KindLoader || r.Kind == KindDecode {
			for i := range r.Samples {
				r.Samples[i].CPUSeconds, r.Samples[i].PeakRSS = -1, -1
			}
			kept = append(kept, r)
		}
	}
	rep.Results, rep.Remote = kept, true
	b, err := json.Marshal(rep.Summary())
	if err != nil {
		t.Fatal(err)
	}
	m := keysOf(t, b)
	checkKeys(t, "summary.json", m, summaryKeys)
	for _, k := range []string{"transport_ceiling_mb_s", "sink_ceiling_mb_s", "adbc_mb_s", "handwritten_mb_s", "e2e_vs_transport_ceiling",
		"e2e_vs_sink_ceiling", "e2e_vs_adbc", "e2e_vs_handwritten", "adbc_cpu_s_per_gb", "handwritten_cpu_s_per_gb", "cpu_vs_adbc",
		"cpu_s_per_gb", "peak_rss_bytes", "throttled"} {
		if string(m[k]) != "null" {
			t.Errorf("%s = %s; want null (not measured)", k, m[k])
		}
	}
	for _, k := range []string{"e2e_mb_s", "decode_ceiling_mb_s", "e2e_vs_decode_ceiling", "best_streams"} {
		if string(m[k]) == "null" {
			t.Errorf("%s is null; want the measured figure", k)
		}
	}

	b, err = json.Marshal(testReport(true).Summary())
	if err != nil {
		t.Fatal(err)
	}
	th := keysOf(t, keysOf(t, b)["throttled"])
	checkKeys(t, "throttled", th, throttledKeys)
	var results []map[string]json.RawMessage
	if err := json.Unmarshal(th["results"], &results); err != nil || len(results) == 0 {
		t.Fatalf("throttled.results = %s, %v", th["results"], err)
	}
	checkKeys(t, "throttled.results[0]", results[0], []string{"streams", "mb_s", "expected_mb_s", "ratio", "dataset_copies"})
}

func TestWriteFiles(t *testing.T) {
	for _, throttle := range []bool{false, true} {
		rep := testReport(throttle)
		dir := filepath.Join(t.TempDir(), "out")
		if err := rep.WriteFiles(dir); err != nil {
			t.Fatalf("WriteFiles: %v", err)
		}
		f, err := os.Open(filepath.Join(dir, ResultsFile))
		if err != nil {
			t.Fatal(err)
		}
		var rows []Row
		err = gocsv.UnmarshalFile(f, &rows)
		f.Close()
		if err != nil {
			t.Fatalf("%s does not parse: %v", ResultsFile, err)
		}
		if len(rows) != len(rep.Results) || rows[3].Kind != "loader" || rows[3].Streams != 4 || math.Abs(rows[3].MedianMBs-101.01010101010101) > 1e-6 {
			t.Errorf("%s rows = %+v", ResultsFile, rows)
		}
		svg, err := os.ReadFile(filepath.Join(dir, ChartSVG))
		if err != nil {
			t.Fatal(err)
		}
		checkSVG(t, svg)
		pf, err := os.Open(filepath.Join(dir, ChartPNG))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(pf)
		pf.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("%s: %v", ChartPNG, err)
		}
		var out bytes.Buffer
		if err := rep.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"median MB/s", "transport_ceiling", "handwritten", "best loader: 4 streams"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("WriteTable() lacks %q:\n%s", want, out.String())
			}
		}
	}
}

// checkSVG checks b is XML whose root element is <svg>.
func checkSVG(t *testing.T, b []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("the SVG does not parse as XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "svg" {
				t.Errorf("the SVG's root element is <%s>; want <svg>", se.Name.Local)
			}
			break
		}
	}
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Errorf("the SVG does not parse to its end: %v", err)
			}
			return
		}
	}
}

// TestStatsCountCopies: a run that loaded the dataset k times moved k times its bytes.
func TestStatsCountCopies(t *testing.T) {
	r := &Result{Kind: KindLoader, Throttled: true, Streams: 4, Samples: []Sample{{Seconds: 2, CPUSeconds: 1, Rows: 3000, Copies: 3}}}
	st := r.stats(100e6)
	if st.mbs.median != 150 || st.cpuPerGB != 1/0.3 {
		t.Errorf("stats of 3 copies of 100 MB in 2 s, 1 CPU s = %v MB/s, %v CPU s/GB; want 150 and %v", st.mbs.median, st.cpuPerGB, 1/0.3)
	}
}

func TestCopiesFor(t *testing.T) {
	for _, c := range []struct {
		run, rate float64
		bytes     int64
		want      int
	}{
		{8, 25e6, 200e6, 1},
		{8, 200e6, 200e6, 8},
		{8, 201e6, 200e6, 9},
		{8, 1e9, 1e6, maxCopies},
		{0, 1e9, 1e6, 1},
		{8, 1e9, 0, 1},
	} {
		if got := copiesFor(c.run, c.rate, c.bytes); got != c.want {
			t.Errorf("copiesFor(%v, %v, %v) = %d; want %d", c.run, c.rate, c.bytes, got, c.want)
		}
	}
}
