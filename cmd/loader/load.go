package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/embedded"
	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/gctune"
	"github.com/loaderproject/loader/load"
	remotemanifest "github.com/loaderproject/loader/manifest/remote"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/zerobus"
)

type loadFlags struct {
	target           targetFlags
	input            inputFlags
	bad              badDataFlags
	shard            shardFlags
	metrics          metricsFlags
	streams          int
	connections      int
	decoders         int
	asJSON           bool
	limit            int64
	maxFrameBytes    byteSize
	compression      string
	maxInflightBytes byteSize
	maxPageBytes     byteSize
	force            bool
	manifestDir      string
	manifestLock     time.Duration
	commitInterval   time.Duration
	progressEvery    time.Duration
	quiet            bool
	verify           verifyFlags
}

func (a *app) loadCommand() *cobra.Command {
	f := loadFlags{maxFrameBytes: partitioner.DefaultMaxFrameBytes, maxInflightBytes: load.DefaultMaxInflightBytes, maxPageBytes: readers.DefaultMaxPageBytes}
	cmd := &cobra.Command{
		Use:   "load --table NAME [--endpoint URL] [--protocol zerobus|flightsql|flight] [--streams N] [--connections M] [--warehouse DIR] [--create-table] [--json] SOURCE...",
		Short: "Load files into a table",
		Long: `Load SOURCEs (files, directories walked recursively, or globs) into the table NAME.

Formats come from the file extension and magic bytes: Parquet, CSV (header row by default; .gz and
.zst too), and Arrow IPC in file and stream form. Hidden and metadata entries (.*, _SUCCESS,
_delta_log, *.crc) are skipped, and Hive partition directories (key=value) become columns. Columns
are matched to the table by name, reordered, safely cast to the table's types, and omitted nullable
columns are filled with nulls; anything unsafe is refused with one error listing every problem of
the file. ` + "`loader plan`" + ` shows all this without sending anything.

Targets:
  (no --endpoint)        the embedded sink, in-process over --warehouse (default ./warehouse); it
                         never creates a table unless --create-table is given
  grpc://host:port       plaintext gRPC
  grpc+tls://host:port   TLS (also https://host[:port], port 443 by default)
--protocol picks the dialect: zerobus (Databricks Zerobus Ingest, the default), flightsql (bulk ingest)
or flight (DoPut with a PATH descriptor).

Databricks: with $ZEROBUS_SERVER_ENDPOINT set and no --endpoint, that endpoint is the target. OAuth
tokens, one per table and refreshed before they expire, are minted with $DATABRICKS_CLIENT_ID,
$DATABRICKS_CLIENT_SECRET and $DATABRICKS_WORKSPACE_URL (or $DATABRICKS_HOST), or a ~/.databrickscfg
profile (--profile). --ca-cert adds a CA; HTTPS_PROXY, NO_PROXY and grpc_proxy are honoured.
--sql-warehouse counts the table through a SQL warehouse before and after the load and waits up to
--verify-timeout for the acknowledged rows to become visible (verified_rows, visible_after_seconds,
verify_warning). ` + "`loader doctor`" + ` checks all of this before a first load.

Resume: which rows of which files the target acknowledged is recorded in a manifest (per target and
table). Running the same command again skips what is done and finishes what is not; a changed file
counts as new; --force loads everything again.

Shards: --shard-index K --shard-count N loads shard K of N: the files whose relative path hashes to
K, or with --plan the files and units a plan from ` + "`loader plan --shards N --json`" + ` gives K. When
--shard-index is absent the index comes from JOB_COMPLETION_INDEX (Kubernetes Indexed Job),
AWS_BATCH_JOB_ARRAY_INDEX (AWS Batch) or CLOUD_RUN_TASK_INDEX (Cloud Run Jobs); the count from
--shard-count, LOADER_SHARD_COUNT, AWS_BATCH_JOB_ARRAY_SIZE or CLOUD_RUN_TASK_COUNT. Each shard's
manifest is MANIFEST_DIR/shard-K-of-N; a shard run twice at once fails on its lock, and another shard
count over existing manifests is refused unless --force. ` + "`loader status --shards`" + ` merges them.

Metrics: --metrics-addr serves Prometheus /metrics (--metrics-linger keeps it up after the load);
with OTEL_EXPORTER_OTLP_ENDPOINT set, metrics are pushed over OTLP/HTTP too, and at the end.

Bad data: --on-error fail stops at the first bad file; skip-file loads the others and exits 3;
quarantine also writes bad CSV rows and failed files to NDJSON under --quarantine-dir. Every row read
is counted as loaded, quarantined or refused.

Memory: --max-inflight-bytes bounds the frames sent and not yet acknowledged. Unless GOMEMLIMIT or
GOGC is set in the environment, the Go heap is limited to that budget plus 64 MiB and 48 MiB per
decoder (GOMEMLIMIT), at most 200 MiB above the budget less the executable's resident pages (about
140 MiB), and GOGC is raised to 400 under that limit: fewer garbage collections for the same bound. Set either variable to keep Go's defaults or
your own.

At the end, where the target can count rows, the table's growth is compared with the rows
acknowledged, and a mismatch fails the load. --json prints one object on stdout with the keys files,
rows, bytes, seconds, rows_per_second, bytes_per_second, streams, retries, skipped_units,
possibly_duplicated_rows, deduplicated and verified_rows (null when the target cannot count), plus
rows_read, rows_quarantined, rows_refused and failed_files (a list, present when files failed).
bytes are Arrow IPC bytes acknowledged.

Ranges are recorded in the manifest as sent before they go out. The embedded sink stores each unit
range once, so killing the loader or the sink and running the command again loads every row once.
Into other targets, rows sent again while an earlier send's fate was unknown (after a crash, a
connection reset, an ack timeout) are counted in possibly_duplicated_rows; loader status lists them.`,
		Example: `  loader load --table main.default.events --create-table ./data/
  loader load --table main.default.events --limit 100 'data/**/*.parquet'
  loader load --table main.default.events --endpoint grpc://127.0.0.1:8815 --streams 4 data/
  loader load --table main.default.events --csv-no-header --columns id,name,ts --on-error quarantine exports/`,
		RunE: func(cmd *cobra.Command, args []string) error { return a.load(cmd.Context(), f, args) },
	}
	fl := cmd.Flags()
	f.target.register(fl)
	f.input.register(fl)
	f.bad.register(fl)
	f.shard.register(fl)
	f.metrics.register(fl, true)
	fl.IntVar(&f.streams, "streams", load.DefaultStreams, "parallel DoPut streams")
	fl.IntVar(&f.connections, "connections", 0, "gRPC connections the streams share (default: one per stream, at most 8)")
	fl.IntVar(&f.decoders, "decoders", 0, "units decoded at once (default: the number of CPUs)")
	fl.BoolVar(&f.asJSON, "json", false, "print the summary as one JSON object on stdout")
	fl.Int64Var(&f.limit, "limit", 0, "load only the first N rows, then verify them (a smoke test before a big backfill)")
	fl.Var(&f.maxFrameBytes, "max-frame-bytes", "largest encoded frame (FlightData) sent")
	fl.StringVar(&f.compression, "compression", "none", "IPC body compression of frames: none, lz4 or zstd (pays only when the network is slower than the client's CPU)")
	fl.Var(&f.maxInflightBytes, "max-inflight-bytes", "bytes sent but not yet acknowledged, across all streams: the memory bound")
	fl.Var(&f.maxPageBytes, "max-page-bytes", "largest uncompressed Parquet page read; a larger one fails its file (raise it, memory allowing, for files with huge pages)")
	fl.BoolVar(&f.force, "force", false, "ignore the manifest and load every file again")
	fl.StringVar(&f.manifestDir, "manifest-dir", "", "where manifests live: a directory, or an object-store URL (s3://, gs://, azblob://) for machines that do not keep their disks (default: WAREHOUSE/.loader/manifests for the embedded sink, else $XDG_STATE_HOME/loader/manifests)")
	fl.DurationVar(&f.manifestLock, "manifest-lock-timeout", remotemanifest.DefaultStaleAfter, "with --manifest-dir in object storage: how long a lock must show no heartbeat before this run takes it over (its holder was killed); a live holder makes the run fail")
	fl.DurationVar(&f.commitInterval, "commit-interval", 0, "embedded sink: how often acknowledged rows are committed (default 1s)")
	fl.DurationVar(&f.progressEvery, "progress-interval", 10*time.Second, "how often to print a progress line when stderr is not a terminal")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	f.verify.register(fl)
	return cmd
}

