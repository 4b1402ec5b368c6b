package readers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/loaderproject/loader/internal/ipcguard"
	"github.com/loaderproject/loader/objstore"
)

// WithObjectStore lets Discover expand s3://, gs:// and azblob:// sources through s, which the
// files it returns carry (File.Store) so that Open reads them through it. Without it an object URL
// is an error.
func WithObjectStore(s *objstore.Store) DiscoverOption {
	return func(c *discoverConfig) { c.store = s }
}

// PrefetchBudget is the byte budget that bytes read ahead of decoding are counted in (the load's
// in-flight budget). Acquire blocks until n bytes fit or ctx ends; Release returns them. TryAcquire
// takes n bytes only if they fit at once and the bytes held then are at most limit, never waiting:
// it lends the bytes that fetch units before their ReadUnit (see ReadAheader).
type PrefetchBudget interface {
	Acquire(ctx context.Context, n int64) error
	TryAcquire(n, limit int64) bool
	Release(n int64)
}

// WithPrefetchBudget counts in b the bytes an object-store Parquet row group or Arrow IPC unit
// prefetches, from before its GETs until it is decoded. Each prefetch counts at most cap bytes (a
// row group larger than that is counted as cap), so that units reading at once cannot hold the
// whole budget; cap below 1 counts every byte. Units are fetched ahead of their ReadUnit (see
// ReadAheader) within ahead's limits. Default: no budget, nothing read ahead.
func WithPrefetchBudget(b PrefetchBudget, cap int64, ahead AheadLimits) Option {
	return func(c *config) {
		if b != nil {
			c.prefetch = cappedBudget{b, cap}
			c.ahead = ahead
		}
	}
}

// AheadLimits bounds the fetches ahead of an object source's ReadUnits: at most Units of its units
// fetched ahead and not yet read at once, each started only while the prefetch budget holds at most
// Bytes (with it), so the bytes read ahead stay within Bytes. A zero field reads nothing ahead.
type AheadLimits struct {
	Units int
	Bytes int64
}

type cappedBudget struct {
	b   PrefetchBudget
	cap int64
}

func (c cappedBudget) size(n int64) int64 {
	if c.cap > 0 {
		return min(n, c.cap)
	}
	return n
}
func (c cappedBudget) Acquire(ctx context.Context, n int64) error { return c.b.Acquire(ctx, c.size(n)) }
func (c cappedBudget) TryAcquire(n, limit int64) bool             { return c.b.TryAcquire(c.size(n), limit) }
func (c cappedBudget) Release(n int64)                            { c.b.Release(c.size(n)) }

// ReadAheader is implemented by every Source Open returns. ReadAhead says which units the caller
// will read, in the order it will start them. An object-store Parquet or Arrow IPC file then fetches
// the first of them at once, and each ReadUnit starts fetching the next one not yet started while it
// decodes its own, so the decoders do not wait for the store (within AheadLimits, and only with
// bytes the prefetch budget lends at once: see WithPrefetchBudget). Units not named are never
// fetched ahead. Other sources ignore it. Call it once, before the first ReadUnit; Close releases
// what was fetched ahead and not read.
type ReadAheader interface {
	ReadAhead(units []int)
}

// readAhead fetches an object source's units before their ReadUnit asks for them.
type readAhead struct {
	obj    *objstore.Reader
	budget PrefetchBudget // what units' fetches count in (nil: none, and nothing is read ahead)
	limits AheadLimits
	ranges func(unit int) ([]objstore.Range, int64, error)

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the fetches ahead, and the waits of abandoned ones

	mu      sync.Mutex
	order   []int // the units the caller will read, in order; order[:pos] are started or fetched
	pos     int
	started map[int]bool
	jobs    map[int]*aheadJob // fetched (or being fetched) ahead and not yet taken
	closed  bool
}

// aheadJob is one unit's fetch ahead: pf and err are set when done is closed.
type aheadJob struct {
	done chan struct{}
	size int64
	pf   *objstore.Prefetched
	err  error
}

