package load

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
)

// drainGrace is how long an interrupted load keeps receiving acknowledgements for frames already sent,
// so that what the target made durable is recorded and not sent again by the next run.
const drainGrace = 10 * time.Second

// Run loads cfg.Sources into cfg.Table and returns the summary, which it returns with the error too
// (its Error set) once the sources are found: it still counts what was acknowledged. Errors to test
// for: ErrPartial, ErrVerify, ErrConfig, context.Canceled, and *TableNotFoundError and
// *LossyDescriptionError with errors.As.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.applyDefaults(true); err != nil {
		return nil, err
	}
	objStart := objectStats(&cfg)
	found, err := findFiles(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer found.Close()
	first := found.first // the table may be made like it, whichever shard this is
	sum := &Summary{Streams: cfg.Streams, Table: cfg.Table.String(), Shard: cfg.Shard}
	defer objectSummary(sum, &cfg, objStart)
	fail := func(err error) (*Summary, error) {
		sum.Files = int(cfg.Progress.FilesTotal.Load())
		sum.Error = err.Error()
		if sum.VerifiedRows == nil && sum.NotVerified == "" {
			sum.NotVerified = "the load failed"
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				sum.NotVerified = "the load was interrupted"
			}
		}
		return sum, err
	}
	tgt, err := openTarget(&cfg)
	if err != nil {
		return fail(err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := tgt.Close(closeCtx); cerr != nil {
			cfg.Logger.Warn("closing the target", "err", cerr)
		}
	}()
	sum.Target = tgt.String()
	var tbl *table
	err = retryTransient(ctx, &cfg, "describe the table", func() (err error) {
		tbl, err = resolveTable(ctx, &cfg, tgt, first, true)
		return err
	})
	if err != nil {
		return fail(err)
	}

	mdir, err := shardManifestDir(ctx, &cfg, manifestDir(&cfg, tgt), manifestKey(tgt, tbl), cfg.Table.String())
	if err != nil {
		return fail(err)
	}
	m, closeManifest, err := openManifest(ctx, &cfg, tgt.String(), mdir, manifestKey(tgt, tbl))
	if err != nil {
		return fail(err)
	}
	defer func() { _ = closeManifest() }()
	if cfg.Force {
		if err := m.Reset(); err != nil {
			return fail(err)
		}
	}

	var before int64
	countErr := retryTransient(ctx, &cfg, "count the table", func() (err error) {
		before, err = tgt.Count(ctx, cfg.Table)
		return err
	})
	notVerified := ""
	switch {
	case countErr == nil:
	case errors.Is(countErr, flightclient.ErrUnsupported):
		notVerified = unsupportedReason(countErr)
	default:
		return fail(fmt.Errorf("count %s before loading: %w", cfg.Table, countErr))
	}
	if cfg.Shard != nil && cfg.Shard.Count > 1 && notVerified == "" {
		notVerified = shardNotVerified // the other shards grow the table too
	}
	// p is made below; the client's hook runs only during p.run.
	var p *pipeline
	streamOpts := []flightclient.Option{
		flightclient.WithConnections(cfg.Connections),
		flightclient.WithMaxFrameBytes(cfg.MaxFrameBytes),
		flightclient.WithLogger(cfg.Logger),
		flightclient.WithCreateTable(cfg.CreateTable),
		flightclient.WithResendHook(func(span partitioner.Span, rows int64) { p.resent(span, rows) }),
	}
	if cfg.AckTimeout > 0 {
		streamOpts = append(streamOpts, flightclient.WithAckTimeout(cfg.AckTimeout))
	}
	if cfg.Retries != 0 || cfg.RetryBackoff > 0 {
		retries := cfg.Retries
		switch {
		case retries == 0:
			retries = flightclient.DefaultRetries
		case retries < 0:
			retries = 0
		}
		streamOpts = append(streamOpts, flightclient.WithRetry(retries, cfg.RetryBackoff, flightclient.DefaultBackoffMax))
	}
	streamOpts = append(streamOpts, cfg.StreamOptions...)
	client, err := tgt.Streams(ctx, streamOpts...)
	if err != nil {
		return fail(err)
	}

	p, err = newPipeline(&cfg, tbl, client, m, found)
	if err != nil {
		return fail(err)
	}
	p.epoch = m.Epoch()
	unreported := m.Unreported() // of earlier runs killed before their summary
	dedupe, err := client.EnableUnitIDs(ctx, cfg.Table, p.unitID)
	if err != nil {
		return fail(fmt.Errorf("ask %s whether it deduplicates by unit id: %w", tgt, err))
	}
	p.dedupe = dedupe
	sum.Deduplicated = dedupe
	stats, err := p.run(ctx)
	p.summarize(sum, stats, ctx.Err() == nil)
	sum.PossiblyDuplicatedRows += unreported
	if rerr := m.Reported(sum.PossiblyDuplicatedRows); rerr != nil && err == nil {
		err = fmt.Errorf("manifest: %w", rerr)
	}
	failed, qerr := p.failures()
	sum.FailedFiles = failed
	if qerr = errors.Join(qerr, p.quarantine.close()); qerr != nil && err == nil {
		err = qerr
	}
	if p.quarantine.used() {
		sum.QuarantineDir = p.quarantine.dir
	}
	if serr := m.Sync(); serr != nil && err == nil {
		err = fmt.Errorf("manifest: %w", serr)
	}
	if err != nil {
		return fail(err)
	}
	if notVerified != "" {
		sum.NotVerified = notVerified
	} else {
		var after int64
		err := retryTransient(ctx, &cfg, "count the table", func() (err error) {
			after, err = tgt.Count(ctx, cfg.Table)
			return err
		})
		if err != nil {
			return fail(fmt.Errorf("count %s after loading: %w", cfg.Table, err))
		}
		grew := after - before
		sum.VerifiedRows = &grew
		// Rows sent again while their fate was unknown may be in the table once more (without
		// deduplication) or may have been there before this run (with it).
		lo, hi := sum.Rows, sum.Rows+p.atRisk.Load()
		if dedupe {
			lo, hi = sum.Rows-p.atRisk.Load(), sum.Rows
		}
		if grew < lo || grew > hi {
			return fail(fmt.Errorf("%w: table %s grew by %d rows but %d rows were acknowledged (%d of them sent again after a fault or crash)",
				ErrVerify, cfg.Table, grew, sum.Rows, p.atRisk.Load()))
		}
	}
	sum.Files = int(cfg.Progress.FilesTotal.Load())
	if len(sum.FailedFiles) > 0 {
		return fail(fmt.Errorf("%w: %d of %d files", ErrPartial, len(sum.FailedFiles), sum.Files))
	}
	return sum, nil
}

