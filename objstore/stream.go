package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"gocloud.dev/blob"

	"github.com/loaderproject/loader/internal/bufpool"
)

// streamChunk is the size of one read-ahead buffer of Stream, and streamAhead how many are read
// ahead of the consumer.
const (
	streamChunk = 1 << 20
	streamAhead = 4
)

// Stream reads the object sequentially from off to its end with one GET, conditional on its ETag.
// A goroutine reads up to 4 MiB ahead of the caller, so the download overlaps the decoding. Close
// stops it; the stream must be closed. A body shorter than the listed size fails with
// ErrTruncated.
func (r *Reader) Stream(ctx context.Context, off int64) (io.ReadCloser, error) {
	if off >= r.obj.Size {
		return io.NopCloser(eofReader{}), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	fails := 0
	rr, w, err := r.openWatched(ctx, off, &fails)
	if err != nil {
		cancel()
		return nil, err
	}
	st := &stream{ch: make(chan streamBuf, streamAhead), cancel: cancel, done: make(chan struct{}), pool: r.s.reads}
	go st.fill(ctx, r, rr, w, off, fails)
	return st, nil
}

// openWatched opens a GET of the object from off to its end, conditional on its ETag, under a new
// watchdog, and opens it again while the response stalls before its headers (Store.retryBody,
// *fails the failures in a row so far).
func (r *Reader) openWatched(ctx context.Context, off int64, fails *int) (*blob.Reader, *watchdog, error) {
	opts := &blob.ReaderOptions{BeforeRead: ifMatchRead(r.obj.ETag, 0)}
	for {
		gctx, w := r.s.watch(ctx)
		rr, err := r.openRange(ctx, gctx, w, off, -1, opts, off, r.obj.Size-off)
		if err == nil {
			return rr, w, nil
		}
		w.stop()
		*fails++
		if !r.s.retryBody(ctx, err, *fails) {
			return nil, nil, err
		}
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type streamBuf struct {
	data []byte
	err  error
}

type stream struct {
	pool   *bufpool.Pool // the Store's reads
	ch     chan streamBuf
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex // held by Read, so that Close frees no buffer under its feet
	chunk []byte     // the buffer from pool that cur is the rest of
	cur   []byte
	err   error
}

// fill reads the object into chunks for Read. A body that breaks off is opened again from where it
// stopped (Store.retryBody), so the stream goes on.
func (st *stream) fill(ctx context.Context, r *Reader, rr *blob.Reader, w *watchdog, off int64, fails int) {
	defer close(st.done)
	defer close(st.ch)
	defer func() {
		if rr != nil {
			_ = rr.Close()
		}
		if w != nil {
			w.stop()
		}
	}()
	want := r.obj.Size - off
	var got int64
	for {
		buf := st.pool.Allocate(int(min(streamChunk, max(want-got, 1))))
		var n int64
		var err error
		for {
			var m int64
			m, err = readBody(func(b []byte) (int, error) { return w.read(rr, b) }, buf[n:])
			n += m
			got += m
			r.s.bytes.Add(m)
			if m > 0 {
				fails = 0
			}
			if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
				break
			}
			fails++
			err = &bodyError{URL: r.obj.URL(), Op: "read " + fmtRange(off, want), Got: got, Err: err}
			if !r.s.retryBody(ctx, err, fails) {
				break
			}
			_ = rr.Close()
			w.stop()
			if rr, w, err = r.openWatched(ctx, off+got, &fails); err != nil {
				break
			}
		}
		var be *bodyError
		switch {
		case errors.Is(err, io.EOF):
			err = io.EOF
			if got < want {
				err = &Error{URL: r.obj.URL(), Op: "read " + fmtRange(off, want), Kind: ErrTruncated,
					Err: fmt.Errorf("got %d of %d bytes", got, want)}
			}
		case err != nil && ctx.Err() != nil:
			err = ctx.Err()
		case errors.As(err, &be):
			// the body broke off more times than the store tries
		case err != nil:
			var e *Error
			if !errors.As(err, &e) {
				err = r.readErr(ctx, err, off, want)
			}
		case got >= want:
			// the listed size is read: what follows is the end, or bytes of a longer version,
			// which the ETag condition has excluded
			err = io.EOF
		}
		select {
		case st.ch <- streamBuf{data: buf[:n], err: err}:
		case <-ctx.Done():
			st.pool.Free(buf)
			return
		}
		if err != nil {
			return
		}
	}
}

// Read returns the next bytes of the object.
func (st *stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for len(st.cur) == 0 {
		if st.err != nil {
			return 0, st.err
		}
		b, ok := <-st.ch
		st.pool.Free(st.chunk) // read to its end
		st.chunk = nil
		if !ok {
			if st.err == nil {
				st.err = io.ErrClosedPipe
			}
			return 0, st.err
		}
		st.chunk, st.cur, st.err = b.data, b.data, b.err
	}
	n := copy(p, st.cur)
	st.cur = st.cur[n:]
	return n, nil
}

// Close stops the read-ahead, waits for its goroutine and a Read under way, and returns the
// buffers to the pool. A Read after Close fails.
func (st *stream) Close() error {
	st.cancel()
	<-st.done // fill has closed ch
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pool.Free(st.chunk)
	st.chunk, st.cur = nil, nil
	for b := range st.ch {
		st.pool.Free(b.data)
	}
	if st.err == nil {
		st.err = io.ErrClosedPipe
	}
	return nil
}
