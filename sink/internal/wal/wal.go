package wal

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/loaderproject/loader/internal/fsutil"
)

// Errors callers test with errors.Is.
var (
	// ErrLocked means another process (or another Open in this one) holds the log.
	ErrLocked = errors.New("write-ahead log is in use by another process")
	// ErrCorrupt means a record before the tail of the log is damaged.
	ErrCorrupt = errors.New("write-ahead log is corrupt")
	// ErrClosed is returned by Append after Close.
	ErrClosed = errors.New("write-ahead log is closed")
	// ErrTooLarge is returned by Append for a record over MaxRecordBytes.
	ErrTooLarge = errors.New("write-ahead log record too large")
)

const (
	// MaxRecordBytes is the largest payload a record may hold.
	MaxRecordBytes = 64 << 20
	// DefaultSegmentBytes is the size at which a segment is closed and a new one started.
	DefaultSegmentBytes = 64 << 20
	// maxGroupBytes bounds the bytes written by one group commit.
	maxGroupBytes = 32 << 20
	// maxQueuedBytes bounds the payload bytes waiting for the writer; Append blocks beyond it.
	maxQueuedBytes = 256 << 20

	magic      = "LDRWAL\x00\x01"
	headerSize = 16
	lockName   = "LOCK"
	segSuffix  = ".wal"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Option configures Open.
type Option func(*config)

type config struct {
	segmentBytes int64
	floor        uint64
	onRecord     func(seq uint64, payload []byte)
	log          *slog.Logger
	onSync       func(time.Duration)
}

// WithSyncObserver calls fn with the duration of every group commit's fsync, from the log's writer
// goroutine (for metrics; it must be quick). Default: none.
func WithSyncObserver(fn func(time.Duration)) Option {
	return func(c *config) { c.onSync = fn }
}

func newConfig(opts []Option) config {
	c := config{
		segmentBytes: DefaultSegmentBytes,
		log:          slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithSegmentBytes sets the size at which the log starts a new segment. Default DefaultSegmentBytes;
// values below 4 KiB are raised to 4 KiB.
func WithSegmentBytes(n int64) Option {
	return func(c *config) { c.segmentBytes = max(n, 4<<10) }
}

// WithFloor makes new sequence numbers start above floor even when the log holds no record that
// high (the sink passes the last sequence number committed to the table, whose segments may be gone).
// Default 0, so the first record of a new log is 1.
func WithFloor(floor uint64) Option {
	return func(c *config) { c.floor = floor }
}

// WithRecoveredRecord calls fn for every intact record Open finds, in order, before Open returns.
// payload is only valid during the call.
func WithRecoveredRecord(fn func(seq uint64, payload []byte)) Option {
	return func(c *config) { c.onRecord = fn }
}

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

type segment struct {
	first uint64 // from the file name: no record in it is below this
	last  uint64 // last record's sequence number; 0 when empty
	size  int64
	path  string
}

// WAL is an open write-ahead log. Create it with Open and end it with Close.
type WAL struct {
	dir  string
	cfg  config
	lock *os.File

	mu     sync.Mutex // guards segs
	segs   []*segment
	active *os.File // writer goroutine only, after Open

	durable atomic.Uint64
	groups  atomic.Uint64
	next    uint64 // writer goroutine only, after Open

	queued   *semaphore.Weighted
	reqs     chan *request
	appendMu sync.RWMutex // Close takes it exclusively so no Append sends after the writer's last drain
	closed   bool
	stop     chan struct{}
	done     chan struct{}
	fatal    atomic.Pointer[error]
	buf      []byte
}

type request struct {
	parts [][]byte
	size  int
	fn    func(seq uint64)
	p     *Pending
}

// Pending is a record handed to Append. Done is closed once the record is durable or has failed.
type Pending struct {
	done chan struct{}
	seq  uint64
	err  error
}

// Done is closed when the record is durable (Err is nil) or failed.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Seq returns the record's sequence number once Done is closed and Err is nil.
func (p *Pending) Seq() uint64 { <-p.done; return p.seq }

// Err returns why the record could not be made durable, once Done is closed.
func (p *Pending) Err() error { <-p.done; return p.err }

// Open opens (creating if needed) the log in dir, locks it, recovers it and starts its writer.
func Open(dir string, opts ...Option) (*WAL, error) {
	cfg := newConfig(opts)
	if err := fsutil.MkdirAllSync(dir); err != nil {
		return nil, fmt.Errorf("wal %s: %w", dir, err)
	}
	lockPath := filepath.Join(dir, lockName)
	lock, err := fsutil.Lock(lockPath)
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("wal %s: %w (lock %s is held; is another sink serving this warehouse?)", dir, ErrLocked, lockPath)
	}
	if err != nil {
		return nil, fmt.Errorf("wal %s: %w", dir, err)
	}
	w := &WAL{
		dir:    dir,
		cfg:    cfg,
		lock:   lock,
		queued: semaphore.NewWeighted(maxQueuedBytes),
		reqs:   make(chan *request, 4096),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if err := w.recover(); err != nil {
		if w.active != nil {
			w.active.Close()
		}
		return nil, errors.Join(fmt.Errorf("wal %s: %w", dir, err), lock.Close())
	}
	go w.writer()
	return w, nil
}

// listSegments returns the segment files of dir sorted by their first sequence number.
func listSegments(dir string) ([]*segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, segSuffix) {
			continue
		}
		first, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
		if err != nil {
			continue
		}
		segs = append(segs, &segment{first: first, path: filepath.Join(dir, name)})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	return segs, nil
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

// scanResult is where and why a segment scan stopped.
type scanResult struct {
	end     int64  // offset after the last intact record
	last    uint64 // last intact record's sequence number, or 0
	problem string // "" at a clean end of file
}

// scanSegment reads the records of one segment from the start, calling fn for each intact one,
// and stops at the end or at the first torn or damaged record.
func scanSegment(path string, prev uint64, fn func(seq uint64, payload []byte) error) (scanResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return scanResult{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var head [headerSize]byte
	n, err := io.ReadFull(r, head[:len(magic)])
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return scanResult{problem: "empty segment"}, nil
		}
		return scanResult{problem: "torn segment header"}, nil
	}
	if string(head[:len(magic)]) != magic {
		return scanResult{problem: "bad segment magic"}, nil
	}
	res := scanResult{end: int64(len(magic)), last: 0}
	var payload []byte
	for {
		n, err := io.ReadFull(r, head[:])
		if err != nil {
			if n == 0 && errors.Is(err, io.EOF) {
				return res, nil
			}
			res.problem = "torn record header"
			return res, nil
		}
		length := binary.LittleEndian.Uint32(head[0:4])
		sum := binary.LittleEndian.Uint32(head[4:8])
		seq := binary.LittleEndian.Uint64(head[8:16])
		if length > MaxRecordBytes {
			res.problem = fmt.Sprintf("record length %d over the %d limit", length, MaxRecordBytes)
			return res, nil
		}
		if cap(payload) < int(length) {
			payload = make([]byte, length)
		}
		payload = payload[:length]
		if _, err := io.ReadFull(r, payload); err != nil {
			res.problem = "torn record payload"
			return res, nil
		}
		if crc(head[8:16], payload) != sum {
			res.problem = "record checksum mismatch"
			return res, nil
		}
		if seq <= prev {
			res.problem = fmt.Sprintf("sequence %d does not follow %d", seq, prev)
			return res, nil
		}
		if fn != nil {
			if err := fn(seq, payload); err != nil {
				return res, err
			}
		}
		prev, res.last = seq, seq
		res.end += headerSize + int64(length)
	}
}

func crc(seq, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, seq)
	return crc32.Update(c, castagnoli, payload)
}

func (w *WAL) recover() error {
	segs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	var prev uint64
	for i, s := range segs {
		isLast := i == len(segs)-1
		res, err := scanSegment(s.path, prev, func(seq uint64, payload []byte) error {
			if w.cfg.onRecord != nil {
				w.cfg.onRecord(seq, payload)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if res.problem != "" {
			if !isLast {
				return fmt.Errorf("%w: segment %s at byte %d: %s (later segments hold acknowledged records)",
					ErrCorrupt, filepath.Base(s.path), res.end, res.problem)
			}
			if err := truncateTail(s.path, res.end); err != nil {
				return err
			}
			if res.end > 0 || res.problem != "empty segment" {
				w.cfg.log.Warn("wal: truncated a torn tail", "segment", filepath.Base(s.path), "offset", res.end, "reason", res.problem)
			}
			if res.end == 0 {
				res.end = int64(len(magic))
			}
		}
		s.last, s.size = res.last, res.end
		if res.last != 0 {
			prev = res.last
		}
	}
	w.durable.Store(prev)
	w.next = max(prev, w.cfg.floor) + 1
	w.segs = segs
	if len(segs) == 0 {
		return w.startSegment()
	}
	last := segs[len(segs)-1]
	f, err := os.OpenFile(last.path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.Seek(last.size, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	w.active = f
	return nil
}

// truncateTail cuts the segment at end (rewriting the magic when nothing valid is left) and
// fsyncs it.
func truncateTail(path string, end int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if end < int64(len(magic)) {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.WriteAt([]byte(magic), 0); err != nil {
			return err
		}
	} else if err := f.Truncate(end); err != nil {
		return err
	}
	return f.Sync()
}

// startSegment creates the segment for w.next, makes it and its directory entry durable, and makes
// it the active segment.
func (w *WAL) startSegment() error {
	path := filepath.Join(w.dir, segmentName(w.next))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(magic)); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := fsutil.SyncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	if w.active != nil {
		w.active.Close()
	}
	w.active = f
	w.mu.Lock()
	w.segs = append(w.segs, &segment{first: w.next, size: int64(len(magic)), path: path})
	w.mu.Unlock()
	return nil
}

// Append queues one record whose payload is the concatenation of parts. It blocks while the writer's
// queue is full (bounded by bytes) and returns once the record is queued; the returned Pending
// completes when the record is durable. The caller must not modify parts until then.
func (w *WAL) Append(ctx context.Context, parts ...[]byte) (*Pending, error) {
	return w.AppendFunc(ctx, nil, parts...)
}

// AppendFunc is Append, and also calls onDurable (when not nil) from the writer goroutine once the
// record is durable, before LastSeq reports it and before the Pending completes. onDurable must be
// quick and must not call into the log.
func (w *WAL) AppendFunc(ctx context.Context, onDurable func(seq uint64), parts ...[]byte) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	if size > MaxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, size, MaxRecordBytes)
	}
	if errp := w.fatal.Load(); errp != nil {
		return nil, *errp
	}
	w.appendMu.RLock()
	defer w.appendMu.RUnlock()
	if w.closed {
		return nil, ErrClosed
	}
	if err := w.queued.Acquire(ctx, int64(size)); err != nil {
		return nil, err
	}
	r := &request{parts: parts, size: size, fn: onDurable, p: &Pending{done: make(chan struct{})}}
	select {
	case w.reqs <- r:
		return r.p, nil
	case <-ctx.Done():
		w.queued.Release(int64(size))
		return nil, ctx.Err()
	}
}

// LastSeq returns the sequence number of the last durable record (0 when there is none).
func (w *WAL) LastSeq() uint64 { return w.durable.Load() }

// Stats describes the log, for tests that watch segments come and go and group commits happen.
type Stats struct {
	// Segments counts the segment files, the active one included.
	Segments int
	// Groups counts the group commits (one write and one fsync each) since Open.
	Groups uint64
}

// Stats returns the log's Stats.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{Segments: len(w.segs), Groups: w.groups.Load()}
}

func (w *WAL) writer() {
	defer close(w.done)
	var group []*request
	for {
		group = group[:0]
		select {
		case r := <-w.reqs:
			group = w.gather(append(group, r), false)
		case <-w.stop:
			group = w.gather(group, true)
			if len(group) > 0 {
				w.write(group)
			}
			return
		}
		w.write(group)
	}
}

// gather adds every request queued right now to group, up to the group byte budget (all of them when
// final).
func (w *WAL) gather(group []*request, final bool) []*request {
	size := 0
	for _, r := range group {
		size += r.size
	}
	for final || size < maxGroupBytes {
		select {
		case r := <-w.reqs:
			group = append(group, r)
			size += r.size
		default:
			return group
		}
	}
	return group
}

// write makes one group durable and completes its Pendings.
func (w *WAL) write(group []*request) {
	err := w.writeGroup(group)
	for _, r := range group {
		r.p.err = err
		if err != nil {
			r.p.seq = 0
		}
		w.queued.Release(int64(r.size))
		close(r.p.done)
	}
}

func (w *WAL) writeGroup(group []*request) error {
	if errp := w.fatal.Load(); errp != nil {
		return *errp
	}
	w.mu.Lock()
	seg := w.segs[len(w.segs)-1]
	w.mu.Unlock()
	if seg.size >= w.cfg.segmentBytes && seg.last != 0 {
		if err := w.startSegment(); err != nil {
			return fmt.Errorf("wal %s: start segment: %w", w.dir, err)
		}
		w.mu.Lock()
		seg = w.segs[len(w.segs)-1]
		w.mu.Unlock()
	}
	total := 0
	for _, r := range group {
		total += headerSize + r.size
	}
	if cap(w.buf) < total {
		w.buf = make([]byte, 0, total)
	}
	buf := w.buf[:0]
	seq := w.next
	for _, r := range group {
		var head [headerSize]byte
		binary.LittleEndian.PutUint32(head[0:4], uint32(r.size))
		binary.LittleEndian.PutUint64(head[8:16], seq)
		c := crc32.Update(0, castagnoli, head[8:16])
		for _, p := range r.parts {
			c = crc32.Update(c, castagnoli, p)
		}
		binary.LittleEndian.PutUint32(head[4:8], c)
		buf = append(buf, head[:]...)
		for _, p := range r.parts {
			buf = append(buf, p...)
		}
		r.p.seq = seq
		seq++
	}
	if cap(w.buf) > 4*maxGroupBytes {
		w.buf = nil // do not keep an outsized buffer after a huge record
	} else {
		w.buf = buf[:0]
	}
	if _, err := w.active.Write(buf); err != nil {
		// A short write (a full disk, say) leaves a partial tail; cut it so the log stays appendable.
		if terr := w.truncateActive(seg.size); terr != nil {
			w.setFatal(fmt.Errorf("wal %s: write failed (%w) and the tail could not be cut: %w", w.dir, err, terr))
		}
		return fmt.Errorf("wal %s: write: %w", w.dir, err)
	}
	syncStart := time.Now()
	if err := w.active.Sync(); err != nil {
		// After a failed fsync the page cache can no longer be trusted; refuse further writes.
		err = fmt.Errorf("wal %s: fsync: %w", w.dir, err)
		w.setFatal(err)
		return err
	}
	if w.cfg.onSync != nil {
		w.cfg.onSync(time.Since(syncStart))
	}
	w.next = seq
	w.mu.Lock()
	seg.size += int64(total)
	seg.last = seq - 1
	w.mu.Unlock()
	for _, r := range group {
		if r.fn != nil {
			r.fn(r.p.seq)
		}
	}
	w.durable.Store(seq - 1)
	w.groups.Add(1)
	return nil
}

func (w *WAL) truncateActive(size int64) error {
	if err := w.active.Truncate(size); err != nil {
		return err
	}
	_, err := w.active.Seek(size, io.SeekStart)
	return err
}

func (w *WAL) setFatal(err error) {
	w.fatal.CompareAndSwap(nil, &err)
	w.cfg.log.Error("wal: refusing further writes", "dir", w.dir, "err", err)
}

// Replay calls fn for every durable record with after < seq <= upTo, in order. payload is only valid
// during the call. It stops at the first error fn returns or at ctx's end.
func (w *WAL) Replay(ctx context.Context, after, upTo uint64, fn func(seq uint64, payload []byte) error) error {
	if upTo > w.durable.Load() {
		upTo = w.durable.Load()
	}
	if upTo <= after {
		return nil
	}
	w.mu.Lock()
	segs := make([]segment, 0, len(w.segs))
	for i, s := range w.segs {
		// A segment can hold records above after unless the next one starts at or below after+1.
		if i+1 < len(w.segs) && w.segs[i+1].first <= after+1 {
			continue
		}
		if s.first > upTo {
			break
		}
		segs = append(segs, *s)
	}
	w.mu.Unlock()
	for _, s := range segs {
		done, err := replaySegment(ctx, s.path, after, upTo, fn)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
	return nil
}

// replaySegment streams one segment's records in (after, upTo]. done reports that upTo was reached.
func replaySegment(ctx context.Context, path string, after, upTo uint64, fn func(uint64, []byte) error) (done bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("wal replay: %w", err)
	}
	defer f.Close()
	name := filepath.Base(path)
	r := bufio.NewReaderSize(f, 1<<20)
	if _, err := r.Discard(len(magic)); err != nil {
		return false, fmt.Errorf("%w: segment %s: short header", ErrCorrupt, name)
	}
	var head [headerSize]byte
	off := int64(len(magic))
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if _, err := io.ReadFull(r, head[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, fmt.Errorf("%w: segment %s at byte %d: %w", ErrCorrupt, name, off, err)
		}
		length := binary.LittleEndian.Uint32(head[0:4])
		sum := binary.LittleEndian.Uint32(head[4:8])
		seq := binary.LittleEndian.Uint64(head[8:16])
		if seq > upTo {
			return true, nil
		}
		if length > MaxRecordBytes {
			return false, fmt.Errorf("%w: segment %s at byte %d: record length %d", ErrCorrupt, name, off, length)
		}
		if seq <= after {
			if _, err := r.Discard(int(length)); err != nil {
				return false, fmt.Errorf("%w: segment %s at byte %d: %w", ErrCorrupt, name, off, err)
			}
		} else {
			// A fresh buffer per record: fn may hand the bytes to code that keeps them.
			payload := make([]byte, length)
			if _, err := io.ReadFull(r, payload); err != nil {
				return false, fmt.Errorf("%w: segment %s at byte %d: %w", ErrCorrupt, name, off, err)
			}
			if crc(head[8:16], payload) != sum {
				return false, fmt.Errorf("%w: segment %s at byte %d: record %d checksum mismatch", ErrCorrupt, name, off, seq)
			}
			if err := fn(seq, payload); err != nil {
				return false, err
			}
		}
		off += headerSize + int64(length)
		if seq == upTo {
			return true, nil
		}
	}
}

// Release deletes every segment, other than the active one, whose records all have seq <= upTo.
func (w *WAL) Release(upTo uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := w.segs[:0:0]
	var errs []error
	removed := false
	for i, s := range w.segs {
		if i < len(w.segs)-1 && w.segs[i+1].first-1 <= upTo {
			if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
				keep = append(keep, s)
				continue
			}
			removed = true
			continue
		}
		keep = append(keep, s)
	}
	w.segs = keep
	if removed {
		if err := fsutil.SyncDir(w.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wal %s: release: %w", w.dir, err)
	}
	return nil
}

// Close writes what is queued, stops the writer, and unlocks the log. Append fails with ErrClosed
// afterwards. Close is idempotent.
func (w *WAL) Close() error {
	w.appendMu.Lock()
	if w.closed {
		w.appendMu.Unlock()
		<-w.done
		return nil
	}
	w.closed = true
	w.appendMu.Unlock()
	close(w.stop)
	<-w.done
	var errs []error
	if w.active != nil {
		errs = append(errs, w.active.Close())
	}
	errs = append(errs, w.lock.Close()) // closing the descriptor releases the lock
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wal %s: close: %w", w.dir, err)
	}
	return nil
}

// ReadDir calls fn for every intact record of the log in dir with seq > after, in order, without
// locking or repairing it: it stops quietly at a torn or damaged record, as a log another process is
// writing may end in one. A missing directory holds no records.
func ReadDir(ctx context.Context, dir string, after uint64, fn func(seq uint64, payload []byte) error) error {
	segs, err := listSegments(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("wal %s: %w", dir, err)
	}
	var prev uint64
	for i, s := range segs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i+1 < len(segs) && segs[i+1].first <= after+1 {
			continue
		}
		res, err := scanSegment(s.path, prev, func(seq uint64, payload []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if seq > after {
				return fn(seq, payload)
			}
			return nil
		})
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // released while we listed
			}
			return err
		}
		if res.problem != "" {
			return nil
		}
		if res.last != 0 {
			prev = res.last
		}
	}
	return nil
}
