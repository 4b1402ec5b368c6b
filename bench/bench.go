package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/demodata"
	"github.com/loaderproject/loader/internal/gctune"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// Kind says what a measurement measures.
type Kind string

// The kinds, as results.csv names them.
const (
	KindLoader      Kind = "loader"            // load.Run, end to end
	KindDecode      Kind = "decode_ceiling"    // load.Decode: read, match and cast, then discard
	KindTransport   Kind = "transport_ceiling" // frames encoded ahead of time, sent to the discard sink
	KindSink        Kind = "sink_ceiling"      // the same frames sent to a durable sink
	KindADBC        Kind = "adbc"              // the ADBC Flight SQL driver's bulk ingest
	KindHandwritten Kind = "handwritten"       // a plain arrow-go Flight DoPut loop
)

// Throttle describes a service-like sink: every DoPut limited to Rate bytes per second, every
// acknowledgement held back Latency.
type Throttle struct {
	Rate    int64 // bytes per second per DoPut; must be positive
	Latency time.Duration
	// Run is how long a throttled loader run lasts at least at its expected rate (min(streams ×
	// Rate, the best unthrottled MB/s so far)): the run loads the dataset as many times as that
	// takes (hard links of its files), at most 64. Default DefaultThrottleRun; negative means once.
	Run time.Duration
}

// Limits on the sweep, so that a typo cannot start a run of days.
const (
	MaxStreams = 256
	MaxRepeat  = 100
)

// DefaultTable is the table the local sinks hold when Config.Load.Table is not set.
var DefaultTable = tableschema.TableName{Catalog: "bench", Schema: "default", Table: "events"}

// DefaultStreams is the default stream sweep.
var DefaultStreams = []int{1, 2, 4, 8, 16}

// DefaultRepeat is how often each configuration runs by default.
const DefaultRepeat = 3

// Config describes a benchmark. Zero values mean "default"; see applyDefaults.
type Config struct {
	// Binary is the loader executable whose `serve` and `table create` commands run the local sinks
	// (the CLI passes os.Executable()). Required unless Load.Endpoint is set.
	Binary string
	// Sources are the files, directories or globs to load. When empty, a dataset is generated with
	// Dataset (demodata) into DataDir.
	Sources []string
	Dataset demodata.Options
	// DataDir is where the generated dataset is written and kept; empty writes it into a temporary
	// directory removed at the end.
	DataDir string
	// WorkDir is where the temporary directory of the sinks' warehouses, manifests and the generated
	// dataset is made (default os.TempDir()). It is removed at the end.
	WorkDir string

	// Streams are the stream counts swept (default DefaultStreams); each 1..MaxStreams.
	Streams []int
	// Connections are the connection counts swept (default: one value, 0, the load's own default
	// for each stream count); each 0..MaxStreams.
	Connections []int
	// Repeat is how often each configuration runs (default DefaultRepeat, at most MaxRepeat).
	Repeat int

	// Load is the template of every loader run: the table (default DefaultTable), the endpoint,
	// protocol and token (an empty Endpoint runs everything against local sinks), the input options,
	// decoders and the frame, in-flight and page limits. Sources, Streams, Connections, Force,
	// ManifestDir and Progress are set by each run; Target must be nil.
	Load load.Config

	// Throttle, when set, runs the stream sweep and the rivals once more against a sink limited so.
	Throttle *Throttle

	// Progress, when set, is called before each run, on the goroutine that called Run.
	Progress func(Step)
	// Writing, when set, is called once before the first row is sent to a remote endpoint
	// (Load.Endpoint), saying how many rows the benchmark writes into its table.
	Writing func(Writes)
	Logger  *slog.Logger
}

// Step says which run is about to start.
type Step struct {
	N, Total             int // this is run N of Total (1-based)
	Kind                 Kind
	Throttled            bool
	Streams, Connections int // 0 where they mean nothing (the decode ceiling)
	Run, Runs            int // repeat Run of Runs of this configuration
}