func newReadAhead(obj *objstore.Reader, cfg *config, ranges func(unit int) ([]objstore.Range, int64, error)) *readAhead {
	a := &readAhead{obj: obj, budget: cfg.prefetch, limits: cfg.ahead, ranges: ranges, started: map[int]bool{}, jobs: map[int]*aheadJob{}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return a
}

// plan records the units the caller will read and starts fetching the first.
func (a *readAhead) plan(units []int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.order != nil || a.budget == nil || a.limits.Units <= 0 || a.limits.Bytes <= 0 {
		return
	}
	a.order = append([]int{}, units...)
	a.next()
}

// next starts fetching the next units of the plan not yet started, while fewer than the limit are
// fetched ahead and untaken and the budget lends their bytes at once (a later start tries again).
func (a *readAhead) next() {
	for !a.closed && len(a.jobs) < a.limits.Units {
		for a.pos < len(a.order) && a.started[a.order[a.pos]] {
			a.pos++
		}
		if a.pos == len(a.order) {
			return
		}
		unit := a.order[a.pos]
		ranges, size, err := a.ranges(unit)
		if err != nil || !a.budget.TryAcquire(size, a.limits.Bytes) {
			return // the unit's ReadUnit fetches it, and reports the error
		}
		a.pos++
		job := &aheadJob{done: make(chan struct{}), size: size}
		a.jobs[unit] = job
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer close(job.done)
			job.pf, job.err = a.obj.Prefetch(a.ctx, ranges, prefetchGap)
			if job.err != nil {
				a.budget.Release(size)
			}
		}()
	}
}

// take returns unit's bytes and the release of their budget: the fetch ahead when there is one,
// else a fetch of its own (also when the fetch ahead failed: an error that persists is the
// unit's). It starts the fetch ahead of the next unit.
func (a *readAhead) take(ctx context.Context, unit int) (io.ReaderAt, func(), error) {
	a.mu.Lock()
	a.started[unit] = true
	job := a.jobs[unit]
	delete(a.jobs, unit)
	a.next()
	a.mu.Unlock()
	if job != nil {
		select {
		case <-job.done:
		case <-ctx.Done():
			a.abandon(job)
			return nil, nil, ctx.Err()
		}
		if job.err == nil {
			var once sync.Once
			return job.pf, func() {
				once.Do(func() {
					job.pf.Release()
					a.budget.Release(job.size)
				})
			}, nil
		}
	}
	ranges, size, err := a.ranges(unit)
	if err != nil {
		return nil, nil, err
	}
	return fetchCounted(ctx, a.obj, a.budget, ranges, size)
}

// abandon releases a taken fetch's bytes once it ends, for a ReadUnit that stopped waiting.
func (a *readAhead) abandon(job *aheadJob) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		<-job.done
		if job.err == nil {
			job.pf.Release()
			a.budget.Release(job.size)
		}
	}()
}

// close stops the fetches ahead, waits for them and releases the bytes of those not taken. No
// take may run at the same time or after.
func (a *readAhead) close() {
	a.mu.Lock()
	a.closed = true
	jobs := a.jobs
	a.jobs = nil
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	for _, job := range jobs {
		if job.err == nil {
			job.pf.Release()
			a.budget.Release(job.size)
		}
	}
}

// object is the objstore view of an object-store File.
func (f File) object() (objstore.Object, error) {
	loc, err := objstore.Parse(f.Path)
	if err != nil {
		return objstore.Object{}, err
	}
	return objstore.Object{Loc: loc, Size: f.Size, ModTime: f.ModTime, ETag: f.ETag}, nil
}

// readerAtCloser is an opened file's bytes.
type readerAtCloser interface {
	io.ReaderAt
	io.Closer
}

// openBytes opens f's bytes: the local file, or a Reader of the object's listed version.
func openBytes(ctx context.Context, f File, cfg *config) (readerAtCloser, error) {
	if f.Store == nil {
		return os.Open(f.Path)
	}
	return openObject(ctx, f, cfg)
}