// retryTransient runs fn again after a transient failure (the target restarting, a connection
// reset), as a stream would: up to cfg.Retries more times, with jittered exponential backoff.
func retryTransient(ctx context.Context, cfg *Config, what string, fn func() error) error {
	retries := cfg.Retries
	switch {
	case retries == 0:
		retries = flightclient.DefaultRetries
	case retries < 0:
		retries = 0
	}
	wait := cfg.RetryBackoff
	if wait <= 0 {
		wait = flightclient.DefaultBackoffBase
	}
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || attempt >= retries || !flightclient.Transient(err) || ctx.Err() != nil {
			return err
		}
		d := wait/2 + rand.N(wait/2+1)
		cfg.Logger.Warn("transient failure; retrying", "what", what, "err", err, "attempt", attempt+1, "backoff", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, flightclient.DefaultBackoffMax)
	}
}

// unsupportedReason is why a target cannot do something, in its own words where it gave them.
func unsupportedReason(err error) string {
	var ue *flightclient.UnsupportedError
	if errors.As(err, &ue) {
		return ue.Error()
	}
	return err.Error()
}

// discover finds the sources' files with the configured filters.
func discover(ctx context.Context, cfg *Config) ([]readers.File, error) {
	return readers.Discover(ctx, cfg.Sources, discoverOptions(cfg)...)
}

func discoverOptions(cfg *Config) []readers.DiscoverOption {
	return []readers.DiscoverOption{readers.WithInclude(cfg.Include...), readers.WithExclude(cfg.Exclude...),
		readers.WithFormat(cfg.Format), readers.WithDiscoverLogger(cfg.Logger), readers.WithObjectStore(cfg.Objects)}
}