// String renders the step as the progress line shows it: "7/21 loader streams=4 connections=1 run 2/3".
func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d %s", s.N, s.Total, s.Kind)
	if s.Throttled {
		b.WriteString(" throttled")
	}
	if s.Streams > 0 {
		fmt.Fprintf(&b, " streams=%d connections=%d", s.Streams, s.Connections)
	}
	fmt.Fprintf(&b, " run %d/%d", s.Run, s.Runs)
	return b.String()
}

// Writes is what a benchmark against a remote endpoint writes into its table.
type Writes struct {
	Endpoint, Table string
	Rows            int64 // rows of the dataset, written once per run
	Runs            int   // configurations × repeats
	Total           int64 // Rows × Runs
}

func (c *Config) applyDefaults() error {
	if c.Load.Target != nil {
		return errors.New("bench: Config.Load.Target must be nil: the benchmark starts its own sinks or uses Load.Endpoint")
	}
	if c.Load.Endpoint == "" && c.Binary == "" {
		return errors.New("bench: no loader binary to start the local sinks with")
	}
	if len(c.Streams) == 0 {
		c.Streams = DefaultStreams
	}
	for _, n := range c.Streams {
		if n < 1 || n > MaxStreams {
			return fmt.Errorf("bench: %d streams, want 1 to %d", n, MaxStreams)
		}
	}
	if len(c.Connections) == 0 {
		c.Connections = []int{0} // the load's default for each stream count
	}
	for _, n := range c.Connections {
		if n < 0 || n > MaxStreams {
			return fmt.Errorf("bench: %d connections, want 0 (the load's default) to %d", n, MaxStreams)
		}
	}
	if c.Repeat == 0 {
		c.Repeat = DefaultRepeat // three runs give a median that one slow run does not move
	}
	if c.Repeat < 1 || c.Repeat > MaxRepeat {
		return fmt.Errorf("bench: repeat %d, want 1 to %d", c.Repeat, MaxRepeat)
	}
	if c.Throttle != nil && (c.Throttle.Rate <= 0 || c.Throttle.Latency < 0) {
		return fmt.Errorf("bench: throttle rate %d B/s and latency %s, want a positive rate and a latency of 0 or more", c.Throttle.Rate, c.Throttle.Latency)
	}
	if c.Throttle != nil && c.Throttle.Run == 0 {
		t := *c.Throttle // the caller's stays as it was
		t.Run = DefaultThrottleRun
		c.Throttle = &t
	}
	if c.Load.Table.Table == "" {
		if c.Load.Endpoint != "" {
			return errors.New("bench: a remote endpoint needs a table")
		}
		c.Load.Table = DefaultTable
	}
	if c.Load.Protocol == "" {
		c.Load.Protocol = load.DefaultProtocol
	}
	if c.Load.MaxFrameBytes <= 0 {
		c.Load.MaxFrameBytes = partitioner.DefaultMaxFrameBytes // the load's default, made explicit for the report
	}
	if c.Load.MaxInflightBytes <= 0 {
		c.Load.MaxInflightBytes = load.DefaultMaxInflightBytes
	}
	if c.Load.Decoders <= 0 {
		c.Load.Decoders = runtime.GOMAXPROCS(0) // the load's default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Load.Logger = c.Logger
	if c.Progress == nil {
		c.Progress = func(Step) {}
	}
	if c.Writing == nil {
		c.Writing = func(Writes) {}
	}
	return nil
}

// connectionsFor is the connection count a load uses for streams when asked for conns: the load's
// default (one per stream, at most 8) for 0.
func connectionsFor(streams, conns int) int {
	if conns > 0 {
		return conns
	}
	return min(streams, 8)
}

// Run runs the benchmark and returns its report. It starts the local sinks as subprocesses of
// cfg.Binary and stops them before it returns, also on error and when ctx ends. Run never prints:
// it reports through cfg.Progress and cfg.Writing.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.WorkDir, "loader-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(work); err != nil {
			cfg.Logger.Warn("bench: removing the work directory", "dir", work, "err", err)
		}
	}()
	b := &bencher{cfg: &cfg, work: work, rep: &Report{
		Remote: cfg.Load.Endpoint != "", Table: cfg.Load.Table.String(), Throttle: cfg.Throttle,
		MaxInflightBytes: cfg.Load.MaxInflightBytes, MaxFrameBytes: cfg.Load.MaxFrameBytes,
		Decoders: cfg.Load.Decoders, Repeat: cfg.Repeat, Protocol: string(cfg.Load.Protocol), Compression: cfg.Load.Compression.String(),
	}}
	start := time.Now()
	err = b.run(ctx)
	if serr := stopAll(b.sinks); serr != nil {
		if err == nil {
			err = serr
		} else {
			cfg.Logger.Warn("bench: stopping the sinks", "err", serr)
		}
	}
	if err != nil {
		return nil, err
	}
	b.rep.Elapsed = time.Since(start)
	return b.rep, nil
}