// openObject opens a Reader of f's object: the one this Open made first when cfg has it (it keeps
// the bytes it read), else a new one.
func openObject(ctx context.Context, f File, cfg *config) (*objstore.Reader, error) {
	if cfg != nil && cfg.opened != nil {
		return cfg.opened, nil
	}
	obj, err := f.object()
	if err != nil {
		return nil, err
	}
	return f.Store.Open(ctx, obj)
}

// smallObjectBytes is the size up to which Open reads an object whole with its first GET (a
// Parquet or Arrow IPC file's footer read, a CSV file's sample), so that its units cost no request
// of their own: a load of many small objects would otherwise wait a round trip more per object.
const smallObjectBytes = 1 << 20

// firstRead is how many bytes of an object's end Open's first (suffix-range) request asks for: a
// small object whole, else footerGuess.
func firstRead(size int64) int64 {
	if size <= smallObjectBytes {
		return size
	}
	return footerGuess
}

// readSmall reads f whole with one GET when it is an object of smallObjectBytes or less (none when
// it is empty), for a source read in order to keep and read again from memory; nil otherwise. The
// Reader stays in cfg, so that opening the object again (as another format) reads it from memory.
func readSmall(ctx context.Context, f File, cfg *config) ([]byte, error) {
	if f.Store == nil || f.Size > smallObjectBytes {
		return nil, nil
	}
	r, err := openObject(ctx, f, cfg)
	if err != nil {
		return nil, err
	}
	cfg.opened = r
	return r.ReadTail(ctx, f.Size)
}

// objectFormat tells the format of an object whose name says none (nor a format given for it) from
// its first 8 bytes, with one GET, as Discover does for a local file.
func objectFormat(ctx context.Context, f File) (Format, error) {
	r, err := openObject(ctx, f, nil)
	if err != nil {
		return FormatUnknown, err
	}
	head, err := objectHead(r, f.Size)
	if err != nil {
		return FormatUnknown, err
	}
	return formatOf(FormatUnknown, head, f.Size)
}

// objectHead reads an object's first 8 bytes (fewer when it is shorter) with one GET.
func objectHead(r *objstore.Reader, size int64) ([]byte, error) {
	head := make([]byte, min(8, size))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return head, nil
}

// openedFormat is objectFormat for Open, where a name may hide another format: an Arrow IPC file
// name a stream (as a local file's may), .parquet an Arrow file, or no name any format. It reads
// the object's end with the request Open makes first anyway (all of a small object), and returns
// the Reader that keeps those bytes, for Open to read from memory. A small object's first bytes are
// among them; an end with Arrow's (or, under a Parquet name or none, Parquet's) magic settles a
// large object as a local file's first bytes would, since the readers rely on the end's magic and
// footer. Only a large object that ends otherwise costs one more GET, of its first 8 bytes. A CSV
// name is checked by its reader (otherFormatError), and a stream's name is taken as given.
func openedFormat(ctx context.Context, f File) (Format, *objstore.Reader, error) {
	byExt := f.Format
	if byExt == FormatUnknown {
		byExt = extFormat(path.Base(f.Path))
	}
	if byExt == FormatCSV || byExt == FormatIPCStream {
		return byExt, nil, nil
	}
	r, err := openObject(ctx, f, nil)
	if err != nil {
		return FormatUnknown, nil, err
	}
	tail, err := r.ReadTail(ctx, firstRead(f.Size))
	var head []byte
	switch {
	case err != nil:
		return FormatUnknown, nil, err
	case int64(len(tail)) == f.Size:
		head = tail[:min(8, len(tail))]
	case bytes.HasSuffix(tail, magicArrow):
		return FormatIPCFile, r, nil
	case (bytes.HasSuffix(tail, magicParquet) || bytes.HasSuffix(tail, magicParquetEnc)) && byExt != FormatIPCFile:
		return FormatParquet, r, nil
	default:
		if head, err = objectHead(r, f.Size); err != nil {
			return FormatUnknown, nil, err
		}
	}
	fm, err := formatOf(byExt, head, f.Size)
	return fm, r, err
}