// schemaOf reads a file's Arrow schema, for creating a table like it and for targets that cannot
// describe their tables.
func schemaOf(ctx context.Context, cfg *Config, f readers.File) (*arrow.Schema, error) {
	src, err := readers.Open(ctx, f, readers.WithCSV(cfg.CSV))
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return src.Schema(), nil
}

// pipeline is one run's moving parts.
type pipeline struct {
	cfg    *Config
	table  *table
	client *flightclient.Client // the target's streams
	m      unitLog
	found  *foundFiles   // the files to load, as discovery finds them
	files  fileTable     // the files taken from found, by the index in their frames' spans
	epoch  int64         // the manifest's, part of every unit id
	dedupe bool          // the target stores each unit range once: nothing is possibly duplicated
	ackSig chan struct{} // capacity 1: acknowledgements wait to be synced

	atRisk      atomic.Int64  // rows sent again while their fate was unknown
	possiblyDup atomic.Int64  // atRisk where the target does not deduplicate
	schema      *arrow.Schema // the table's canonical schema: every frame's
	enc         *partitioner.Encoder
	budget      *partitioner.Budget
	frames      chan *partitioner.Frame

	plansMu sync.Mutex
	plans   map[string]*planResult // by source schema fingerprint

	remaining atomic.Int64 // rows left under --limit; unused without it

	inflight   atomic.Int64 // frame bytes handed to the wire and not yet acknowledged
	quarantine *quarantine

	failMu sync.Mutex
	failed []failure

	elapsed time.Duration

	// decoded, when set, ends the pipeline after the cast: each cast batch goes to it instead of
	// the encoder and the wire (Decode).
	decoded func(arrow.RecordBatch) error
}

type planResult struct {
	plan *schemamatch.Plan
	err  error
}

func newPipeline(cfg *Config, tbl *table, client *flightclient.Client, m unitLog, found *foundFiles) (*pipeline, error) {
	schema := tbl.schema.Arrow()
	enc, err := partitioner.NewEncoder(schema, cfg.MaxFrameBytes, partitioner.WithAllocator(cfg.Allocator),
		partitioner.WithCompression(cfg.Compression))
	if err != nil {
		return nil, err
	}
	p := &pipeline{
		cfg: cfg, table: tbl, client: client, m: m, found: found, schema: schema,
		ackSig: make(chan struct{}, 1),
		enc:    enc,
		budget: partitioner.NewBudget(cfg.MaxInflightBytes),
		frames: make(chan *partitioner.Frame, cfg.Streams),
		plans:  map[string]*planResult{},

		quarantine: newQuarantine(cfg.QuarantineDir, cfg.Table.String(), time.Now()),
	}
	p.remaining.Store(cfg.Limit)
	return p, nil
}

// run moves every unit to the target. Producers (decoders) stop at the first fatal error or when ctx
// ends; the wire then drains what was already sent for up to drainGrace before it is cut off.
func (p *pipeline) run(ctx context.Context) (flightclient.Stats, error) {
	wireCtx, cancelWire := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWire()
	prodCtx, cancelProd := context.WithCancel(ctx)
	defer cancelProd()

	start := time.Now()
	p.cfg.Progress.started.Store(start.UnixNano())
	defer func() { p.elapsed = time.Since(start) }()

	// After an interrupt, give the wire drainGrace to collect acknowledgements, then cut it.
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(drainGrace, cancelWire)
		context.AfterFunc(wireCtx, func() { t.Stop() })
	})
	defer stopGrace()

	syncDone := make(chan struct{})
	go p.syncManifest(wireCtx, syncDone)

	var prodErr error
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		defer close(p.frames)
		prodErr = p.produce(prodCtx)
	}()

	stats, wireErr := p.client.Load(wireCtx, p.cfg.Table, p.schema, p.enc, p.cfg.Streams, p.frames, p.acked)
	if wireErr != nil {
		cancelProd()
	}
	<-prodDone
	for f := range p.frames {
		f.Release() // sent to the channel, never taken by the client (it stopped early)
	}
	cancelWire()
	<-syncDone

	switch {
	case ctx.Err() != nil:
		return stats, ctx.Err()
	case wireErr != nil:
		return stats, wireErr
	default:
		return stats, prodErr
	}
}

