package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/gocarina/gocsv"
)

// Report is what a benchmark measured.
type Report struct {
	Format           string // parquet, csv, ipc or mixed
	Files            int
	SourceBytes      int64  // the files' size on disk
	DataDir          string // where the generated dataset was kept; "" when it was not kept or not generated
	DatasetRows      int64
	DatasetBytes     int64 // the dataset as the loader frames it (a loader run's Summary.Bytes)
	MaxInflightBytes int64
	MaxFrameBytes    int
	Decoders         int
	Repeat           int
	Protocol         string
	Compression      string // of the frames: none, lz4 or zstd
	Remote           bool   // run against Load.Endpoint rather than local sinks
	Table            string
	Throttle         *Throttle
	Results          []*Result
	Notes            []string // what was skipped and why, and other things to know
	RowsWritten      int64    // rows sent to targets, over every run
	Elapsed          time.Duration
}

// Result is one configuration's runs.
type Result struct {
	Kind                 Kind
	Throttled            bool
	Streams, Connections int // 0 for the decode ceiling
	// Asked is the connection count the sweep asked for: Connections, or 0 for the load's
	// default (then Connections is what that default gave).
	Asked   int
	Samples []Sample
}

// stats are a result's figures, with MB/s computed from the dataset's framed size.
type stats struct {
	mbs, rows spread
	cpuPerGB  float64 // median; NaN when unknown
	// sinkCPUPerGB is the local sink's CPU s/GB, median; NaN when unknown
	sinkCPUPerGB float64
	peakRSS      int64 // the largest of the runs; -1 when unknown
	seconds      spread
}

// stats computes a result's figures. Every MB/s is datasetBytes / 1e6 / wall seconds, whatever the
// kind, so two MB/s figures compare as the inverse of their times (times the copies of the dataset
// a throttled run loaded, see Throttle.Run).
func (r *Result) stats(datasetBytes int64) stats {
	var mbs, rows, secs, cpu, sinkCPU []float64
	st := stats{peakRSS: -1, cpuPerGB: math.NaN(), sinkCPUPerGB: math.NaN()}
	for _, s := range r.Samples {
		secs = append(secs, s.Seconds)
		mbs = append(mbs, s.times()*float64(datasetBytes)/1e6/s.Seconds)
		rows = append(rows, float64(s.Rows)/s.Seconds)
		if s.CPUSeconds >= 0 && datasetBytes > 0 {
			cpu = append(cpu, s.CPUSeconds/(s.times()*float64(datasetBytes)/1e9))
		}
		if s.SinkCPUSeconds >= 0 && datasetBytes > 0 {
			sinkCPU = append(sinkCPU, s.SinkCPUSeconds/(s.times()*float64(datasetBytes)/1e9))
		}
		st.peakRSS = max(st.peakRSS, s.PeakRSS)
	}
	st.mbs, st.rows, st.seconds = spreadOf(mbs), spreadOf(rows), spreadOf(secs)
	if len(cpu) == len(r.Samples) {
		st.cpuPerGB = spreadOf(cpu).median
	}
	if len(sinkCPU) == len(r.Samples) {
		st.sinkCPUPerGB = spreadOf(sinkCPU).median
	}
	return st
}