// discoverObjects expands an object-store source (a single object, a prefix, or a glob) as
// discoverOne expands a local one: hidden and metadata entries skipped (hidden "directories" are not
// even listed), include and exclude applied to the key relative to the source, Hive partitions
// parsed, formats told by name or else by first bytes (see formatQueue), files of unknown format
// skipped below a prefix. Objects come in lexical key order, one listing page at a time.
func discoverObjects(ctx context.Context, src string, cfg *discoverConfig, emit func(File) error) error {
	if cfg.store == nil {
		return fmt.Errorf("%s: no object store configured for %s:// sources", redactURL(src), strings.SplitN(src, ":", 2)[0])
	}
	loc, err := objstore.Parse(src)
	if err != nil {
		return err
	}
	key, pattern := loc.Key, ""
	if hasMeta(key) {
		base, pat := doublestar.SplitPattern(key)
		if !doublestar.ValidatePattern(pat) {
			return fmt.Errorf("invalid glob %q", loc.String())
		}
		key, pattern = base, pat
		if key == "." {
			key = ""
		}
		if key != "" {
			key += "/"
		}
	}
	if pattern == "" && key != "" && !strings.HasSuffix(key, "/") {
		// a single object, or a prefix named without its trailing slash
		obj, err := cfg.store.Stat(ctx, loc)
		if err == nil {
			name := path.Base(key)
			if !cfg.keep(name, name) {
				return nil
			}
			f := objectFile(cfg, obj, "")
			if f.Format == FormatUnknown {
				if f.Format, err = objectFormat(ctx, f); err != nil {
					return fileError(f.Path, err)
				}
			}
			return emit(f)
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			return err
		}
		key += "/"
	}
	root := key
	descend := func(dir string) bool {
		name := path.Base(strings.TrimSuffix(dir, "/"))
		if skipName(name, true) {
			cfg.logger.Debug("readers: skipping hidden or metadata prefix", "prefix", loc.Child(dir).String())
			return false
		}
		return true
	}
	q := newFormatQueue(ctx, cfg.logger, emit)
	err = cfg.store.Walk(ctx, loc.Child(root), descend, func(obj objstore.Object) error {
		rel := strings.TrimPrefix(obj.Loc.Key, root)
		if rel == "" || strings.HasSuffix(rel, "/") {
			return nil // a "directory" marker object
		}
		name := path.Base(rel)
		if skipName(name, false) {
			cfg.logger.Debug("readers: skipping hidden or metadata entry", "path", obj.URL())
			return nil
		}
		if pattern != "" {
			if ok, _ := doublestar.Match(pattern, rel); !ok {
				return nil
			}
		}
		if !cfg.keep(rel, name) {
			return nil
		}
		return q.add(objectFile(cfg, obj, rel))
	})
	return q.close(err)
}

// sniffAhead is how many listed objects whose names say no format are checked at once, each by a
// GET of its first 8 bytes; formatQueueLen bounds the files waiting behind a check, in order.
const (
	sniffAhead     = 16
	formatQueueLen = 256
)

// formatQueue passes listed files on in their order, each once its format is known: as a local
// walk reads every file's first bytes (Hive, Trino and Flink write Parquet files with no
// extension), an object whose name says no format has its first bytes read, sniffAhead at a time,
// and is skipped when they say no format either. A check that fails otherwise (access denied, the
// network) passes the file on with no format, for Open to check again and fail it by name.
type formatQueue struct {
	ctx    context.Context
	cancel context.CancelFunc
	logger *slog.Logger
	emit   func(File) error
	sem    chan struct{}
	wg     sync.WaitGroup
	queue  []*queued
}