// syncManifest makes acknowledgements durable in groups: whenever some arrived, one fsync takes all
// that arrived by then, so a crash loses at most the acknowledgements of about one fsync.
func (p *pipeline) syncManifest(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.ackSig:
			if err := p.m.Sync(); err != nil {
				p.cfg.Logger.Warn("manifest sync", "err", err)
			}
		}
	}
}

// unitID is the stable id of a frame's unit the target deduplicates by: the file version (path,
// size, modification time, schema, unit layout), the unit index and the manifest's epoch.
func (p *pipeline) unitID(span partitioner.Span) string {
	return p.files.get(span.File).key + "." + strconv.Itoa(span.Unit)
}

// resent counts rows sent again after a call that carried them ended without acknowledging them.
func (p *pipeline) resent(span partitioner.Span, rows int64) {
	p.atRisk.Add(rows)
	if p.dedupe {
		return
	}
	p.possiblyDup.Add(rows)
	if err := p.m.Duplicate(p.files.get(span.File).id, span.Unit, manifest.Range{From: span.Row, To: span.Row + rows}); err != nil {
		p.cfg.Logger.Warn("manifest", "err", err)
	}
	// Durable before the rows go again, so a crash right after cannot hide them.
	if err := p.m.Sync(); err != nil {
		p.cfg.Logger.Warn("manifest sync", "err", err)
	}
}

// fileKey is the unit id prefix of a file version in an epoch.
func fileKey(id manifest.FileID, epoch int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %d %d %q %q %d", id.Path, id.Size, id.ModTimeNano, id.Schema, id.Layout, epoch)
	return hex.EncodeToString(h.Sum(nil)[:12]) + ".e" + strconv.FormatInt(epoch, 10)
}

