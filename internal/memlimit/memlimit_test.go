package memlimit_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/memlimit"
)

// refused runs f and returns the *memlimit.Error it panicked with (nil if it did not panic, and a
// test failure if it panicked with something else).
func refused(t *testing.T, f func()) (lim *memlimit.Error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			var ok bool
			if lim, ok = memlimit.Recovered(r); !ok {
				t.Errorf("panic %v; want a *memlimit.Error", r)
			}
		}
	}()
	f()
	return nil
}

// TestLive: allocations count against the limit until freed, a reallocation that shrinks a buffer
// is always allowed, and the error says what was held and asked for.
func TestLive(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := memlimit.New(mem, 1000, memlimit.Live)
	b := a.Allocate(600)
	lim := refused(t, func() { a.Free(a.Allocate(500)) })
	if lim == nil || *lim != (memlimit.Error{Mode: memlimit.Live, Size: 500, InUse: 600, Limit: 1000}) {
		t.Errorf("Allocate(500) with 600 of 1000 used: refused with %+v; want Size 500, InUse 600, Limit 1000", lim)
	}
	if got := a.InUse(); got != 600 {
		t.Errorf("InUse() = %d after a refused allocation; want 600", got)
	}
	if lim := refused(t, func() { b = a.Reallocate(1100, b) }); lim == nil || lim.Size != 500 {
		t.Errorf("Reallocate(600 -> 1100) with a limit of 1000: refused with %v; want refused, 500 more asked for", lim)
	}
	if lim := refused(t, func() { b = a.Reallocate(10, b) }); lim != nil {
		t.Errorf("Reallocate(600 -> 10) refused with %v; want it allowed", lim)
	}
	if lim := refused(t, func() { a.Free(a.Allocate(990)) }); lim != nil {
		t.Errorf("Allocate(990) with 10 of 1000 used refused with %v; want it allowed", lim)
	}
	a.Free(b)
	if got := a.InUse(); got != 0 {
		t.Errorf("InUse() = %d after freeing everything; want 0", got)
	}
}

// TestPerAllocation: only a single allocation over the limit is refused, however much is held.
func TestPerAllocation(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := memlimit.New(mem, 1000, memlimit.PerAllocation)
	var held [][]byte
	for range 5 {
		held = append(held, a.Allocate(1000))
	}
	if got := a.InUse(); got != 5000 {
		t.Errorf("InUse() = %d; want 5000", got)
	}
	lim := refused(t, func() { a.Free(a.Allocate(1001)) })
	if lim == nil || *lim != (memlimit.Error{Mode: memlimit.PerAllocation, Size: 1001, Limit: 1000}) {
		t.Errorf("Allocate(1001) refused with %+v; want Size 1001, Limit 1000", lim)
	}
	if lim := refused(t, func() { held[0] = a.Reallocate(1<<40, held[0]) }); lim == nil {
		t.Error("Reallocate(1000 -> 1 TiB) allowed; want refused")
	}
	if lim := refused(t, func() { held[0] = a.Reallocate(10, held[0]) }); lim != nil {
		t.Errorf("Reallocate(1000 -> 10) refused with %v", lim)
	}
	for _, b := range held {
		a.Free(b)
	}
	if got := a.InUse(); got != 0 {
		t.Errorf("InUse() = %d after freeing everything; want 0", got)
	}
}

// TestNegativeSize: a negative size (a corrupt length that wrapped) is refused in both modes.
func TestNegativeSize(t *testing.T) {
	for _, mode := range []memlimit.Mode{memlimit.Live, memlimit.PerAllocation} {
		a := memlimit.New(memory.NewGoAllocator(), 1000, mode)
		if lim := refused(t, func() { a.Allocate(-1) }); lim == nil || lim.Size != -1 {
			t.Errorf("mode %d: Allocate(-1) refused with %v; want a *memlimit.Error of size -1", mode, lim)
		}
	}
}

func TestRecovered(t *testing.T) {
	lim := &memlimit.Error{Mode: memlimit.Live, Size: 1, Limit: 1}
	tests := []struct {
		name string
		r    any
		want bool
	}{
		{"the error", lim, true},
		// how arrow-go's readers recover it (the sink's TestDecoderMemoryLimit decodes through one)
		{"wrapped, as arrow-go recovers it", fmt.Errorf("arrow/ipc: unknown error while reading: %w", lim), true},
		{"another error", errors.New("it would allocate more than the 1-byte limit"), false},
		{"a string", "runtime error: index out of range", false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		got, ok := memlimit.Recovered(tt.r)
		if ok != tt.want || (ok && got != lim) {
			t.Errorf("Recovered(%s) = %v, %t; want %t", tt.name, got, ok, tt.want)
		}
	}
}

// TestErrorText: the messages say what the limit bounds.
func TestErrorText(t *testing.T) {
	for _, tt := range []struct {
		e    memlimit.Error
		want string
	}{
		{memlimit.Error{Mode: memlimit.Live, Size: 10, InUse: 95, Limit: 100}, "allocate more than the 100-byte limit in all (95 bytes held, 10 more asked for)"},
		{memlimit.Error{Mode: memlimit.PerAllocation, Size: 1 << 40, Limit: 1024}, "over the 1024-byte limit for one allocation"},
		{memlimit.Error{Mode: memlimit.PerAllocation, Size: -8, Limit: 1024}, "of -8 bytes"},
	} {
		if got := tt.e.Error(); !strings.Contains(got, tt.want) {
			t.Errorf("%+v.Error() = %q; want it to contain %q", tt.e, got, tt.want)
		}
	}
}

// TestConcurrent: the count stays exact under concurrent use (run with -race).
func TestConcurrent(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := memlimit.New(mem, 8*100*64, memlimit.Live)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 100 {
				b := a.Allocate(64)
				b = a.Reallocate(32+i%64, b)
				a.Free(b)
			}
		})
	}
	wg.Wait()
	if got := a.InUse(); got != 0 {
		t.Errorf("InUse() = %d; want 0", got)
	}
}