type queued struct {
	f    File
	skip bool
	done chan struct{}
}

func newFormatQueue(ctx context.Context, logger *slog.Logger, emit func(File) error) *formatQueue {
	ctx, cancel := context.WithCancel(ctx)
	return &formatQueue{ctx: ctx, cancel: cancel, logger: logger, emit: emit, sem: make(chan struct{}, sniffAhead)}
}

// add takes the next listed file.
func (q *formatQueue) add(f File) error {
	if f.Format != FormatUnknown && len(q.queue) == 0 {
		return q.emit(f)
	}
	e := &queued{f: f, done: make(chan struct{})}
	if f.Format != FormatUnknown {
		close(e.done)
	} else {
		select {
		case q.sem <- struct{}{}:
		case <-q.ctx.Done():
			return q.ctx.Err()
		}
		q.wg.Go(func() {
			defer func() { <-q.sem }()
			defer close(e.done)
			fm, err := objectFormat(q.ctx, e.f)
			switch {
			case err == nil:
				e.f.Format = fm
			case errors.Is(err, ErrUnknownFormat):
				e.skip = true
			default:
				q.logger.Debug("readers: could not tell an object's format; Open will try again", "path", e.f.Path, "err", err)
			}
		})
	}
	q.queue = append(q.queue, e)
	return q.flush(len(q.queue) >= formatQueueLen)
}

// flush passes on the files at the head of the queue whose formats are known, waiting for the
// first one's when wait.
func (q *formatQueue) flush(wait bool) error {
	for len(q.queue) > 0 {
		e := q.queue[0]
		if wait {
			select {
			case <-e.done:
			case <-q.ctx.Done():
				return q.ctx.Err()
			}
		}
		select {
		case <-e.done:
		default:
			return nil
		}
		q.queue[0] = nil
		q.queue = q.queue[1:]
		wait = false
		if e.skip {
			q.logger.Debug("readers: skipping file of unknown format", "path", e.f.Path)
			continue
		}
		if err := q.emit(e.f); err != nil {
			return err
		}
	}
	return nil
}

// close passes on what is still queued, unless the walk failed with err, and waits for the checks.
func (q *formatQueue) close(err error) error {
	for err == nil && len(q.queue) > 0 {
		err = q.flush(true)
	}
	q.cancel()
	q.wg.Wait()
	return err
}

// objectFile is the File of a listed object; rel is its key relative to the source, for Hive
// partitions.
func objectFile(cfg *discoverConfig, obj objstore.Object, rel string) File {
	f := File{Path: obj.URL(), Size: obj.Size, ModTime: obj.ModTime, ETag: obj.ETag, Store: cfg.store}
	f.Format = extFormat(path.Base(obj.Loc.Key))
	if cfg.format != FormatUnknown {
		f.Format = cfg.format
	}
	if rel != "" {
		f.Partitions = hivePartitions(rel)
	}
	return f
}

func redactURL(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}

// footerGuess is how many bytes of a Parquet object's end the first (suffix-range) request asks
// for: most footers fit, and a larger one takes one more request.
const footerGuess = 64 << 10

// prefetchGap is the most bytes between two column chunks that a prefetch reads through to make one
// request of two.
const prefetchGap = 64 << 10

// unitRanges returns the byte ranges of row group unit's column chunks and how many bytes they
// hold (at most the object's size), for its prefetch.
func (s *parquetSource) unitRanges(unit int) ([]objstore.Range, int64, error) {
	rg := s.meta.RowGroup(unit)
	var ranges []objstore.Range
	var total int64
	for c := 0; c < rg.NumColumns(); c++ {
		cc, err := rg.ColumnChunk(c)
		if err != nil {
			return nil, 0, corrupt(err)
		}
		off := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < off {
			off = cc.DictionaryPageOffset()
		}
		n := cc.TotalCompressedSize()
		if off < 0 || n <= 0 {
			continue // the decoder reports a chunk it cannot find
		}
		ranges = append(ranges, objstore.Range{Off: off, Len: n})
		total += n
	}
	return ranges, min(total, s.f.Size), nil
}