// layout fingerprints how a file is split into units.
func layout(units []readers.Unit) string {
	h := sha256.New()
	for _, u := range units {
		fmt.Fprintf(h, "%d:%d:%d;", u.Index, u.Rows, u.Bytes)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// acked records a durable frame. It runs on the client's goroutines.
func (p *pipeline) acked(f *partitioner.Frame) {
	st := p.files.get(f.Span.File)
	defer p.files.unref(f.Span.File, st)
	if err := p.m.Ack(st.id, f.Span.Unit, manifest.Range{From: f.Span.Row, To: f.Span.Row + f.Rows}); err != nil {
		p.cfg.Logger.Warn("manifest", "err", err) // the rows are loaded; a re-run may send them again
	}
	p.inflight.Add(-int64(f.Size()))
	p.cfg.Progress.InFlight.Add(-int64(f.Size()))
	p.budget.Release(int64(f.Size()))
	select {
	case p.ackSig <- struct{}{}:
	default:
	}
	st.rows.Add(f.Rows)
	p.cfg.Progress.Rows.Add(f.Rows)
	p.cfg.Progress.Bytes.Add(int64(f.Size()))
}

// summarize fills in the run's figures; complete says it was not interrupted, so rows read but neither
// loaded nor quarantined were refused (rather than left unsent).
func (p *pipeline) summarize(s *Summary, stats flightclient.Stats, complete bool) {
	pr := p.cfg.Progress
	s.Rows, s.Bytes = pr.Rows.Load(), pr.Bytes.Load()
	s.Seconds = p.elapsed.Seconds()
	s.Retries = stats.Retries
	s.PossiblyDuplicatedRows = p.possiblyDup.Load()
	s.SkippedUnits = pr.SkippedUnits.Load()
	s.RowsRead, s.RowsQuarantined = pr.RowsRead.Load(), pr.Quarantined.Load()
	if complete {
		s.RowsRefused = max(0, s.RowsRead-s.Rows-s.RowsQuarantined)
	}
	if s.Seconds > 0 {
		s.RowsPerSecond = float64(s.Rows) / s.Seconds
		s.BytesPerSecond = float64(s.Bytes) / s.Seconds
	}
}

// errLimit stops a unit once --limit rows are taken; it is not a failure.
var errLimit = errors.New("row limit reached")

// produce opens files in the order discovery finds them and decodes their units on a bounded pool of
// workers. Discovery failing part way stops the load like a file failing under --on-error fail.
func (p *pipeline) produce(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.Decoders)
	files := p.openAhead(gctx, p.found.next)
	var schedErr error
	for p.cfg.Limit <= 0 || p.remaining.Load() > 0 {
		o, err := files.next(gctx)
		if err != nil {
			schedErr = fmt.Errorf("finding the files: %w", err)
			break
		}
		if o == nil {
			break
		}
		if gctx.Err() != nil {
			o.discard()
			break
		}
		if err := p.scheduleFile(gctx, g, o); err != nil {
			schedErr = err
			break
		}
	}
	files.stop()
	err := g.Wait()
	if errors.Is(err, errLimit) {
		err = nil
	}
	return errors.Join(schedErr, err)
}

// fileRun tracks one open file while its units are read. The file is closed when its last unit
// ends (or is never started because the load is stopping).
type fileRun struct {
	idx     int
	st      *fileState
	src     readers.Source
	plan    *schemamatch.Plan
	pending atomic.Int64       // units not yet finished
	cancel  context.CancelFunc // stops the file's other units when one fails
	failed  atomic.Bool
}

// unitDone counts n units of the file as finished and closes the file after the last.
func (p *pipeline) unitDone(fr *fileRun, n int64) {
	if fr.pending.Add(-n) == 0 {
		p.finishFile(fr)
	}
}

func (p *pipeline) scheduleFile(ctx context.Context, g *errgroup.Group, o *openedFile) error {
	f := o.f
	i, st := p.files.add(f)
	src, err := o.source(ctx, p)
	if err != nil {
		defer p.files.unref(i, st)
		return p.fileFailed(st, err)
	}
	schema := src.Schema()
	fp := fingerprint(schema)
	st.id = fileID(f, fp)
	st.id.Layout = layout(src.Units())
	st.key = fileKey(st.id, p.epoch)
	plan, err := p.plan(fp, schema, f.Path)
	if err != nil {
		src.Close()
		defer p.files.unref(i, st)
		return p.fileFailed(st, err)
	}
	fctx, cancel := context.WithCancel(ctx)
	fr := &fileRun{idx: i, st: st, src: src, plan: plan, cancel: cancel}
	var todo []readers.Unit
	for _, u := range src.Units() {
		if !unitSelected(p.cfg, f, u.Index) {
			continue // another shard's
		}
		if p.m.UnitDone(st.id, u.Index) {
			p.cfg.Progress.SkippedUnits.Add(1)
			continue
		}
		todo = append(todo, u)
		p.cfg.Progress.SourceBytes.Add(u.Bytes)
	}
	if len(todo) == 0 {
		p.finishFile(fr)
		return nil
	}
	fr.pending.Store(int64(len(todo)))
	readAhead(src, todo)
	for k, u := range todo {
		if ctx.Err() != nil { // stopping: the units not started still count down, so the file closes
			p.unitDone(fr, int64(len(todo)-k))
			break
		}
		g.Go(func() error {
			defer p.unitDone(fr, 1)
			if fr.failed.Load() {
				return nil
			}
			err := p.readUnit(fctx, fr, u)
			switch {
			case err == nil || errors.Is(err, errLimit):
				return err
			case ctx.Err() != nil: // the whole load is stopping; not this file's fault
				return ctx.Err()
			}
			if fr.failed.CompareAndSwap(false, true) {
				fr.cancel()
				return p.fileFailed(st, err)
			}
			return nil
		})
	}
	return nil
}

func (p *pipeline) finishFile(fr *fileRun) {
	fr.cancel()
	if err := fr.src.Close(); err != nil {
		p.cfg.Logger.Warn("close", "file", fr.st.file.Path, "err", err)
	}
	p.cfg.Progress.FilesDone.Add(1)
	p.files.unref(fr.idx, fr.st)
}

// fileFailed applies the error policy to the file: with skip-file or quarantine it records the
// failure and returns nil, so the rest of the files go on.
func (p *pipeline) fileFailed(st *fileState, err error) error {
	path := st.file.Path
	if !namesFile(err, path) {
		err = &readers.FileError{Path: path, Unit: -1, Err: err}
	}
	if from := p.table.createdFrom; from != "" && from != path && errors.Is(err, schemamatch.ErrMismatch) {
		err = fmt.Errorf("%w\n  (the table was created in this run from the columns of %s)", err, from)
	}
	if id := st.id; id.Path != "" {
		if merr := p.m.Failed(id, err.Error()); merr != nil {
			p.cfg.Logger.Warn("manifest", "err", merr)
		}
	}
	p.cfg.Progress.FilesFailed.Add(1)
	if p.cfg.OnError == OnErrorFail {
		return err
	}
	p.cfg.Logger.Warn("skipping file", "file", path, "err", err)
	p.failMu.Lock()
	p.failed = append(p.failed, failure{file: st, err: err})
	p.failMu.Unlock()
	return nil
}

// namesFile reports whether err already says it is about the file at path: a *readers.FileError
// or a *schemamatch.MismatchError of that file.
func namesFile(err error, path string) bool {
	var (
		fe *readers.FileError
		me *schemamatch.MismatchError
	)
	return (errors.As(err, &fe) && fe.Path == path) || (errors.As(err, &me) && me.Source == path)
}

// failure is a file skipped by the error policy.
type failure struct {
	file *fileState
	err  error
}

// failures reports the skipped files once the wire is done, when the count of each file's rows
// acknowledged before it failed is final, and writes them to the quarantine's files.ndjson.
func (p *pipeline) failures() ([]FileFailure, error) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	var out []FileFailure
	var errs []error
	for _, f := range p.failed {
		ff := FileFailure{Path: f.file.file.Path, Error: f.err.Error(), RowsLoaded: f.file.rows.Load(), err: f.err}
		out = append(out, ff)
		if p.cfg.OnError == OnErrorQuarantine {
			errs = append(errs, p.quarantine.file(ff))
		}
	}
	return out, errors.Join(errs...)
}

