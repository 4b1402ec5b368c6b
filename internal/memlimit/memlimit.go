// Package memlimit bounds what a decoder of untrusted input may ask the Go runtime for. A corrupt or
// hostile length (a compressed buffer claiming 200 GiB, a column chunk claiming a terabyte) makes
// arrow-go ask for that much at once, and running out of memory is a fatal error of the Go runtime,
// not a panic: no recover catches it. An Allocator wraps the real one and refuses such a request
// before it reaches the runtime by panicking with an *Error. Decoders run under a recover (arrow-go
// has its own around most of them, which wraps the value with %w) that finds the *Error with
// errors.As, or with Recovered, and turns it into an ordinary error.
//
// An Allocator bounds one of two things, chosen when it is made:
//
//   - Live: the bytes allocated through it and not yet freed, in all. The sink decodes one frame,
//     one write-ahead log record or one Flight SQL call with an allocator of its own, which it
//     releases completely, so "all it holds" is well defined and bounds the memory one client can
//     make the process take.
//   - PerAllocation: each allocation on its own. The readers use this: one allocator serves a whole
//     source, whose units are read concurrently and whose batches the caller keeps for as long as
//     the pipeline downstream wants, and some of arrow-go's Parquet decoders leave buffers to the
//     garbage collector without freeing them. A live total would then depend on the consumer's
//     pace and creep up with each leaked buffer, failing valid files at random; the cap on one
//     allocation, as large as any valid file needs, is what stops a corrupt length.
//
// An Allocator is safe for concurrent use.
package memlimit

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Mode says what an Allocator's limit bounds.
type Mode int

const (
	// Live bounds the bytes allocated and not yet freed, in all.
	Live Mode = iota
	// PerAllocation bounds each allocation (or reallocation's new size) on its own.
	PerAllocation
)

// Error is the panic value of an Allocator that refuses a request.
type Error struct {
	Mode  Mode
	Size  int64 // the bytes asked for: the allocation, or what a reallocation adds
	InUse int64 // Live: the bytes held when it was asked for
	Limit int64
}

func (e *Error) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("an allocation of %d bytes was asked for (a corrupt length?)", e.Size)
	}
	if e.Mode == PerAllocation {
		return fmt.Sprintf("a buffer of %d bytes was asked for, over the %d-byte limit for one allocation (a corrupt length?)", e.Size, e.Limit)
	}
	return fmt.Sprintf("it would allocate more than the %d-byte limit in all (%d bytes held, %d more asked for)", e.Limit, e.InUse, e.Size)
}

// Recovered returns the *Error that r, a value recover returned, is or wraps.
func Recovered(r any) (*Error, bool) {
	err, ok := r.(error)
	if !ok {
		return nil, false
	}
	var e *Error
	ok = errors.As(err, &e)
	return e, ok
}

// Allocator is a memory.Allocator that refuses, by panicking with an *Error, requests over its limit.
// Buffers it allocates must be freed through it.
type Allocator struct {
	mem   memory.Allocator
	limit int64
	mode  Mode
	used  atomic.Int64
}

var _ memory.Allocator = (*Allocator)(nil)

// New returns an Allocator over mem whose limit (in bytes) bounds what mode says. A limit below 1
// refuses every allocation but an empty one.
func New(mem memory.Allocator, limit int64, mode Mode) *Allocator {
	return &Allocator{mem: mem, limit: limit, mode: mode}
}

// InUse returns the bytes allocated through a and not yet freed.
func (a *Allocator) InUse() int64 { return a.used.Load() }

// reserve accounts for n more bytes (negative when a reallocation shrinks), or panics. size is the
// size of the buffer asked for.
func (a *Allocator) reserve(n, size int64) {
	if size < 0 {
		panic(&Error{Mode: a.mode, Size: size, Limit: a.limit})
	}
	if a.mode == PerAllocation {
		if size > a.limit {
			panic(&Error{Mode: a.mode, Size: size, Limit: a.limit})
		}
		a.used.Add(n)
		return
	}
	if now := a.used.Add(n); n > 0 && now > a.limit {
		a.used.Add(-n)
		panic(&Error{Mode: a.mode, Size: n, InUse: now - n, Limit: a.limit})
	}
}

// Allocate allocates size bytes from the wrapped allocator, or panics with an *Error.
func (a *Allocator) Allocate(size int) []byte {
	a.reserve(int64(size), int64(size))
	return a.mem.Allocate(size)
}

// Reallocate resizes b (allocated by a) to size bytes, or panics with an *Error. A reallocation that
// shrinks is always allowed in Live mode.
func (a *Allocator) Reallocate(size int, b []byte) []byte {
	a.reserve(int64(size)-int64(len(b)), int64(size))
	return a.mem.Reallocate(size, b)
}

// Free frees b, allocated by a.
func (a *Allocator) Free(b []byte) {
	a.used.Add(-int64(len(b)))
	a.mem.Free(b)
}
