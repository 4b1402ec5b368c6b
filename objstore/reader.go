package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
)

// Reader reads one version of an object: every GET is conditional on the ETag it was opened with,
// so an object rewritten since it was listed fails with ErrChanged instead of mixing versions. It
// is an io.ReaderAt; ReadAt serves what an earlier Prefetch (or the tail read) holds and fetches
// the rest with a ranged GET. Its methods may be called from several goroutines at once.
type Reader struct {
	s   *Store
	obj Object

	mu   sync.Mutex
	tail []byte // the object's last bytes, kept from ReadTail
}

// Open returns a Reader of obj, whose Size and ETag are those listed.
func (s *Store) Open(ctx context.Context, obj Object) (*Reader, error) {
	if _, err := s.bucket(ctx, obj.Loc); err != nil {
		return nil, err
	}
	return &Reader{s: s, obj: obj}, nil
}

// Object is the object being read.
func (r *Reader) Object() Object { return r.obj }

// Size is the object's listed size.
func (r *Reader) Size() int64 { return r.obj.Size }

// Close releases nothing (the bucket is the Store's) and exists for io.Closer.
func (r *Reader) Close() error { return nil }

// get fetches [off, off+n) into p (len(p) == n) with a ranged GET (a suffix range when suffix).
// A body cut short by the connection (a reset, a close before the length the response declared) is
// fetched on from where it stopped, conditional on the same ETag, after the store's backoff: the
// SDK's retryer only retries a request until its response starts. Up to the store's attempts in a
// row without a byte of progress; then the last error is returned.
func (r *Reader) get(ctx context.Context, p []byte, off int64, suffix bool) error {
	var got int64
	fails := 0
	for {
		m, err := r.getOnce(ctx, p[got:], off+got, suffix && got == 0)
		got += m
		if err == nil {
			return nil
		}
		if m > 0 {
			fails = 0
		}
		fails++
		if !r.s.retryBody(ctx, err, fails) {
			return err
		}
	}
}

// getOnce is one ranged GET of [off, off+len(p)) into p. It returns the bytes it read, and a
// *bodyError when the body broke off before len(p) bytes.
func (r *Reader) getOnce(ctx context.Context, p []byte, off int64, suffix bool) (int64, error) {
	n := int64(len(p))
	opts := &blob.ReaderOptions{BeforeRead: ifMatchRead(r.obj.ETag, 0)}
	start, length := off, n
	if suffix {
		opts.BeforeRead = ifMatchRead(r.obj.ETag, n)
		start, length = 0, -1 // the Range header is set to bytes=-n by BeforeRead (S3); others by offset
		if r.obj.Loc.Scheme != SchemeS3 {
			start, length = off, n
		}
	}
	gctx, w := r.s.watch(ctx)
	defer w.stop()
	rr, err := r.openRange(ctx, gctx, w, start, length, opts, off, n)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rr.Close() }()
	got, err := readBody(func(b []byte) (int, error) { return w.read(rr, b) }, p)
	r.s.bytes.Add(got)
	switch {
	case errors.Is(err, io.EOF):
		// the response ended cleanly short of the range: the object holds fewer bytes
		return got, &Error{URL: r.obj.URL(), Op: "read " + fmtRange(off, n), Kind: ErrTruncated,
			Err: fmt.Errorf("got %d of %d bytes", got, n)}
	case err != nil:
		if ctx.Err() != nil {
			return got, r.readErr(ctx, err, off, n)
		}
		return got, &bodyError{URL: r.obj.URL(), Op: "read " + fmtRange(off, n), Got: got, Err: err}
	}
	return got, nil
}

// openRange sends the GET of [start, start+length) (length -1: to the end) with opts on gctx (w's
// context, derived from ctx), and checks the version that answers; off and n name the range in
// errors. A response that stalls before its headers is a *bodyError, to be fetched on.
func (r *Reader) openRange(ctx, gctx context.Context, w *watchdog, start, length int64, opts *blob.ReaderOptions, off, n int64) (*blob.Reader, error) {
	var rr *blob.Reader
	err := r.s.onBucket(ctx, r.obj.Loc, func(b *blob.Bucket) error {
		get := func() (err error) {
			r.s.requests.Add(1)
			rr, err = b.NewRangeReader(r.s.sdkCtx(gctx, r.obj.Loc.Scheme, false), r.obj.Loc.Key, start, length, opts)
			return err
		}
		var err error
		if headersWatched(r.obj.Loc.Scheme) {
			err = w.open(get)
		} else {
			err = get()
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errStalled) && ctx.Err() == nil:
			return &bodyError{URL: r.obj.URL(), Op: "read " + fmtRange(off, n), Err: err}
		}
		return r.readErr(ctx, err, off, n)
	})
	if err != nil {
		return nil, err
	}
	if v := readVersion(rr); v != "" && r.obj.ETag != "" && v != r.obj.ETag {
		_ = rr.Close()
		return nil, &Error{URL: r.obj.URL(), Op: "read " + fmtRange(off, n), Kind: ErrChanged}
	}
	return rr, nil
}

