package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/bench"
	"github.com/loaderproject/loader/internal/demodata"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/readers"
)

type benchFlags struct {
	target           endpointFlags
	input            inputFlags
	rows             int64
	files            int
	format           string
	canonical        bool
	seed             uint64
	keepData         bool
	streams          intList
	connections      intList
	repeat           int
	throttle         throttleFlag
	throttleRun      time.Duration
	out              string
	decoders         int
	maxFrameBytes    byteSize
	compression      string
	maxInflightBytes byteSize
	maxPageBytes     byteSize
	quiet            bool
}

func (a *app) benchCommand() *cobra.Command {
	f := benchFlags{
		streams:       intList(bench.DefaultStreams),
		maxFrameBytes: partitioner.DefaultMaxFrameBytes, maxInflightBytes: load.DefaultMaxInflightBytes, maxPageBytes: readers.DefaultMaxPageBytes,
	}
	cmd := &cobra.Command{
		Use:   "bench [PATH...] [--streams 1,2,4,8,16] [--connections N,...] [--repeat 3] [--throttle RATE,LATENCY] [--out DIR]",
		Short: "Measure load throughput against stream count, the ceilings and the rivals",
		Long: `Measure how fast the loader loads a dataset, over a sweep of stream and connection counts, and
against what bounds it and what a user could run instead, all in one run on this machine.

Input: the PATHs (files, directories or globs, as for load), or else a generated dataset of --rows
rows in --files files of --format (the demo data of ` + "`loader generate`" + `), written to a temporary
directory (with --keep-data, to OUT/data, and kept).

Target: by default the loader's own sink, started as separate processes of this binary
(` + "`loader serve`" + ` on 127.0.0.1, each over a temporary warehouse): a discard sink (--discard), a
durable one, and with --throttle a throttled one. With --endpoint and --table the sweep runs against
that target instead: it WRITES the dataset into that table once per run, and says how many rows in
total before it starts; the ceilings and rivals that need the loader's own sink are then skipped.

Measured, each --repeat times (min, median and max):
  loader             loader load, in this process, into the discard sink (or --endpoint) for each
                     stream and connection count, with a fresh manifest so every run sends everything
  decode_ceiling     reading, matching and casting the same files on the same decoders, then discarding
  transport_ceiling  frames encoded ahead of time (at most 256 MiB, sent again and again up to the
                     dataset's size) sent by the loader's Flight client to the discard sink, at the best
                     loader configuration's streams and connections
  sink_ceiling       the same, into the durable sink (write-ahead log and Delta): a real sink's ingest rate
  adbc               the ADBC Go Flight SQL driver's bulk ingest of each file (one stream)
  handwritten        a plain arrow-go loop: each file into one flight.Writer on a Flight DoPut (PATH
                     descriptor), batches cast to the table's types with arrow-go's compute
With --throttle RATE,LATENCY (e.g. 25MB,150ms) the stream sweep and the rivals run again against a
sink that limits every DoPut to RATE bytes/s and holds every acknowledgement LATENCY. A throttled
loader run loads the dataset as many times as it takes (hard links of its files, at most 64) to last
at least --throttle-run at the rate it is expected to reach, min(streams x RATE, the best unthrottled
MB/s): the streams' start and the last stream's end then weigh as little as in a long backfill.

MB/s is always the same number of bytes, the dataset as the loader frames it (the bytes of a loader
run's summary; MB = 10^6 bytes), over the run's wall time, so ratios of MB/s are ratios of times.
CPU s/GB is this process's user+system CPU time (getrusage; the sinks are other processes) per GB of
that size; sink CPU s/GB is the local sink process's, from /proc/PID/stat (Linux); peak RSS is this
process's VmHWM during the run (Linux; reset before each run).

Output in --out: results.csv (one row per configuration), summary.json (the figures of the best
configuration, the ceilings, the rivals and their ratios; null where skipped), throughput.svg and
throughput.png (median MB/s against streams, ceilings and rivals as lines). The table goes to stdout,
a progress line per run to stderr.`,
		Example: `  loader bench
  loader bench --rows 200000 --files 4 --streams 1,4 --repeat 1
  loader bench --throttle 25MB,150ms --streams 1,2,4,8
  loader bench ./data/ --endpoint grpc://10.0.0.5:8815 --table main.default.bench --streams 4,8`,
		RunE: func(cmd *cobra.Command, args []string) error { return a.bench(cmd, f, args) },
	}
	fl := cmd.Flags()
	f.target.register(fl)
	fl.Lookup("table").Usage = "target table, catalog.schema.table (required with --endpoint; default " + bench.DefaultTable.String() + " in the local sinks)"
	fl.Lookup("endpoint").Usage = "run the sweep against this target URL (it WRITES rows into --table) instead of a local discard sink"
	f.input.register(fl)
	fl.Int64Var(&f.rows, "rows", 1_000_000, "rows of the generated dataset (without PATHs)")
	fl.IntVar(&f.files, "files", 8, "files of the generated dataset")
	fl.StringVar(&f.format, "format", string(demodata.Parquet), "format of the generated dataset: parquet, csv or ipc (Arrow IPC file)")
	fl.Uint64Var(&f.seed, "seed", 0, "random seed of the generated dataset")
	fl.BoolVar(&f.canonical, "canonical", false, "generate the dataset in the canonical Arrow types frames carry, so nothing needs a cast (as loader generate --canonical)")
	fl.BoolVar(&f.keepData, "keep-data", false, "write the generated dataset to OUT/data and keep it")
	fl.Var(&f.streams, "streams", "stream counts to sweep, comma-separated")
	fl.Var(&f.connections, "connections", "connection counts to sweep, comma-separated (default: the load's, one per stream up to 8)")
	fl.IntVar(&f.repeat, "repeat", bench.DefaultRepeat, fmt.Sprintf("runs of each configuration (1 to %d)", bench.MaxRepeat))
	fl.Var(&f.throttle, "throttle", "also run the stream sweep and the rivals against a sink that limits each DoPut to RATE bytes/s and delays every ack by LATENCY, e.g. 25MB,150ms")
	fl.DurationVar(&f.throttleRun, "throttle-run", bench.DefaultThrottleRun, "with --throttle, the least time a throttled loader run lasts at its expected rate (it loads the dataset several times); 0 loads it once")
	fl.StringVar(&f.out, "out", "bench-results", "directory for results.csv, summary.json, throughput.svg and throughput.png")
	fl.IntVar(&f.decoders, "decoders", 0, "units decoded at once (default: the number of CPUs)")
	fl.Var(&f.maxFrameBytes, "max-frame-bytes", "largest encoded frame (FlightData) sent")
	fl.StringVar(&f.compression, "compression", "none", "IPC body compression of frames: none, lz4 or zstd (the loader's and the transport and sink ceilings')")
	fl.Var(&f.maxInflightBytes, "max-inflight-bytes", "bytes sent but not yet acknowledged, across all streams: the memory bound")
	fl.Var(&f.maxPageBytes, "max-page-bytes", "largest uncompressed Parquet page read")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

func (a *app) bench(cmd *cobra.Command, f benchFlags, paths []string) error {
	fl := cmd.Flags()
	if len(paths) > 0 {
		for _, name := range []string{"rows", "files", "format", "seed", "keep-data", "canonical"} {
			if fl.Changed(name) {
				return usagef("--%s describes the generated dataset; with PATHs nothing is generated", name)
			}
		}
	}
	if f.rows < 1 || f.files < 1 {
		return usagef("--rows and --files must be positive")
	}
	format, err := demodata.ParseFormat(f.format)
	if err != nil {
		return usagef("--format: %w", err)
	}
	compression, err := partitioner.ParseCompression(f.compression)
	if err != nil {
		return usagef("--compression: %v", err)
	}
	if f.repeat < 1 || f.repeat > bench.MaxRepeat {
		return usagef("--repeat %d: want 1 to %d", f.repeat, bench.MaxRepeat)
	}
	if f.target.endpoint != "" && f.target.table == "" {
		return usagef("--endpoint needs --table: the table the benchmark writes into")
	}
	if f.target.table == "" {
		f.target.table = bench.DefaultTable.String()
	}
	cfg := bench.Config{
		Sources:     paths,
		Dataset:     demodata.Options{Rows: f.rows, Files: f.files, Format: format, Seed: f.seed, Canonical: f.canonical},
		Streams:     f.streams,
		Connections: f.connections,
		Repeat:      f.repeat,
		Load: load.Config{
			Decoders:         f.decoders,
			MaxFrameBytes:    int(f.maxFrameBytes),
			Compression:      compression,
			MaxInflightBytes: int64(f.maxInflightBytes),
			MaxPageBytes:     int64(f.maxPageBytes),
		},
		Logger: a.logger,
	}
	for _, apply := range []func(*load.Config) error{f.target.apply, f.input.apply} {
		if err := apply(&cfg.Load); err != nil {
			return err
		}
	}
	objects, closeObjects := objectStore(append(f.input.objectOptions(), objstore.WithLogger(a.logger)), paths...)
	defer closeObjects()
	cfg.Load.Objects = objects
	if f.throttle.set {
		run := f.throttleRun
		if run <= 0 {
			run = -1 // once
		}
		cfg.Throttle = &bench.Throttle{Rate: int64(f.throttle.rate), Latency: f.throttle.latency, Run: run}
	}
	if f.keepData {
		cfg.DataDir = filepath.Join(f.out, "data")
	}
	if f.target.endpoint == "" {
		if cfg.Binary, err = os.Executable(); err != nil {
			return fmt.Errorf("the loader binary to start the sinks with: %w", err)
		}
	}
	if !f.quiet {
		cfg.Progress = func(s bench.Step) { fmt.Fprintf(a.stderr, "bench: %s\n", s) }
	}
	cfg.Writing = func(w bench.Writes) {
		fmt.Fprintf(a.stdout, "bench: this WRITES %s rows into %s at %s: %s rows x %d runs (configurations x repeats)\n",
			humanize.Comma(w.Total), w.Table, w.Endpoint, humanize.Comma(w.Rows), w.Runs)
	}
	rep, err := bench.Run(cmd.Context(), cfg)
	if err != nil {
		return withHint(err)
	}
	if err := rep.WriteFiles(f.out); err != nil {
		return err
	}
	if err := rep.WriteTable(a.stdout); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "results in %s: %s, %s, %s, %s (%.0fs)\n", f.out,
		bench.ResultsFile, bench.SummaryFile, bench.ChartSVG, bench.ChartPNG, rep.Elapsed.Seconds())
	return err
}