// fetchCounted fetches ranges of obj with merged parallel ranged GETs, after taking size bytes from
// budget b (nil: none); release gives the memory and the bytes back once the caller has decoded
// what it fetched.
func fetchCounted(ctx context.Context, obj *objstore.Reader, b PrefetchBudget, ranges []objstore.Range, size int64) (io.ReaderAt, func(), error) {
	unbudget := func() {}
	if b != nil {
		if err := b.Acquire(ctx, size); err != nil {
			return nil, nil, err
		}
		unbudget = func() { b.Release(size) }
	}
	pf, err := obj.Prefetch(ctx, ranges, prefetchGap)
	if err != nil {
		unbudget()
		return nil, nil, err
	}
	var once sync.Once
	return pf, func() {
		once.Do(func() {
			pf.Release()
			unbudget()
		})
	}, nil
}

// unitRanges returns the byte ranges of unit's record batch messages and the file's dictionaries,
// as its footer places them (or, when the footer cannot be read here, their even share of the
// object widened by a batch's share each side), and how many bytes they hold. The batches of a unit
// lie next to each other, so a unit is one GET (or parts of one, fetched in parallel). A read
// outside them costs a GET of its own.
func (s *ipcFileSource) unitRanges(unit int) ([]objstore.Range, int64, error) {
	first, end := s.batchRange(unit)
	var ranges []objstore.Range
	if s.blocksOK && end <= len(s.records) {
		for _, b := range append(append([]ipcguard.Block(nil), s.dicts...), s.records[first:end]...) {
			ranges = append(ranges, objstore.Range{Off: b.Off, Len: b.Len})
		}
	} else {
		n := int64(max(s.batches, 1))
		per := s.f.Size / n
		from := max(0, s.f.Size*int64(first)/n-per)
		to := min(s.f.Size, s.f.Size*int64(end)/n+per)
		ranges = []objstore.Range{{Off: from, Len: to - from}}
	}
	var total int64
	for _, r := range ranges {
		total += r.Len
	}
	return ranges, min(total, s.f.Size), nil
}

// openStream opens f for a sequential read from its start: the bytes to check at random (local:
// the file; object: exact ranged GETs) and the reader. For an object the reader is one GET with
// read-ahead when whole (a unit reads to the end), else the bytes the first check read from the
// start, then small blocks (Open reads just a schema, which that first read nearly always holds).
func openStream(ctx context.Context, f File, whole bool, cfg *config) (io.ReaderAt, io.ReadCloser, error) {
	if f.Store == nil {
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, nil, err
		}
		return fh, fh, nil
	}
	obj, err := openObject(ctx, f, cfg)
	if err != nil {
		return nil, nil, err
	}
	if !whole {
		h := &headKept{obj: obj, rest: obj.Blocks(256<<10, 1)}
		return h, io.NopCloser(io.NewSectionReader((*fromHead)(h), 0, f.Size)), nil
	}
	rd, err := obj.Stream(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	return obj, rd, nil
}

// headKept is an object read at random by checks (exact ranged GETs), which keeps the bytes of the
// first read from offset 0, so that reading the start again afterwards costs no request.
type headKept struct {
	obj  io.ReaderAt
	rest io.ReaderAt // where fromHead reads what the kept bytes do not hold
	head []byte
}

func (f *headKept) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.obj.ReadAt(p, off)
	if off == 0 && f.head == nil {
		f.head = bytes.Clone(p[:n])
	}
	return n, err
}

// fromHead reads f from the bytes it kept when they hold all of a read, else from f.rest.
type fromHead headKept

func (f *fromHead) ReadAt(p []byte, off int64) (int, error) {
	if off >= 0 && off+int64(len(p)) <= int64(len(f.head)) {
		return copy(p, f.head[off:]), nil
	}
	return f.rest.ReadAt(p, off)
}
