// Package bufpool is a memory.Allocator that keeps the buffers freed to it and hands them out
// again, for a pipeline that allocates about the same Arrow buffers over and over (a Parquet
// source's pages, each batch's columns) and frees each of them soon after: reused memory is neither
// asked of Go, zeroed by it nor collected again. Sizes round up to a power of two from MinClass; a
// request over MaxClass is Go's, never pooled, and a buffer that is never freed is simply not
// reused. Buffers are 64-byte aligned, as memory.GoAllocator's. The pool is sync.Pool's, so the
// garbage collector drops buffers that sit idle: what it holds beyond the live data is bounded by
// the memory limit, like any garbage.
//
// A Pool from New returns zeroed memory, as memory.GoAllocator does (arrow-go's builders and
// decoders rely on it). NewUnzeroed's does not zero reused memory: only for buffers every byte of
// which is written before it is read, such as Parquet page buffers (read or decompressed into).
//
// A buffer freed to a Pool must no longer be used by anyone, a rule Go's allocator never enforced
// (its Free does nothing): with a Pool, a use after the last Release reads another buffer's bytes.
// The owner of the pool is the owner of that contract. Safe for concurrent use.
package bufpool

import (
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

const (
	// MinClass is the smallest pooled buffer; smaller requests are Go's.
	MinClass = 4 << 10
	classes  = 15
	// MaxClass is the largest pooled buffer (64 MiB).
	MaxClass = MinClass << (classes - 1)
	align    = 64
)

// Pool is the allocator. Its zero value is not usable: use New or NewUnzeroed.
type Pool struct {
	zero    bool
	classes [classes]sync.Pool // *[]byte of cap MinClass<<i, 64-byte aligned
}

var _ memory.Allocator = (*Pool)(nil)

// New returns a pool that returns zeroed memory.
func New() *Pool { return &Pool{zero: true} }

// NewUnzeroed returns a pool that does not zero reused memory (see the package doc).
func NewUnzeroed() *Pool { return &Pool{} }

// class returns the class of a buffer of size bytes, or -1 for none.
func class(size int) int {
	if size < MinClass || size > MaxClass {
		return -1
	}
	c := 0
	for MinClass<<c < size {
		c++
	}
	return c
}

// Capacity returns the capacity of the buffer Allocate(size) returns: size rounded up to its class,
// or size itself when it is not pooled.
func Capacity(size int) int {
	if c := class(size); c >= 0 {
		return MinClass << c
	}
	return size
}

// Allocate returns size bytes.
func (p *Pool) Allocate(size int) []byte {
	c := class(size)
	if c < 0 {
		return alignedBytes(size, size)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		out := (*b)[:size]
		if p.zero {
			clear(out)
		}
		return out
	}
	return alignedBytes(size, MinClass<<c)
}

// Reallocate returns b grown or shrunk to size bytes, its first bytes kept.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		if p.zero && size > len(b) {
			clear(b[len(b):size]) // the capacity of a reused buffer holds its last user's bytes
		}
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free keeps b for reuse when it is one of the pool's sizes.
func (p *Pool) Free(b []byte) {
	c := class(cap(b))
	if c < 0 || cap(b) != MinClass<<c || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align != 0 {
		return // not one of the pool's sizes: Go's to collect
	}
	b = b[:cap(b)]
	p.classes[c].Put(&b)
}

// alignedBytes returns size bytes of a new 64-byte aligned slice of capacity capacity.
func alignedBytes(size, capacity int) []byte {
	buf := make([]byte, capacity+align)
	shift := int(uintptr(align)-uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%align) % align
	return buf[shift : shift+size : shift+capacity]
}
