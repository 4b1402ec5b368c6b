package readers

import (
	"testing"
	"unsafe"
)

// TestPagePool checks the page buffer allocator: sizes, 64-byte alignment, reuse of a freed buffer
// of the same class, growth that keeps the bytes, and buffers past the largest class left to Go.
func TestPagePool(t *testing.T) {
	var p pagePool
	aligned := func(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%pageAlign == 0 }
	for _, tc := range []struct {
		size, wantCap int
	}{
		{0, pageClassMin},
		{1, pageClassMin},
		{pageClassMin, pageClassMin},
		{pageClassMin + 1, 2 * pageClassMin},
		{1 << 20, 1 << 20},
		{1<<20 + 1, 2 << 20},
		{pageClassMax, pageClassMax},
		{pageClassMax + 1, pageClassMax + 1},
	} {
		b := p.Allocate(tc.size)
		if len(b) != tc.size || cap(b) != tc.wantCap || !aligned(b) {
			t.Errorf("Allocate(%d) = len %d, cap %d, aligned %v; want len %d, cap %d, aligned", tc.size, len(b), cap(b), aligned(b), tc.size, tc.wantCap)
		}
		p.Free(b)
	}

	// A freed buffer comes back for the next request of its class (sync.Pool keeps it until a GC,
	// and the test holds no other references; a Get may still miss, so only a hit is checked).
	b := p.Allocate(100 << 10)
	b[0] = 42
	p.Free(b)
	if c := p.Allocate(90 << 10); unsafe.SliceData(c) == unsafe.SliceData(b) && c[0] != 42 {
		t.Errorf("reused buffer lost its bytes")
	}

	// Growing keeps the bytes.
	g := p.Allocate(10)
	copy(g, "0123456789")
	g = p.Reallocate(100<<10, g)
	if len(g) != 100<<10 || string(g[:10]) != "0123456789" {
		t.Errorf("Reallocate lost the bytes: len %d, %q", len(g), g[:10])
	}
	if s := p.Reallocate(5, g); len(s) != 5 || unsafe.SliceData(s) != unsafe.SliceData(g) {
		t.Errorf("Reallocate to fewer bytes moved the buffer")
	}

	// Buffers that are not the pool's are ignored by Free.
	p.Free(make([]byte, 3, 5))
	p.Free(nil)
}