func (a *app) load(ctx context.Context, f loadFlags, sources []string) error {
	if len(sources) == 0 && f.shard.plan == "" {
		return usagef("give at least one SOURCE (file, directory or glob)")
	}
	if f.limit < 0 {
		return usagef("--limit must be positive")
	}
	if f.manifestLock <= 0 {
		return usagef("--manifest-lock-timeout must be positive")
	}
	compression, err := partitioner.ParseCompression(f.compression)
	if err != nil {
		return usagef("--compression: %v", err)
	}
	cfg := load.Config{
		Sources:             sources,
		Compression:         compression,
		Streams:             f.streams,
		Connections:         f.connections,
		Decoders:            f.decoders,
		MaxFrameBytes:       int(f.maxFrameBytes),
		MaxInflightBytes:    int64(f.maxInflightBytes),
		MaxPageBytes:        int64(f.maxPageBytes),
		Limit:               f.limit,
		Force:               f.force,
		ManifestDir:         f.manifestDir,
		ManifestLockTimeout: f.manifestLock,
		Logger:              a.logger,
		Progress:            &load.Progress{},
	}
	f.target.embedded = []embedded.Option{embedded.WithCommitInterval(f.commitInterval)}
	for _, apply := range []func(*load.Config) error{f.target.apply, f.input.apply, f.bad.apply, f.shard.apply} {
		if err := apply(&cfg); err != nil {
			return err
		}
	}
	defer withObjects(&cfg, f.input)()
	decoders := f.decoders
	if f.limit > 0 {
		decoders = 1 // as load.Config does
	}
	counter, err := f.verify.counter(f.target.remote)
	if err != nil {
		return err
	}
	var before int64
	if counter != nil {
		if before, err = counter.Count(ctx, cfg.Table); err != nil {
			return withHint(fmt.Errorf("count %s through the SQL warehouse before loading: %w", cfg.Table, err))
		}
	}
	restoreGC, _ := gctune.ForLoad(int64(f.maxInflightBytes), decoders, os.LookupEnv)
	defer restoreGC()
	mp, err := f.metrics.start(ctx, a, "loader")
	if err != nil {
		return err
	}
	defer f.metrics.stop(ctx, a, mp)
	if mp != nil {
		ev, err := mp.ObserveLoad(cfg.Progress, metricLabels(&cfg))
		if err != nil {
			return err
		}
		if cfg.Objects != nil {
			if err := mp.ObserveObjects(cfg.Objects, metricLabels(&cfg)); err != nil {
				return err
			}
		}
		cfg.StreamOptions = append(cfg.StreamOptions, flightclient.WithEvents(ev))
	}
	f.metrics.announce(a, mp)
	stopProgress := func() {}
	if !f.quiet {
		stopProgress = a.showProgress(cfg.Progress, f.progressEvery)
	}
	sum, err := load.Run(ctx, cfg)
	stopProgress()
	if counter != nil && sum != nil && (err == nil || errors.Is(err, load.ErrPartial)) {
		if verr := verifyAfterLoad(ctx, counter, &cfg, before, sum, f.verify.verifyTimeout); verr != nil {
			err = errors.Join(err, verr)
		}
	}
	// The human summary is for loads that sent something, or got as far as verifying; a load that
	// failed before (a missing table, a bad file) is told by its error alone. --json always prints.
	if sum != nil && (f.asJSON || err == nil || sum.Seconds > 0) {
		if perr := a.printSummary(sum, f.asJSON); perr != nil && err == nil {
			err = perr
		}
	}
	if se, ok := zerobus.AsSchemaError(err); ok {
		err = fmt.Errorf("the target refused the schema (causes: %v): %w", se.Causes, err)
	}
	return withHint(err)
}

