package partitioner

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Budget bounds the bytes in flight. It is safe for concurrent use.
//
// Waiters are served in arrival order: a request that does not fit blocks the ones behind it, so a
// large frame is never starved by small ones. It is a semaphore.Weighted (which is first come,
// first served) that also admits requests larger than itself.
type Budget struct {
	sem *semaphore.Weighted
	max int64

	mu   sync.Mutex
	used int64 // bytes held, as requested; the semaphore holds min(used, max)
}

// NewBudget returns a budget of max bytes. A max below 1 is raised to 1, which admits one request at
// a time.
func NewBudget(max int64) *Budget {
	if max < 1 {
		max = 1
	}
	return &Budget{sem: semaphore.NewWeighted(max), max: max}
}

// Max returns the budget's size in bytes.
func (b *Budget) Max() int64 { return b.max }

// Acquire waits until n bytes fit, or ctx ends. A request larger than the whole budget is admitted
// when nothing else is in flight, so it cannot deadlock, and holds the whole budget until released.
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
	// The semaphore waits forever for more than its size: an oversize request takes all of it.
	if err := b.sem.Acquire(ctx, min(n, b.max)); err != nil {
		return err
	}
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
	return nil
}

// TryAcquire takes n bytes only if they fit at once and the bytes held then are at most limit, and
// reports whether it took them. It never waits, and never goes ahead of an Acquire that is waiting.
// Readers use it to fetch ahead with bytes nobody else is asking for.
func (b *Budget) TryAcquire(n, limit int64) bool {
	if n < 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// Acquire adds to used after its semaphore wait, outside mu, so used may lag the semaphore by
	// Acquires in that window: the semaphore still keeps the total within max. What this adds to used
	// is counted at once, so the bytes taken here never sum past limit.
	if b.used+n > min(limit, b.max) || !b.sem.TryAcquire(n) {
		return false
	}
	b.used += n
	return true
}

// Release returns n bytes. Releasing more than is held is a programming error and panics.
func (b *Budget) Release(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("partitioner: Budget.Release(%d): negative", n))
	}
	b.mu.Lock()
	if n > b.used {
		used := b.used
		b.mu.Unlock()
		panic(fmt.Sprintf("partitioner: Budget.Release(%d) with only %d bytes held", n, used))
	}
	before := b.used
	b.used -= n
	// What the semaphore holds goes from min(before, max) to min(used, max): n, unless an oversize
	// request is (partly) being released.
	give := min(before, b.max) - min(b.used, b.max)
	b.mu.Unlock()
	if give > 0 {
		b.sem.Release(give)
	}
}

// InUse returns the bytes currently held.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