// find returns the result of a configuration, or nil.
func (rep *Report) find(kind Kind, throttled bool) []*Result {
	var out []*Result
	for _, r := range rep.Results {
		if r.Kind == kind && r.Throttled == throttled && len(r.Samples) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// best is the loader configuration with the highest median MB/s (throttled or not), or nil.
func (rep *Report) best(throttled bool) *Result {
	var best *Result
	bestMBs := -1.0
	for _, r := range rep.find(KindLoader, throttled) {
		if m := r.stats(max(rep.DatasetBytes, 1)).mbs.median; m > bestMBs {
			best, bestMBs = r, m
		}
	}
	return best
}

// median is the median MB/s of the one result of a kind, nil when it was not measured.
func (rep *Report) median(kind Kind, throttled bool) *float64 {
	rs := rep.find(kind, throttled)
	if len(rs) == 0 {
		return nil
	}
	return num(rs[0].stats(rep.DatasetBytes).mbs.median)
}

func (rep *Report) cpu(kind Kind, throttled bool) *float64 {
	rs := rep.find(kind, throttled)
	if len(rs) == 0 {
		return nil
	}
	return num(rs[0].stats(rep.DatasetBytes).cpuPerGB)
}

// num is a JSON number, or null for NaN and infinities.
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// ratio is a/b, or null when either is missing or b is zero.
func ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	return num(*a / *b)
}

// Summary is summary.json: the contract read by scripts. Every key is always present; a figure
// whose measurement was skipped is null.
type Summary struct {
	E2EMBs                *float64          `json:"e2e_mb_s"`
	DecodeCeilingMBs      *float64          `json:"decode_ceiling_mb_s"`
	TransportCeilingMBs   *float64          `json:"transport_ceiling_mb_s"`
	SinkCeilingMBs        *float64          `json:"sink_ceiling_mb_s"`
	ADBCMBs               *float64          `json:"adbc_mb_s"`
	HandwrittenMBs        *float64          `json:"handwritten_mb_s"`
	PeakRSSBytes          *int64            `json:"peak_rss_bytes"`
	E2EVsDecodeCeiling    *float64          `json:"e2e_vs_decode_ceiling"`
	E2EVsTransportCeiling *float64          `json:"e2e_vs_transport_ceiling"`
	E2EVsSinkCeiling      *float64          `json:"e2e_vs_sink_ceiling"`
	E2EVsADBC             *float64          `json:"e2e_vs_adbc"`
	E2EVsHandwritten      *float64          `json:"e2e_vs_handwritten"`
	CPUSPerGB             *float64          `json:"cpu_s_per_gb"`
	ADBCCPUSPerGB         *float64          `json:"adbc_cpu_s_per_gb"`
	HandwrittenCPUSPerGB  *float64          `json:"handwritten_cpu_s_per_gb"`
	CPUVsADBC             *float64          `json:"cpu_vs_adbc"`
	BestStreams           *int              `json:"best_streams"`
	BestConnections       *int              `json:"best_connections"`
	DatasetBytes          int64             `json:"dataset_bytes"`
	DatasetRows           int64             `json:"dataset_rows"`
	Format                string            `json:"format"`
	MaxInflightBytes      int64             `json:"max_inflight_bytes"`
	RowsWritten           int64             `json:"rows_written"`
	Throttled             *ThrottledSummary `json:"throttled"`
}

// ThrottledSummary is summary.json's "throttled" object.
type ThrottledSummary struct {
	RateBytesPerS     int64             `json:"rate_bytes_per_s"`
	LatencyMs         float64           `json:"latency_ms"`
	Results           []ThrottledResult `json:"results"`
	BestMBs           *float64          `json:"best_mb_s"`
	BestStreams       *int              `json:"best_streams"`
	ADBCMBs           *float64          `json:"adbc_mb_s"`
	HandwrittenMBs    *float64          `json:"handwritten_mb_s"`
	BestVsADBC        *float64          `json:"best_vs_adbc"`
	BestVsHandwritten *float64          `json:"best_vs_handwritten"`
}

// ThrottledResult is the throttled loader at one stream count (its best connection count), against
// what it could reach: min(streams × rate, the unthrottled e2e_mb_s).
type ThrottledResult struct {
	Streams     int      `json:"streams"`
	MBs         *float64 `json:"mb_s"`
	ExpectedMBs *float64 `json:"expected_mb_s"`
	Ratio       *float64 `json:"ratio"`
	// DatasetCopies is how many times the runs at this stream count loaded the dataset (the most of
	// any run; see Throttle.Run).
	DatasetCopies int `json:"dataset_copies"`
}

// Summary computes summary.json.
func (rep *Report) Summary() Summary {
	s := Summary{
		DatasetBytes: rep.DatasetBytes, DatasetRows: rep.DatasetRows, Format: rep.Format,
		MaxInflightBytes: rep.MaxInflightBytes, RowsWritten: rep.RowsWritten,
		DecodeCeilingMBs:     rep.median(KindDecode, false),
		TransportCeilingMBs:  rep.median(KindTransport, false),
		SinkCeilingMBs:       rep.median(KindSink, false),
		ADBCMBs:              rep.median(KindADBC, false),
		HandwrittenMBs:       rep.median(KindHandwritten, false),
		ADBCCPUSPerGB:        rep.cpu(KindADBC, false),
		HandwrittenCPUSPerGB: rep.cpu(KindHandwritten, false),
	}
	if best := rep.best(false); best != nil {
		st := best.stats(rep.DatasetBytes)
		s.E2EMBs, s.CPUSPerGB = num(st.mbs.median), num(st.cpuPerGB)
		s.BestStreams, s.BestConnections = &best.Streams, &best.Connections
		if st.peakRSS >= 0 {
			s.PeakRSSBytes = &st.peakRSS
		}
	}
	s.E2EVsDecodeCeiling = ratio(s.E2EMBs, s.DecodeCeilingMBs)
	s.E2EVsTransportCeiling = ratio(s.E2EMBs, s.TransportCeilingMBs)
	s.E2EVsSinkCeiling = ratio(s.E2EMBs, s.SinkCeilingMBs)
	s.E2EVsADBC = ratio(s.E2EMBs, s.ADBCMBs)
	s.E2EVsHandwritten = ratio(s.E2EMBs, s.HandwrittenMBs)
	s.CPUVsADBC = ratio(s.CPUSPerGB, s.ADBCCPUSPerGB)
	if t := rep.Throttle; t != nil {
		s.Throttled = rep.throttledSummary(t, s.E2EMBs)
	}
	return s
}

func (rep *Report) throttledSummary(t *Throttle, e2e *float64) *ThrottledSummary {
	ts := &ThrottledSummary{
		RateBytesPerS: t.Rate, LatencyMs: float64(t.Latency) / float64(time.Millisecond),
		Results:        []ThrottledResult{},
		ADBCMBs:        rep.median(KindADBC, true),
		HandwrittenMBs: rep.median(KindHandwritten, true),
	}
	byStreams := map[int]*Result{}
	var order []int
	for _, r := range rep.find(KindLoader, true) {
		cur, ok := byStreams[r.Streams]
		if !ok {
			order = append(order, r.Streams)
		}
		if !ok || r.stats(rep.DatasetBytes).mbs.median > cur.stats(rep.DatasetBytes).mbs.median {
			byStreams[r.Streams] = r
		}
	}
	for _, n := range order {
		r := byStreams[n]
		mbs := num(r.stats(rep.DatasetBytes).mbs.median)
		expected := float64(n) * float64(t.Rate) / 1e6
		if e2e != nil {
			expected = min(expected, *e2e)
		}
		exp := num(expected)
		copies := 1
		for _, smp := range r.Samples {
			copies = max(copies, smp.Copies)
		}
		ts.Results = append(ts.Results, ThrottledResult{Streams: n, MBs: mbs, ExpectedMBs: exp, Ratio: ratio(mbs, exp), DatasetCopies: copies})
	}
	if best := rep.best(true); best != nil {
		ts.BestMBs, ts.BestStreams = num(best.stats(rep.DatasetBytes).mbs.median), &best.Streams
	}
	ts.BestVsADBC = ratio(ts.BestMBs, ts.ADBCMBs)
	ts.BestVsHandwritten = ratio(ts.BestMBs, ts.HandwrittenMBs)
	return ts
}

// Row is one line of results.csv: one configuration's runs.
type Row struct {
	Kind          string   `csv:"kind"`
	Throttled     bool     `csv:"throttled"`
	Streams       int      `csv:"streams"`
	Connections   int      `csv:"connections"`
	Repeats       int      `csv:"repeats"`
	MinMBs        float64  `csv:"min_mb_s"`
	MedianMBs     float64  `csv:"median_mb_s"`
	MaxMBs        float64  `csv:"max_mb_s"`
	MinRowsS      float64  `csv:"min_rows_s"`
	MedianRowsS   float64  `csv:"median_rows_s"`
	MaxRowsS      float64  `csv:"max_rows_s"`
	MedianSeconds float64  `csv:"median_seconds"`
	CPUSPerGB     *float64 `csv:"cpu_s_per_gb"`   // empty when unknown
	PeakRSSBytes  *int64   `csv:"peak_rss_bytes"` // empty when unknown
	// SinkCPUSPerGB is the local sink process's CPU s/GB; empty when unknown (the decode ceiling,
	// a remote target, not Linux)
	SinkCPUSPerGB *float64 `csv:"sink_cpu_s_per_gb"`
}

// Rows returns results.csv's rows, in the order the configurations ran.
func (rep *Report) Rows() []Row {
	var out []Row
	for _, r := range rep.Results {
		if len(r.Samples) == 0 {
			continue
		}
		st := r.stats(rep.DatasetBytes)
		row := Row{
			Kind: string(r.Kind), Throttled: r.Throttled, Streams: r.Streams, Connections: r.Connections, Repeats: len(r.Samples),
			MinMBs: st.mbs.min, MedianMBs: st.mbs.median, MaxMBs: st.mbs.max,
			MinRowsS: st.rows.min, MedianRowsS: st.rows.median, MaxRowsS: st.rows.max,
			MedianSeconds: st.seconds.median, CPUSPerGB: num(st.cpuPerGB), SinkCPUSPerGB: num(st.sinkCPUPerGB),
		}
		if st.peakRSS >= 0 {
			row.PeakRSSBytes = &st.peakRSS
		}
		out = append(out, row)
	}
	return out
}

// Output files of WriteFiles.
const (
	ResultsFile = "results.csv"
	SummaryFile = "summary.json"
	ChartSVG    = "throughput.svg"
	ChartPNG    = "throughput.png"
)

// WriteFiles writes results.csv, summary.json, throughput.svg and throughput.png into dir, creating
// it.
func (rep *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	csv, err := gocsv.MarshalBytes(rep.Rows())
	if err != nil {
		return fmt.Errorf("%s: %w", ResultsFile, err)
	}
	if err := writeFile(filepath.Join(dir, ResultsFile), csv); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep.Summary(), "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", SummaryFile, err)
	}
	if err := writeFile(filepath.Join(dir, SummaryFile), append(js, '\n')); err != nil {
		return err
	}
	return rep.chart(filepath.Join(dir, ChartSVG), filepath.Join(dir, ChartPNG))
}