// readBody fills p with read. Unlike io.ReadFull, it tells a body that ended cleanly (io.EOF: the
// response was shorter) from one that broke off (net/http's io.ErrUnexpectedEOF when the
// connection closes before the declared length, the connection's error, or errStalled).
func readBody(read func([]byte) (int, error), p []byte) (int64, error) {
	var got int
	for got < len(p) {
		m, err := read(p[got:])
		got += m
		if err != nil {
			if errors.Is(err, io.EOF) && got == len(p) {
				return int64(got), nil
			}
			return int64(got), err
		}
	}
	return int64(got), nil
}

func (r *Reader) readErr(ctx context.Context, err error, off, n int64) error {
	op := "read " + fmtRange(off, n)
	if b, berr := r.s.bucket(ctx, r.obj.Loc); berr == nil { // opened by Open: the Store's, or the one it moved to
		err = r.s.classify(ctx, b, r.obj.Loc, op, err)
	} else {
		err = classify(r.obj.Loc, op, err)
	}
	var e *Error
	if errors.As(err, &e) && errors.Is(e.Kind, ErrPrecondition) {
		e.Kind = ErrChanged // the If-Match of a read: another version is there now
		// or none: some stores (Azure) answer a conditional read of a deleted object with 412 too
		var se *Error
		if _, serr := r.s.Stat(ctx, r.obj.Loc); ctx.Err() == nil && errors.As(serr, &se) &&
			(errors.Is(se.Kind, ErrNotFound) || errors.Is(se.Kind, ErrNoSuchBucket)) {
			e.Kind, e.Code = se.Kind, se.Code
		}
	}
	if errors.As(err, &e) && e.Kind == nil && r.obj.Loc.Scheme == SchemeS3 && e.Code == "InvalidRange" {
		e.Kind = ErrTruncated
	}
	return err
}

// ReadAt reads len(p) bytes at off, from the tail kept by ReadTail or with one ranged GET. Reading
// past the listed size returns io.EOF with the bytes before it, as a file does.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	return r.readAt(context.Background(), p, off)
}