// open opens a file under the stall watchdog: a read stuck in the metadata (a stalled pipe, a hung
// mount) fails the file after StallTimeout instead of hanging the load; readers.Open returns when its
// context ends.
func (p *pipeline) open(ctx context.Context, f readers.File) (readers.Source, error) {
	octx, cancel := context.WithTimeoutCause(ctx, p.cfg.StallTimeout, ErrStalled)
	defer cancel()
	src, err := readers.Open(octx, f, p.readerOptions()...)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(octx), ErrStalled) {
		return nil, fmt.Errorf("open: %w: no progress for %s", ErrStalled, p.cfg.StallTimeout)
	}
	return src, err
}

func (p *pipeline) readerOptions() []readers.Option {
	csv := p.cfg.CSV
	if p.cfg.OnError == OnErrorQuarantine && p.quarantine != nil { // a dry run has none
		csv.OnBadRow = func(r readers.BadRow) error {
			p.cfg.Progress.Quarantined.Add(1)
			p.cfg.Progress.RowsRead.Add(1)
			return p.quarantine.row(r)
		}
	}
	return []readers.Option{
		readers.WithTable(p.table.schema),
		readers.WithAllocator(p.cfg.Allocator),
		readers.WithCSV(csv),
		readers.WithLogger(p.cfg.Logger),
		readers.WithMaxPageBytes(p.cfg.MaxPageBytes),
		prefetchBudget(p),
	}
}

// plan returns the plan for a file of this schema, built once per distinct schema and renamed for
// each file so errors and rescued rows name the right one.
func (p *pipeline) plan(fp string, schema *arrow.Schema, path string) (*schemamatch.Plan, error) {
	p.plansMu.Lock()
	r, ok := p.plans[fp]
	if !ok {
		plan, err := schemamatch.NewPlan(schema, p.table.schema, p.planOptions(path)...)
		r = &planResult{plan: plan, err: err}
		p.plans[fp] = r
	}
	p.plansMu.Unlock()
	var me *schemamatch.MismatchError
	switch {
	case errors.As(r.err, &me):
		return nil, p.lossy(me.ForSource(path), schema)
	case r.err != nil:
		return nil, r.err
	}
	return r.plan.ForSource(path), nil
}

// lossy returns the refusal of a file of this source schema, as a *LossyDescriptionError when the
// columns came from the target's description and that description looks lossy.
func (p *pipeline) lossy(me *schemamatch.MismatchError, src *arrow.Schema) error {
	if p.table.from != fromTarget {
		return me
	}
	signs := lossySigns(p.table.schema, src, me)
	if len(signs) == 0 {
		return me
	}
	return &LossyDescriptionError{Table: p.cfg.Table.String(), Described: p.table.schema.SQL(), Signs: signs, Err: me}
}