// writeFile writes b to path through a temporary file, so a reader never sees half of it.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// WriteTable writes the results as an aligned text table, with the dataset and the summary's ratios.
func (rep *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "dataset: %s rows in %d %s files (%.1f MB on disk); %.1f MB as the loader frames it\n",
		humanize.Comma(rep.DatasetRows), rep.Files, rep.Format, float64(rep.SourceBytes)/1e6, float64(rep.DatasetBytes)/1e6)
	fmt.Fprintf(w, "MB/s = %.1f MB (the framed dataset, MB = 10^6 bytes) / wall seconds, for every row, so MB/s ratios are time ratios\n",
		float64(rep.DatasetBytes)/1e6)
	fmt.Fprintf(w, "protocol %s, %d decoders, frames <= %s (compression %s), in flight <= %s, %d runs each\n",
		rep.Protocol, rep.Decoders, mib(int64(rep.MaxFrameBytes)), rep.Compression, mib(rep.MaxInflightBytes), rep.Repeat)
	if t := rep.Throttle; t != nil {
		fmt.Fprintf(w, "throttled sink: %.1f MB/s per DoPut, acks held %s\n", float64(t.Rate)/1e6, t.Latency)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tthrottled\tstreams\tconns\truns\tmin MB/s\tmedian MB/s\tmax MB/s\tmedian rows/s\tCPU s/GB\tsink CPU s/GB\tpeak RSS MiB\t")
	for _, r := range rep.Rows() {
		th := ""
		if r.Throttled {
			th = "yes"
		}
		streams, conns := "-", "-"
		if r.Streams > 0 {
			streams, conns = fmt.Sprint(r.Streams), fmt.Sprint(r.Connections)
		}
		cpu, sinkCPU, rss := "?", "-", "?"
		if r.CPUSPerGB != nil {
			cpu = fmt.Sprintf("%.2f", *r.CPUSPerGB)
		}
		if r.SinkCPUSPerGB != nil {
			sinkCPU = fmt.Sprintf("%.2f", *r.SinkCPUSPerGB)
		}
		if r.PeakRSSBytes != nil {
			rss = fmt.Sprintf("%.0f", float64(*r.PeakRSSBytes)/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t\n", r.Kind, th, streams, conns, r.Repeats,
			r.MinMBs, r.MedianMBs, r.MaxMBs, humanize.Comma(int64(r.MedianRowsS)), cpu, sinkCPU, rss)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := rep.Summary()
	fmt.Fprintln(w)
	if s.BestStreams != nil {
		fmt.Fprintf(w, "best loader: %d streams, %d connections: %s MB/s, %s CPU s/GB\n", *s.BestStreams, *s.BestConnections, f1(s.E2EMBs), f2(s.CPUSPerGB))
	}
	fmt.Fprintf(w, "e2e vs ceilings: decode %s, transport %s, sink %s; vs rivals: ADBC %s, hand-written %s; CPU/GB vs ADBC %s\n",
		f2(s.E2EVsDecodeCeiling), f2(s.E2EVsTransportCeiling), f2(s.E2EVsSinkCeiling), f2(s.E2EVsADBC), f2(s.E2EVsHandwritten), f2(s.CPUVsADBC))
	if t := s.Throttled; t != nil {
		for _, r := range t.Results {
			fmt.Fprintf(w, "throttled %2d streams: %s MB/s of an expected %s (min(streams x rate, e2e)): %s\n", r.Streams, f1(r.MBs), f1(r.ExpectedMBs), f2(r.Ratio))
		}
		fmt.Fprintf(w, "throttled best vs rivals: ADBC %s, hand-written %s\n", f2(t.BestVsADBC), f2(t.BestVsHandwritten))
	}
	fmt.Fprintf(w, "rows written: %s\n", humanize.Comma(rep.RowsWritten))
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func f1(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *v)
}

func f2(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *v)
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