func (r *Reader) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", r.obj.URL(), off)
	}
	if off >= r.obj.Size {
		return 0, io.EOF
	}
	want := p
	if rest := r.obj.Size - off; int64(len(p)) > rest {
		want = p[:rest]
	}
	r.mu.Lock()
	tail := r.tail
	r.mu.Unlock()
	if tstart := r.obj.Size - int64(len(tail)); len(tail) > 0 && off >= tstart {
		n := copy(want, tail[off-tstart:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	if err := r.get(ctx, want, off, false); err != nil {
		return 0, err
	}
	if len(want) < len(p) {
		return len(want), io.EOF
	}
	return len(p), nil
}

// ReadTail fetches the object's last n bytes (all of it when smaller) with one suffix-range request
// and keeps them: later ReadAts within them, and ReadTails of no more, are served without a request.
// The bytes returned are the ones kept: not to be modified.
func (r *Reader) ReadTail(ctx context.Context, n int64) ([]byte, error) {
	n = min(n, r.obj.Size)
	r.mu.Lock()
	kept := r.tail
	r.mu.Unlock()
	if int64(len(kept)) >= n {
		return kept[int64(len(kept))-n:], nil
	}
	buf := make([]byte, n)
	if n > 0 {
		if err := r.get(ctx, buf, r.obj.Size-n, true); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	if int64(len(r.tail)) < n {
		r.tail = buf
	}
	r.mu.Unlock()
	return buf, nil
}

// Range is a byte range of an object: Len bytes at Off.
type Range struct{ Off, Len int64 }

// Prefetched holds the bytes of a Prefetch; it is an io.ReaderAt over the whole object that serves
// those ranges from memory and anything else through its Reader. Release gives its memory back for
// the next Prefetch to reuse.
type Prefetched struct {
	r     *Reader
	bytes int64

	mu    sync.RWMutex // held by ReadAt while it copies from spans, so Release waits for it
	spans []span       // sorted by off, not overlapping
}

type span struct {
	off    int64
	data   []byte
	pooled bool // from the Store's reads (the tail is the Reader's)
}

// Release returns the prefetched bytes to the pool. A ReadAt running meanwhile finishes first;
// later ones fetch what they read from the object. Release is idempotent.
func (p *Prefetched) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.r.s.freeSpans(p.spans)
	p.spans = nil
}

func (s *Store) freeSpans(spans []span) {
	for _, sp := range spans {
		if sp.pooled {
			s.reads.Free(sp.data)
		}
	}
}

// Bytes is how many bytes the prefetch fetched.
func (p *Prefetched) Bytes() int64 { return p.bytes }

// Prefetch fetches ranges of the object: ranges that touch or overlap (or lie within gap bytes of
// each other) are merged into one request, requests longer than the store's range size are split,
// and the requests run in parallel, at most the store's parallelism at once. Ranges past the
// object's size are cut at it, and bytes the tail (ReadTail) holds are not fetched again.
func (r *Reader) Prefetch(ctx context.Context, ranges []Range, gap int64) (*Prefetched, error) {
	r.mu.Lock()
	tail := r.tail
	r.mu.Unlock()
	tailStart := r.obj.Size - int64(len(tail))
	// the bytes the tail holds are not fetched again
	merged := mergeRanges(ranges, gap, tailStart)
	var reqs []Range
	for _, m := range merged {
		for off := m.Off; off < m.Off+m.Len; off += r.s.opts.rangeBytes {
			reqs = append(reqs, Range{Off: off, Len: min(r.s.opts.rangeBytes, m.Off+m.Len-off)})
		}
	}
	p := &Prefetched{r: r, spans: make([]span, len(reqs))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.s.opts.parallel)
	for i, q := range reqs {
		buf := r.s.reads.Allocate(int(q.Len))
		p.spans[i] = span{off: q.Off, data: buf, pooled: true}
		p.bytes += q.Len
		g.Go(func() error { return r.get(gctx, buf, q.Off, false) })
	}
	if err := g.Wait(); err != nil {
		r.s.freeSpans(p.spans)
		return nil, err
	}
	if len(tail) > 0 {
		p.spans = append(p.spans, span{off: tailStart, data: tail})
	}
	return p, nil
}

// mergeRanges sorts ranges, cuts them at size and merges those within gap bytes of each other.
func mergeRanges(ranges []Range, gap, size int64) []Range {
	rs := make([]Range, 0, len(ranges))
	for _, q := range ranges {
		if q.Off < 0 || q.Len <= 0 || q.Off >= size {
			continue
		}
		q.Len = min(q.Len, size-q.Off)
		rs = append(rs, q)
	}
	slices.SortFunc(rs, func(a, b Range) int { return int(min(max(a.Off-b.Off, -1), 1)) })
	var out []Range
	for _, q := range rs {
		if n := len(out); n > 0 && q.Off <= out[n-1].Off+out[n-1].Len+gap {
			end := max(out[n-1].Off+out[n-1].Len, q.Off+q.Len)
			out[n-1].Len = end - out[n-1].Off
			continue
		}
		out = append(out, q)
	}
	return out
}

// ReadAt serves [off, off+len(p)) from the prefetched spans when they hold all of it, else from
// the Reader.
func (p *Prefetched) ReadAt(b []byte, off int64) (int, error) {
	n := p.readSpans(b, off)
	if n == len(b) {
		return n, nil
	}
	if off+int64(n) >= p.r.obj.Size {
		return n, io.EOF
	}
	return p.r.ReadAt(b, off)
}

// readSpans copies what the spans hold of [off, off+len(b)) into b, up to the first byte they do
// not hold, and returns how many bytes it copied.
func (p *Prefetched) readSpans(b []byte, off int64) int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(p.spans, off, func(s span, off int64) int {
		switch {
		case s.off+int64(len(s.data)) <= off:
			return -1
		case s.off > off:
			return 1
		}
		return 0
	})
	n := 0
	for pos := off; n < len(b) && i < len(p.spans) && p.spans[i].off <= pos; i++ {
		s := p.spans[i]
		if pos >= s.off+int64(len(s.data)) {
			continue
		}
		c := copy(b[n:], s.data[pos-s.off:])
		n += c
		pos += int64(c)
	}
	return n
}

// Blocks returns an io.ReaderAt over the object that fetches whole aligned blocks of blockBytes with
// one GET each and keeps the last keep of them, for readers that read forward in small pieces (an
// Arrow IPC file's messages). It is safe for concurrent use; give each sequential reader its own.
func (r *Reader) Blocks(blockBytes int64, keep int) io.ReaderAt {
	return &blockReader{r: r, size: max(blockBytes, 4096), keep: max(keep, 1)}
}

type blockReader struct {
	r    *Reader
	size int64
	keep int

	mu     sync.Mutex
	blocks []span // most recently used last
}

func (b *blockReader) block(idx int64) ([]byte, error) {
	off := idx * b.size
	b.mu.Lock()
	for i, s := range b.blocks {
		if s.off == off {
			b.blocks = append(append(b.blocks[:i:i], b.blocks[i+1:]...), s)
			b.mu.Unlock()
			return s.data, nil
		}
	}
	b.mu.Unlock()
	buf := make([]byte, min(b.size, b.r.obj.Size-off))
	if _, err := b.r.readAt(context.Background(), buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b.mu.Lock()
	b.blocks = append(b.blocks, span{off: off, data: buf})
	if len(b.blocks) > b.keep {
		b.blocks = b.blocks[1:]
	}
	b.mu.Unlock()
	return buf, nil
}

// ReadAt reads through the blocks.
func (b *blockReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", b.r.obj.URL(), off)
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= b.r.obj.Size {
			return n, io.EOF
		}
		blk, err := b.block(pos / b.size)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], blk[pos%b.size:])
	}
	return n, nil
}
