package readers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/loaderproject/loader/internal/memlimit"
	"github.com/loaderproject/loader/objstore"
)

// limitAllocator returns the allocator a source of a file of fileSize bytes decodes with: it
// refuses, by panicking with a *memlimit.Error that guard turns into an ErrCorrupt error, any one
// allocation over cfg.allocLimit, so a corrupt length cannot ask the Go runtime for terabytes (a
// fatal error rather than a panic). It bounds single allocations, not the bytes held: see the
// memlimit package for why.
func limitAllocator(cfg *config, fileSize int64) memory.Allocator {
	return memlimit.New(cfg.mem, cfg.allocLimit(fileSize), memlimit.PerAllocation)
}

// guard runs a decoder step, turning a panic into an error wrapping ErrCorrupt. The stack is not
// part of the error; it is logged at debug level by callers that have a logger.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := memlimit.Recovered(r); ok {
				err = fmt.Errorf("%w: %w", ErrCorrupt, e)
				return
			}
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return fn()
}

// panicError is a recovered decoder panic.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string {
	return fmt.Sprintf("decoder panic: %v", e.value)
}

func (e *panicError) Unwrap() error { return ErrCorrupt }

// corrupt wraps a decoder error with ErrCorrupt unless it is a context error, already classified,
// the caller's or a *PageTooLargeError (a valid file). Where it happened (file, unit) is the
// *FileError's to say.
func corrupt(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrCorrupt) || errors.Is(err, ErrBadRow) {
		return err
	}
	var ce *callerError
	var pe *PageTooLargeError
	if errors.As(err, &ce) || errors.As(err, &pe) {
		return err
	}
	var oe *objstore.Error
	if errors.As(err, &oe) && !errors.Is(err, objstore.ErrTruncated) {
		return err // the store failed (access denied, changed object): the bytes are not to blame
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// sliceBatches calls fn with rec cut into slices of about batchBytes (zero copy), so that a file
// with huge batches still hands out bounded ones.
func sliceBatches(rec arrow.RecordBatch, batchBytes int64, fn func(arrow.RecordBatch) error) error {
	n := rec.NumRows()
	if n <= 1 {
		return fn(rec)
	}
	size := util.TotalRecordSize(rec)
	if size <= batchBytes {
		return fn(rec)
	}
	per := max(int64(1), batchBytes*n/size)
	for off := int64(0); off < n; off += per {
		end := min(n, off+per)
		s := rec.NewSlice(off, end)
		err := fn(s)
		s.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// stepper runs decoder steps so that a cancelled context returns at once even when a decoder is
// stuck inside a step (a file crafted to make it loop or a stalled pipe). The stuck step is
// abandoned: its goroutine runs on, and the cleanup that finish was given runs when it ends, so the
// step's readers and results are released then rather than under its feet.
type stepper struct {
	mu      sync.Mutex
	running bool
	cleanup func()
}

// run calls fn (under guard) on its own goroutine and waits for it or for ctx.
func (s *stepper) run(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	go func() {
		err := guard(fn)
		s.mu.Lock()
		s.running = false
		c := s.cleanup
		s.cleanup = nil
		s.mu.Unlock()
		if c != nil {
			c()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish runs cleanup now, or when the abandoned step ends if one is still running.
func (s *stepper) finish(cleanup func()) {
	s.mu.Lock()
	if s.running {
		s.cleanup = cleanup
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	cleanup()
}