// lossySigns lists what in a described table schema looks like a lossy description of the real one,
// given a file refused against it: a STRING column where the file has a nested type, and every
// column nullable where the file says some are not.
func lossySigns(table *tableschema.Schema, src *arrow.Schema, me *schemamatch.MismatchError) []string {
	var signs []string
	refused := map[string]bool{}
	for _, pr := range me.Problems {
		name, _, _ := strings.Cut(pr.Column, ".")
		refused[name] = true
	}
	for _, f := range src.Fields() {
		i := table.FieldIndex(f.Name)
		if i < 0 || !refused[f.Name] {
			continue
		}
		if table.Fields[i].Type.Kind == tableschema.String && nested(f.Type) {
			signs = append(signs, fmt.Sprintf("column %q is described as STRING but the file has %s", f.Name, f.Type))
		}
	}
	allNullable := len(table.Fields) > 0
	for _, f := range table.Fields {
		allNullable = allNullable && f.Nullable
	}
	if allNullable {
		var notNull []string
		for _, f := range src.Fields() {
			if !f.Nullable && table.FieldIndex(f.Name) >= 0 {
				notNull = append(notNull, strconv.Quote(f.Name))
			}
		}
		switch len(notNull) {
		case 0:
		case 1:
			signs = append(signs, fmt.Sprintf("every column is described as nullable, but the file says %s is not", notNull[0]))
		default:
			signs = append(signs, fmt.Sprintf("every column is described as nullable, but the file says %s are not", strings.Join(notNull, ", ")))
		}
	}
	return signs
}

// nested reports whether t is a list, map or struct type.
func nested(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.MAP, arrow.STRUCT:
		return true
	}
	return false
}

func (p *pipeline) planOptions(source string) []schemamatch.Option {
	return []schemamatch.Option{
		schemamatch.WithSource(source),
		schemamatch.WithAllocator(p.cfg.Allocator),
		schemamatch.WithMode(p.cfg.SchemaMode),
		schemamatch.WithCaseInsensitive(p.cfg.CaseInsensitive),
		schemamatch.WithRescueColumn(p.cfg.RescueColumn),
		schemamatch.WithBinaryAsString(p.cfg.BinaryAsString),
		schemamatch.WithLogger(p.cfg.Logger),
	}
}