// bencher is one benchmark's state.
type bencher struct {
	cfg  *Config
	work string
	rep  *Report

	sources []string
	files   []readers.File
	columns *tableschema.Schema // the table's

	sinks                       []*sinkProc // every sink started, stopped by Run
	discard, throttled, durable *sinkProc

	step, total int
}

func (b *bencher) note(format string, args ...any) {
	b.rep.Notes = append(b.rep.Notes, fmt.Sprintf(format, args...))
}

func (b *bencher) run(ctx context.Context) error {
	if err := b.dataset(ctx); err != nil {
		return err
	}
	local := !b.rep.Remote
	if local {
		if err := b.startSinks(ctx); err != nil {
			return err
		}
	}
	rivals, why := rivalFormats(b.files)
	rivals = rivals && local
	switch {
	case !local:
		b.note("remote endpoint: the transport and sink ceilings and the rivals need the benchmark's own sinks and are skipped (null in summary.json)")
	case why != "":
		b.note("%s", why)
	}
	configs := len(b.cfg.Streams) * len(b.cfg.Connections)
	runs := 1 + configs // decode ceiling and the sweep
	if rivals {
		runs += 2
	}
	if b.cfg.Throttle != nil && local {
		runs += configs
		if rivals {
			runs += 2
		}
	}
	if local {
		runs += 2 // transport and sink ceilings
	}
	b.total = runs * b.cfg.Repeat

	target := b.cfg.Load.Endpoint
	if local {
		target = b.discard.endpoint()
	}
	throttled := b.cfg.Throttle != nil && local
	if b.cfg.Throttle != nil && !local {
		b.note("remote endpoint: the throttled sweep needs the benchmark's own sink and is skipped")
	}
	// Every kind's repeats are interleaved with the others' (the decode ceiling, the sweep, the
	// rivals, throttled or not, then again), so that a slow minute of a noisy machine spreads over
	// all of them instead of sinking one. The transport and sink ceilings follow, at the best
	// configuration of the whole sweep.
	for run := 1; run <= b.cfg.Repeat; run++ {
		if err := b.decodeCeiling(ctx, run); err != nil {
			return err
		}
		if run == 1 && !local {
			n := configs * b.cfg.Repeat
			b.cfg.Writing(Writes{Endpoint: target, Table: b.rep.Table, Rows: b.rep.DatasetRows, Runs: n, Total: b.rep.DatasetRows * int64(n)})
		}
		if err := b.sweep(ctx, target, false, run); err != nil {
			return err
		}
		if rivals {
			if err := b.rivals(ctx, b.discard, false, run); err != nil {
				return err
			}
		}
		if throttled {
			if err := b.sweep(ctx, b.throttled.endpoint(), true, run); err != nil {
				return err
			}
			if rivals {
				if err := b.rivals(ctx, b.throttled, true, run); err != nil {
					return err
				}
			}
		}
	}
	if local {
		return b.ceilings(ctx)
	}
	return nil
}