func (a *app) printSummary(s *load.Summary, asJSON bool) error {
	for _, f := range s.FailedFiles {
		loaded := ""
		if f.RowsLoaded > 0 {
			loaded = fmt.Sprintf(" (%d of its rows were loaded before it failed)", f.RowsLoaded)
		}
		fmt.Fprintf(a.stderr, "failed: %s%s\n", f.Error, loaded)
		if h := hint(f.Err()); h != "" {
			fmt.Fprintf(a.stderr, "  hint: %s\n", h)
		}
	}
	if s.VerifyWarning != "" {
		fmt.Fprintf(a.stderr, "warning: %s\n", s.VerifyWarning)
	}
	if asJSON {
		return json.NewEncoder(a.stdout).Encode(s) // load.Summary's JSON is the --json contract
	}
	fmt.Fprintf(a.stdout, "loaded %s rows (%.1f MB) from %s into %s in %.1fs: %s rows/s, %.1f MB/s, %d streams, %d retries",
		humanize.Comma(s.Rows), float64(s.Bytes)/1e6, plural(s.Files, "file"), s.Table, s.Seconds, humanize.Comma(int64(s.RowsPerSecond)),
		s.BytesPerSecond/1e6, s.Streams, s.Retries)
	if s.SkippedUnits > 0 {
		fmt.Fprintf(a.stdout, ", %d units already loaded", s.SkippedUnits)
	}
	fmt.Fprintln(a.stdout)
	if s.Deduplicated {
		fmt.Fprintf(a.stdout, "possibly duplicated rows: %d (the target stores each unit range once)\n", s.PossiblyDuplicatedRows)
	} else {
		fmt.Fprintf(a.stdout, "possibly duplicated rows: %s (sent again after a crash, fault or rotation; see loader status)\n", humanize.Comma(s.PossiblyDuplicatedRows))
	}
	if s.Shard != nil {
		fmt.Fprintln(a.stdout, describeShard(s.Shard))
	}
	if s.ObjectRequests > 0 {
		fmt.Fprintf(a.stdout, "object storage: %s requests, %.1f MB read, %s sent again after a response broke off or stalled\n",
			humanize.Comma(s.ObjectRequests), float64(s.ObjectBytes)/1e6, plural(int(s.ObjectRetries), "GET"))
	}
	if s.RowsQuarantined > 0 || s.RowsRefused > 0 || len(s.FailedFiles) > 0 {
		fmt.Fprintf(a.stdout, "rows read %s: %s loaded, %s quarantined, %s refused; %d files failed\n",
			humanize.Comma(s.RowsRead), humanize.Comma(s.Rows), humanize.Comma(s.RowsQuarantined), humanize.Comma(s.RowsRefused), len(s.FailedFiles))
	}
	if s.QuarantineDir != "" {
		fmt.Fprintf(a.stdout, "dead letters in %s\n", s.QuarantineDir)
	}
	switch {
	case s.VerifiedRows != nil:
		fmt.Fprintf(a.stdout, "verified: %s grew by %s rows\n", s.Table, humanize.Comma(*s.VerifiedRows))
	case s.NotVerified != "":
		fmt.Fprintf(a.stdout, "not verified: %s\n", s.NotVerified)
	}
	if s.VisibleAfterSeconds != nil {
		fmt.Fprintf(a.stdout, "visible to queries %.1fs after the last acknowledgement\n", *s.VisibleAfterSeconds)
	}

	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// showProgress renders p on stderr until the returned function is called: a live line on a terminal,
// else a plain line every `every`.
func (a *app) showProgress(p *load.Progress, every time.Duration) (stop func()) {
	tty := false
	if f, ok := a.stderr.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
	}
	interval := every
	if tty {
		interval = 250 * time.Millisecond
	}
	if interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprint(a.stderr, "\r\033[K")
				}
				return
			case <-t.C:
				line := progressLine(p, time.Now())
				if line == "" {
					continue
				}
				if tty {
					fmt.Fprint(a.stderr, "\r\033[K"+line)
				} else {
					fmt.Fprintln(a.stderr, "progress: "+line)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

func progressLine(p *load.Progress, now time.Time) string {
	start := p.Started()
	if start.IsZero() {
		return ""
	}
	el := now.Sub(start).Seconds()
	rows, bytes := p.Rows.Load(), p.Bytes.Load()
	rate := 0.0
	if el > 0 {
		rate = float64(bytes) / el
	}
	eta, files := "?", strconv.FormatInt(p.FilesTotal.Load(), 10)
	if !p.Listed.Load() {
		files += "+" // still listing: the total and the ETA are not known yet
	} else if total, done := p.SourceBytes.Load(), p.SourceDone.Load(); total > 0 && done > 0 && el > 0 {
		left := time.Duration(el * float64(total-done) / float64(done) * float64(time.Second))
		eta = left.Round(time.Second).String()
	}
	return fmt.Sprintf("rows %s  %.1f MB  %.1f MB/s  files %d/%s  ETA %s",
		humanize.Comma(rows), float64(bytes)/1e6, rate/1e6, p.FilesDone.Load(), files, eta)
}
