package bufpool_test

import (
	"testing"
	"unsafe"

	"github.com/loaderproject/loader/internal/bufpool"
)

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%64 == 0 }

// TestSizes checks the sizes, capacities and alignment Allocate returns.
func TestSizes(t *testing.T) {
	for _, p := range []*bufpool.Pool{bufpool.New(), bufpool.NewUnzeroed()} {
		for _, tc := range []struct {
			size, wantCap int
		}{
			{0, 0},
			{1, 1}, // below MinClass: Go's
			{bufpool.MinClass - 1, bufpool.MinClass - 1},
			{bufpool.MinClass, bufpool.MinClass},
			{bufpool.MinClass + 1, 2 * bufpool.MinClass},
			{1 << 20, 1 << 20},
			{1<<20 + 1, 2 << 20},
			{bufpool.MaxClass, bufpool.MaxClass},
			{bufpool.MaxClass + 1, bufpool.MaxClass + 1},
		} {
			b := p.Allocate(tc.size)
			if len(b) != tc.size || cap(b) != tc.wantCap || (tc.size > 0 && !aligned(b)) {
				t.Errorf("Allocate(%d) = len %d, cap %d, aligned %v; want len %d, cap %d, aligned", tc.size, len(b), cap(b), aligned(b), tc.size, tc.wantCap)
			}
			p.Free(b)
		}
	}
}

// TestZeroed checks that New's pool returns zeroed memory however a buffer was used before it came
// back: a reused buffer, and the capacity a later Reallocate grows into.
func TestZeroed(t *testing.T) {
	p := bufpool.New()
	dirty := func(b []byte) {
		b = b[:cap(b)]
		for i := range b {
			b[i] = 0xAB
		}
	}
	zero := func(what string, b []byte) {
		t.Helper()
		for i, c := range b {
			if c != 0 {
				t.Fatalf("%s: byte %d of %d is %#x; want 0", what, i, len(b), c)
			}
		}
	}
	for range 50 { // sync.Pool may miss: every round checks what it got
		b := p.Allocate(10 << 10)
		zero("Allocate", b)
		dirty(b)
		p.Free(b)
		c := p.Allocate(9 << 10)
		zero("Allocate of a reused buffer", c)
		c = p.Reallocate(15<<10, c) // within the 16 KiB class: grows in place
		zero("Reallocate in place", c)
		dirty(c)
		p.Free(c)
	}
}

// TestReallocate checks that growing keeps the bytes, that shrinking keeps the buffer, and that
// buffers that are not the pool's are ignored by Free.
func TestReallocate(t *testing.T) {
	for _, p := range []*bufpool.Pool{bufpool.New(), bufpool.NewUnzeroed()} {
		g := p.Allocate(10)
		copy(g, "0123456789")
		g = p.Reallocate(100<<10, g)
		if len(g) != 100<<10 || string(g[:10]) != "0123456789" {
			t.Errorf("Reallocate lost the bytes: len %d, %q", len(g), g[:10])
		}
		if s := p.Reallocate(5, g); len(s) != 5 || unsafe.SliceData(s) != unsafe.SliceData(g) || string(s) != "01234" {
			t.Errorf("Reallocate to fewer bytes moved or changed the buffer: %q", s)
		}
		p.Free(g)
		p.Free(make([]byte, 3, 5))
		p.Free(make([]byte, bufpool.MinClass+1))
		p.Free(nil)
	}
}

// TestConcurrent runs allocations and frees from several goroutines (for the race detector).
func TestConcurrent(t *testing.T) {
	p := bufpool.New()
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				b := p.Allocate((g + 1) * (i + 1) * 100)
				for j := range b {
					if b[j] != 0 {
						t.Errorf("byte %d not zero", j)
						return
					}
					b[j] = byte(g + 1)
				}
				p.Free(b)
			}
		}()
	}
	for range 4 {
		<-done
	}
}