// dataset generates or finds the files and learns the table's columns.
func (b *bencher) dataset(ctx context.Context) error {
	cfg := b.cfg
	b.sources = cfg.Sources
	generated := len(b.sources) == 0
	if generated {
		dir := cfg.DataDir
		if dir == "" {
			dir = b.work + string(os.PathSeparator) + "data"
		}
		res, err := demodata.Generate(ctx, dir, cfg.Dataset)
		if err != nil {
			return fmt.Errorf("bench: generate the dataset: %w", err)
		}
		b.sources = res.Files
		b.rep.DataDir = cfg.DataDir
	}
	files, err := readers.Discover(ctx, b.sources, readers.WithInclude(cfg.Load.Include...), readers.WithExclude(cfg.Load.Exclude...),
		readers.WithObjectStore(cfg.Load.Objects))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	b.files = files
	b.rep.Files = len(files)
	b.rep.Format = formatOf(files)
	for _, f := range files {
		b.rep.SourceBytes += f.Size
	}

	switch {
	case cfg.Load.TableSchema != nil:
		b.columns = cfg.Load.TableSchema
	case b.rep.Remote:
		// The target's own description, as the load will see it (and a check that every file fits).
		pc := cfg.Load
		pc.Sources = b.sources
		plan, err := load.Plan(ctx, pc)
		if err != nil {
			return fmt.Errorf("bench: plan the load into %s: %w", b.rep.Table, err)
		}
		if b.columns, err = tableschema.ParseColumns(plan.Columns); err != nil {
			return fmt.Errorf("bench: the table's columns %q: %w", plan.Columns, err)
		}
	case generated:
		s, err := tableschema.FromArrow(demodata.Schema())
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		b.columns = s
	default:
		src, err := readers.Open(ctx, files[0], readers.WithCSV(cfg.Load.CSV))
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer src.Close()
		s, err := tableschema.FromArrow(src.Schema())
		if err != nil {
			return fmt.Errorf("bench: the table's columns cannot be taken from %s: %w", files[0].Path, err)
		}
		b.columns = s
	}
	return nil
}

// formatOf names the files' format as summary.json does: parquet, csv or ipc, or "mixed".
func formatOf(files []readers.File) string {
	name := func(f readers.Format) string {
		switch f {
		case readers.FormatIPCFile, readers.FormatIPCStream:
			return "ipc"
		}
		return f.String()
	}
	out := ""
	for _, f := range files {
		n := name(f.Format)
		switch out {
		case "", n:
			out = n
		default:
			return "mixed"
		}
	}
	return out
}

// startSinks starts the discard sink, the durable sink and, with a throttle, the throttled one,
// each over its own warehouse holding the table. They all start before any measurement, so a
// binary that lacks a flag fails the benchmark at once.
func (b *bencher) startSinks(ctx context.Context) error {
	start := func(name string, args ...string) (*sinkProc, error) {
		wh, err := os.MkdirTemp(b.work, "warehouse-")
		if err != nil {
			return nil, err
		}
		if err := b.createTable(ctx, wh); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s, err := startSink(ctx, b.cfg.Binary, name, b.cfg.Logger, append([]string{"--listen", "127.0.0.1:0", "--warehouse", wh}, args...)...)
		if err != nil {
			return nil, err
		}
		b.sinks = append(b.sinks, s)
		return s, nil
	}
	var err error
	if b.discard, err = start("discard sink", "--discard"); err != nil {
		return err
	}
	if t := b.cfg.Throttle; t != nil {
		if b.throttled, err = start("throttled sink", "--discard",
			"--stream-rate-limit", strconv.FormatInt(t.Rate, 10), "--fault-ack-delay", t.Latency.String()); err != nil {
			return err
		}
	}
	b.durable, err = start("durable sink")
	return err
}