// intList is a flag value holding positive integers written as "1,2,4".
type intList []int

func (l *intList) Set(v string) error {
	var out []int
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 || n > bench.MaxStreams {
			return fmt.Errorf("%q is not a whole number from 1 to %d (want a list such as 1,2,4)", part, bench.MaxStreams)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intList) Type() string { return "list" }

// throttleFlag is --throttle RATE,LATENCY: a size per second and a duration.
type throttleFlag struct {
	set     bool
	rate    byteRate
	latency time.Duration
}

func (t *throttleFlag) Set(v string) error {
	rate, latency, ok := strings.Cut(v, ",")
	if !ok {
		return fmt.Errorf("%q: want RATE,LATENCY such as 25MB,150ms or 25MB/s,150ms", v)
	}
	if err := t.rate.Set(rate); err != nil {
		return fmt.Errorf("rate %w", err)
	}
	d, err := time.ParseDuration(strings.TrimSpace(latency))
	if err != nil || d < 0 {
		return fmt.Errorf("latency %q is not a duration such as 150ms", latency)
	}
	t.latency, t.set = d, true
	return nil
}

func (t *throttleFlag) String() string {
	if !t.set {
		return ""
	}
	return t.rate.String() + "," + t.latency.String()
}

func (t *throttleFlag) Type() string { return "RATE,LATENCY" }
