package partitioner

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// Budget bounds the bytes in flight. It is safe for concurrent use.
//
// Waiters are served in arrival order: a request that does not fit blocks the ones behind it, so a
// large frame is never starved by small ones.
type Budget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	waiters list.List // of *budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes were granted
}

// NewBudget returns a budget of max bytes. A max below 1 is raised to 1, which admits one request at
// a time.
func NewBudget(max int64) *Budget {
	if max < 1 {
		max = 1
	}
	return &Budget{max: max}
}

// Max returns the budget's size in bytes.
func (b *Budget) Max() int64 { return b.max }

// fits reports whether n more bytes may be granted now. Callers hold b.mu.
func (b *Budget) fits(n int64) bool { return b.used == 0 || b.used+n <= b.max }

// Acquire waits until n bytes fit, or ctx ends. A request larger than the whole budget is admitted
// when nothing else is in flight, so it cannot deadlock.
//
// An Acquire on a context that is already done fails at once with its error, even when the bytes would
// fit. When it returns an error nothing was acquired. A negative n is an error.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if n < 0 {
		return fmt.Errorf("partitioner: acquire %d bytes: negative", n)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted while we were being cancelled: give the bytes back.
			b.used -= n
			b.grantLocked()
		default:
			front := b.waiters.Front() == elem
			b.waiters.Remove(elem)
			if front {
				b.grantLocked() // the ones behind us may fit now
			}
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// Release returns n bytes. Releasing more than is held is a programming error and panics.
func (b *Budget) Release(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("partitioner: Budget.Release(%d): negative", n))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.used {
		panic(fmt.Sprintf("partitioner: Budget.Release(%d) with only %d bytes held", n, b.used))
	}
	b.used -= n
	b.grantLocked()
}

// grantLocked grants waiting requests in order while they fit.
func (b *Budget) grantLocked() {
	for {
		e := b.waiters.Front()
		if e == nil {
			return
		}
		w := e.Value.(*budgetWaiter)
		if !b.fits(w.n) {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// InUse returns the bytes currently held.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Waiting returns the number of Acquire calls currently blocked (for progress reports: a non-zero
// value means the producers are throttled by the target).
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}