// createTable creates the table in a sink's warehouse with `loader table create`.
func (b *bencher) createTable(ctx context.Context, warehouse string) error {
	cmd := exec.CommandContext(ctx, b.cfg.Binary, "table", "create", b.rep.Table, "--warehouse", warehouse, "--columns", b.columns.SQL())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("create table %s in %s: %w: %s", b.rep.Table, warehouse, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// config is one configuration of a measurement.
type config struct {
	kind           Kind
	throttled      bool
	streams, asked int // asked: connections as the sweep asked, 0 for the load's default
}

// connections is the connection count the configuration runs with.
func (c config) connections() int { return connectionsFor(c.streams, c.asked) }

// result returns the result of a configuration, adding it in order of first use.
func (b *bencher) result(c config) *Result {
	for _, r := range b.rep.Results {
		if r.Kind == c.kind && r.Throttled == c.throttled && r.Streams == c.streams && r.Asked == c.asked {
			return r
		}
	}
	r := &Result{Kind: c.kind, Throttled: c.throttled, Streams: c.streams, Asked: c.asked}
	if c.streams > 0 {
		r.Connections = c.connections()
	}
	b.rep.Results = append(b.rep.Results, r)
	return r
}

// sinksCPU is the CPU time the local sink processes have used so far (only the one a run sends to
// does any work); false when there are none or it cannot be read.
func (b *bencher) sinksCPU() (time.Duration, bool) {
	var sum time.Duration
	for _, s := range b.sinks {
		if s.cmd == nil || s.cmd.Process == nil {
			return 0, false
		}
		t, ok := procCPUTime(s.cmd.Process.Pid)
		if !ok {
			return 0, false
		}
		sum += t
	}
	return sum, len(b.sinks) > 0
}

// measure runs one repeat of a configuration, reporting the step first, and records its sample.
func (b *bencher) measure(c config, run int, fn func() (rows, bytes int64, err error)) (Sample, error) {
	return b.measureCopies(c, run, 1, fn)
}

// measureCopies is measure for a run that goes through the dataset `copies` times.
func (b *bencher) measureCopies(c config, run, copies int, fn func() (rows, bytes int64, err error)) (Sample, error) {
	kind, throttled, streams := c.kind, c.throttled, c.streams
	conns := 0
	if streams > 0 {
		conns = c.connections()
	}
	b.step++
	b.cfg.Progress(Step{N: b.step, Total: b.total, Kind: kind, Throttled: throttled, Streams: streams, Connections: conns, Run: run, Runs: b.cfg.Repeat})
	sink0, sinkOK := b.sinksCPU()
	s, err := measure(fn)
	s.Copies = copies
	if sink1, ok := b.sinksCPU(); sinkOK && ok && kind != KindDecode {
		s.SinkCPUSeconds = (sink1 - sink0).Seconds()
	}
	if err != nil {
		desc := string(kind)
		if streams > 0 {
			desc += fmt.Sprintf(" streams=%d connections=%d", streams, conns)
		}
		if throttled {
			desc += " (throttled)"
		}
		return s, fmt.Errorf("bench: %s run %d: %w", desc, run, err)
	}
	b.cfg.Logger.Info("bench: run", "kind", string(kind), "throttled", throttled, "streams", streams, "connections", conns,
		"run", run, "seconds", s.Seconds, "cpu_seconds", s.CPUSeconds, "peak_rss", s.PeakRSS, "rows", s.Rows, "bytes", s.Bytes)
	r := b.result(c)
	r.Samples = append(r.Samples, s)
	if kind != KindDecode {
		b.rep.RowsWritten += s.Rows
	}
	return s, nil
}

// decodeCeiling runs load.Decode over the dataset: the rows of its first run are the dataset's.
func (b *bencher) decodeCeiling(ctx context.Context, run int) error {
	cfg := b.decodeConfig()
	s, err := b.measure(config{kind: KindDecode}, run, func() (int64, int64, error) {
		defer b.tuneGC(cfg)()
		st, err := load.Decode(ctx, cfg, nil)
		return st.Rows, 0, err
	})
	switch {
	case err != nil:
		return err
	case run == 1 && s.Rows == 0:
		return errors.New("bench: the dataset has no rows")
	case run == 1:
		b.rep.DatasetRows = s.Rows
	case s.Rows != b.rep.DatasetRows:
		return fmt.Errorf("bench: decode run %d read %d rows, the first %d", run, s.Rows, b.rep.DatasetRows)
	}
	return nil
}

// tuneGC sets the garbage collector as `loader load` does for cfg (gctune.ForLoad), so the loader
// and its decode ceiling are measured as users run them; the rivals run with Go's defaults, as a
// user's own program would. It returns the function that restores the defaults.
func (b *bencher) tuneGC(cfg load.Config) (restore func()) {
	restore, _ = gctune.ForLoad(cmp.Or(cfg.MaxInflightBytes, load.DefaultMaxInflightBytes), cfg.Decoders, os.LookupEnv)
	return restore
}

func (b *bencher) decodeConfig() load.Config {
	cfg := b.cfg.Load
	cfg.Sources, cfg.TableSchema, cfg.Progress = b.sources, b.columns, nil
	return cfg
}

// sweep runs the loader once over every stream and connection count. A throttled run loads the
// dataset as many times as it takes to last Throttle.Run (copiesFor).
func (b *bencher) sweep(ctx context.Context, endpoint string, throttled bool, run int) error {
	for _, c := range b.cfg.Connections {
		for _, n := range b.cfg.Streams {
			cf := config{kind: KindLoader, throttled: throttled, streams: n, asked: c}
			lc := b.cfg.Load
			lc.Sources = b.sources
			k := 1
			if throttled {
				var err error
				if k, lc.Sources, err = b.throttledSources(n); err != nil {
					return err
				}
				if k > 1 {
					lc.Include, lc.Exclude = nil, nil // the copies hold the filtered files only
				}
			}
			md, err := os.MkdirTemp(b.work, "manifests-")
			if err != nil {
				return err
			}
			lc.Endpoint, lc.Streams, lc.Connections = endpoint, n, cf.connections()
			lc.Force, lc.ManifestDir, lc.Progress = true, md, &load.Progress{}
			s, err := b.measureCopies(cf, run, k, func() (int64, int64, error) {
				defer b.tuneGC(lc)()
				sum, err := load.Run(ctx, lc)
				if sum == nil {
					return 0, 0, err
				}
				return sum.Rows, sum.Bytes, err
			})
			_ = os.RemoveAll(md) // in the work directory, which goes anyway
			if err != nil {
				return err
			}
			if want := int64(k) * b.rep.DatasetRows; s.Rows != want && b.rep.DatasetRows > 0 {
				return fmt.Errorf("bench: loader streams=%d run %d loaded %d rows; the dataset has %d (loaded %d times)", n, run, s.Rows, b.rep.DatasetRows, k)
			}
			if b.rep.DatasetBytes == 0 {
				b.rep.DatasetBytes = s.Bytes // the dataset as the loader frames it: every MB/s's numerator
			}
		}
	}
	return nil
}

// throttledSources returns how many times a throttled run at the given stream count loads the
// dataset, and the sources that do so.
func (b *bencher) throttledSources(streams int) (int, []string, error) {
	t := b.cfg.Throttle
	expected := float64(streams) * float64(t.Rate)
	if best := b.rep.best(false); best != nil {
		expected = min(expected, best.stats(b.rep.DatasetBytes).mbs.median*1e6)
	}
	k := copiesFor(t.Run.Seconds(), expected, b.rep.DatasetBytes)
	if k == 1 {
		return 1, b.sources, nil
	}
	for _, f := range b.files {
		if _, err := os.Stat(f.Path); err != nil {
			b.noteOnce("throttled runs load the dataset once: %s is not a local file to link", f.Path)
			return 1, b.sources, nil
		}
	}
	srcs, err := copies(filepath.Join(b.work, "throttled-copies"), b.files, k)
	if err != nil {
		return 0, nil, err
	}
	b.noteOnce("throttled loader runs load the dataset several times (hard links of its files) so that each lasts at least %s at its expected rate", t.Run)
	return k, srcs, nil
}

// noteOnce adds a note unless it is there already.
func (b *bencher) noteOnce(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(b.rep.Notes, n) {
		b.rep.Notes = append(b.rep.Notes, n)
	}
}

// rivalBatchRows sizes the rivals' batches like the loader's frames: MaxFrameBytes of framed data.
func (b *bencher) rivalBatchRows() int64 {
	perRow := max(b.rep.DatasetBytes/max(b.rep.DatasetRows, 1), 1)
	return max(int64(b.cfg.Load.MaxFrameBytes)/perRow, 1)
}

// rivals runs ADBC and the hand-written loop once each against a sink.
func (b *bencher) rivals(ctx context.Context, s *sinkProc, throttled bool, run int) error {
	rows := b.rivalBatchRows()
	table := b.cfg.Load.Table
	if _, err := b.measure(config{kind: KindADBC, throttled: throttled, streams: 1, asked: 1}, run, func() (int64, int64, error) {
		n, err := adbcIngest(ctx, s.endpoint(), table, b.files, rows)
		return n, 0, err
	}); err != nil {
		return err
	}
	_, err := b.measure(config{kind: KindHandwritten, throttled: throttled, streams: 1, asked: 1}, run, func() (int64, int64, error) {
		n, err := handwritten(ctx, s.addr, table, b.files, rows)
		return n, 0, err
	})
	return err
}

// ceilings measures the transport ceiling (the discard sink) and the sink ceiling (the durable
// sink) with the best loader configuration's streams and connections.
func (b *bencher) ceilings(ctx context.Context) error {
	best := b.rep.best(false)
	if best == nil {
		return errors.New("bench: no loader result to take the streams of the ceilings from")
	}
	p, err := encodePrefix(ctx, b.decodeConfig(), b.columns, maxPrefixBytes)
	if err != nil {
		return fmt.Errorf("bench: encode the frames of the transport ceiling: %w", err)
	}
	if !p.complete {
		b.note("transport and sink ceilings: the first %.1f MB of the dataset, encoded ahead of time, sent again and again up to its %.1f MB",
			float64(p.bytes)/1e6, float64(b.rep.DatasetBytes)/1e6)
	}
	table, dialect := b.cfg.Load.Table, b.cfg.Load.Protocol
	for run := 1; run <= b.cfg.Repeat; run++ {
		for _, c := range []struct {
			kind Kind
			s    *sinkProc
		}{{KindTransport, b.discard}, {KindSink, b.durable}} {
			if _, err := b.measure(config{kind: c.kind, streams: best.Streams, asked: best.Connections}, run, func() (int64, int64, error) {
				return sendPrefix(ctx, p, c.s.endpoint(), dialect, table, b.rep.DatasetBytes, best.Streams, best.Connections)
			}); err != nil {
				return err
			}
			if c.kind == KindSink {
				// Commit what the durable sink acknowledged before the next run, outside the timing.
				if err := flush(ctx, c.s.endpoint(), table); err != nil {
					return fmt.Errorf("bench: sink ceiling: commit after run %d: %w", run, err)
				}
			}
		}
	}
	return nil
}

// flush has a durable sink commit what it acknowledged.
func flush(ctx context.Context, endpoint string, table tableschema.TableName) error {
	cl, err := flightclient.New(endpoint, flightclient.Zerobus)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.Count(ctx, table)
	return err
}