// readUnit decodes one unit, skipping rows the manifest says are acknowledged already, and hands its
// frames to the wire. A watchdog stops the unit when its decoder makes no progress for StallTimeout;
// time spent in the callback (casting, encoding, waiting for the target) does not count.
func (p *pipeline) readUnit(fctx context.Context, fr *fileRun, u readers.Unit) error {
	ctx, cancel := context.WithCancelCause(fctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(p.cfg.StallTimeout, func() { cancel(ErrStalled) })
	defer watchdog.Stop()

	id := fr.st.id
	done := p.m.Acked(id, u.Index)
	// Ranges an earlier run sent and saw no acknowledgement of: the target may hold them already.
	unknown := p.m.Pending(id, u.Index)
	var pos int64
	limited := false
	err := fr.src.ReadUnit(ctx, u.Index, func(rec arrow.RecordBatch) error {
		watchdog.Stop()
		defer watchdog.Reset(p.cfg.StallTimeout)
		n := rec.NumRows()
		for _, r := range uncovered(done, pos, pos+n) {
			if p.cfg.Limit > 0 {
				take := p.take(r.To - r.From)
				if take == 0 {
					limited = true
					return errLimit
				}
				r.To = r.From + take
			}
			p.cfg.Progress.RowsRead.Add(r.To - r.From)
			if err := p.send(ctx, fr, u.Index, rec, pos, r, unknown); err != nil {
				return err
			}
		}
		pos += n
		return nil
	})
	if limited || errors.Is(err, errLimit) {
		return errLimit
	}
	if errors.Is(context.Cause(ctx), ErrStalled) {
		return fmt.Errorf("unit %d: %w: no progress for %s", u.Index, ErrStalled, p.cfg.StallTimeout)
	}
	if err != nil {
		if namesFile(err, fr.st.file.Path) {
			return err // readers named the file and the unit
		}
		return fmt.Errorf("unit %d: %w", u.Index, err)
	}
	p.cfg.Progress.SourceDone.Add(u.Bytes)
	return p.m.UnitRows(id, u.Index, pos)
}

// intend records, durably, that rows r of the unit are about to be sent, and counts the part an
// earlier run sent without seeing its acknowledgement as possibly duplicated. Concurrent units share
// fsyncs.
func (p *pipeline) intend(id manifest.FileID, unit int, r manifest.Range, unknown []manifest.Range) error {
	for _, x := range unknown {
		lo, hi := max(x.From, r.From), min(x.To, r.To)
		if lo >= hi {
			continue
		}
		p.atRisk.Add(hi - lo)
		if p.dedupe {
			continue
		}
		p.possiblyDup.Add(hi - lo)
		if err := p.m.Duplicate(id, unit, manifest.Range{From: lo, To: hi}); err != nil {
			return fmt.Errorf("manifest: %w", err)
		}
	}
	if err := p.m.Intent(id, unit, r); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if err := p.m.Sync(); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

// send casts rows r (unit-relative; rec starts at unit row base) and encodes them into frames.
func (p *pipeline) send(ctx context.Context, fr *fileRun, unit int, rec arrow.RecordBatch, base int64, r manifest.Range, unknown []manifest.Range) error {
	sub := rec
	if r.From != base || r.To != base+rec.NumRows() {
		sub = rec.NewSlice(r.From-base, r.To-base)
		defer sub.Release()
	}
	out, err := fr.plan.Apply(sub)
	if err != nil {
		return err
	}
	defer out.Release()
	if p.decoded != nil {
		return p.decoded(out)
	}
	return p.enc.Encode(out, partitioner.Span{File: fr.idx, Unit: unit, Row: r.From}, func(f *partitioner.Frame) error {
		size := int64(f.Size())
		if err := p.budget.Acquire(ctx, size); err != nil {
			f.Release()
			return err
		}
		// The frame's intent is durable before it can reach the wire (the channel holds a few).
		if err := p.intend(fr.st.id, unit, manifest.Range{From: f.Span.Row, To: f.Span.Row + f.Rows}, unknown); err != nil {
			p.budget.Release(size)
			f.Release()
			return err
		}
		// Counted apart from the budget, so InFlightPeak checks the budget rather than echoing it.
		p.notePeak(p.inflight.Add(size))
		p.cfg.Progress.InFlight.Add(size)
		fr.st.refs.Add(1) // until acked
		select {
		case p.frames <- f:
			return nil
		case <-ctx.Done():
			p.files.unref(fr.idx, fr.st)
			p.inflight.Add(-size)
			p.cfg.Progress.InFlight.Add(-size)
			p.budget.Release(size)
			f.Release()
			return ctx.Err()
		}
	})
}

func (p *pipeline) notePeak(n int64) {
	peak := &p.cfg.Progress.InFlightPeak
	for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
	}
}

// take reserves up to n rows of the --limit allowance and returns how many it got.
func (p *pipeline) take(n int64) int64 {
	for {
		left := p.remaining.Load()
		if left <= 0 {
			return 0
		}
		got := min(n, left)
		if p.remaining.CompareAndSwap(left, left-got) {
			return got
		}
	}
}

// uncovered returns the parts of [from, to) not covered by done (sorted, merged ranges).
func uncovered(done []manifest.Range, from, to int64) []manifest.Range {
	var out []manifest.Range
	cur := from
	for _, d := range done {
		if d.To <= cur {
			continue
		}
		if d.From >= to {
			break
		}
		if d.From > cur {
			out = append(out, manifest.Range{From: cur, To: d.From})
		}
		cur = max(cur, d.To)
		if cur >= to {
			return out
		}
	}
	if cur < to {
		out = append(out, manifest.Range{From: cur, To: to})
	}
	return out
}

// fingerprint names a source schema: equal schemas share a plan and a manifest identity.
func fingerprint(s *arrow.Schema) string {
	h := sha256.Sum256([]byte(s.String()))
	return hex.EncodeToString(h[:8])
}
