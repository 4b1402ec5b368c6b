package partitioner_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/loaderproject/loader/partitioner"
)

// acquireAsync starts Acquire in a goroutine; the returned channel yields its result.
func acquireAsync(ctx context.Context, b *partitioner.Budget, n int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Acquire(ctx, n) }()
	return done
}

// finished reports whether an acquireAsync result is ready, without blocking.
func finished(done <-chan error) (error, bool) {
	select {
	case err := <-done:
		return err, true
	default:
		return nil, false
	}
}

func TestBudgetBlocksUntilRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := partitioner.NewBudget(100)
		if err := b.Acquire(t.Context(), 60); err != nil {
			t.Fatal(err)
		}
		done := acquireAsync(t.Context(), b, 50)
		synctest.Wait()
		if _, ok := finished(done); ok {
			t.Fatal("Acquire(50) with 60 of 100 held returned; want it to wait")
		}
		b.Release(60)
		synctest.Wait()
		err, ok := finished(done)
		if !ok || err != nil {
			t.Fatalf("after Release: Acquire(50) = %v, returned %t; want nil, true", err, ok)
		}
		if got := b.InUse(); got != 50 {
			t.Errorf("InUse() = %d; want 50", got)
		}
	})
}

func TestBudgetOversize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := partitioner.NewBudget(100)
		// Alone, a request larger than the budget is admitted.
		if err := b.Acquire(t.Context(), 250); err != nil {
			t.Fatal(err)
		}
		small := acquireAsync(t.Context(), b, 1)
		synctest.Wait()
		if _, ok := finished(small); ok {
			t.Fatal("Acquire(1) while 250 of 100 held returned; want it to wait")
		}
		b.Release(250)
		synctest.Wait()
		if err, ok := finished(small); !ok || err != nil {
			t.Fatalf("Acquire(1) = %v, %t after release; want nil, true", err, ok)
		}
		// While something is in flight, an oversize request waits for everything to drain.
		big := acquireAsync(t.Context(), b, 250)
		synctest.Wait()
		if _, ok := finished(big); ok {
			t.Fatal("Acquire(250) with 1 held returned; want it to wait")
		}
		b.Release(1)
		synctest.Wait()
		if err, ok := finished(big); !ok || err != nil {
			t.Fatalf("Acquire(250) = %v, %t once empty; want nil, true", err, ok)
		}
		if got := b.InUse(); got != 250 {
			t.Errorf("InUse() = %d; want 250", got)
		}
	})
}

func TestBudgetPreCancelled(t *testing.T) {
	b := partitioner.NewBudget(100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(cancelled ctx) = %v; want context.Canceled", err)
	}
	if got := b.InUse(); got != 0 {
		t.Errorf("InUse() = %d after a failed Acquire; want 0", got)
	}
}

func TestBudgetCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := partitioner.NewBudget(100)
		if err := b.Acquire(t.Context(), 90); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		blocked := acquireAsync(ctx, b, 50) // first in line
		synctest.Wait()
		behind := acquireAsync(t.Context(), b, 10) // fits, but waits behind the first (FIFO)
		synctest.Wait()
		if _, ok := finished(behind); ok {
			t.Fatal("Acquire(10) overtook an earlier waiter; want first come, first served")
		}
		cancel()
		synctest.Wait()
		if err, ok := finished(blocked); !ok || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire = %v, %t; want context.Canceled", err, ok)
		}
		// With the head gone, the one behind it fits.
		if err, ok := finished(behind); !ok || err != nil {
			t.Fatalf("Acquire(10) = %v, %t after the head left; want nil, true", err, ok)
		}
		if got, want := b.InUse(), int64(100); got != want {
			t.Errorf("InUse() = %d; want %d", got, want)
		}
		// Nothing is left waiting: a request of 0 bytes is not queued behind anyone.
		zero := acquireAsync(t.Context(), b, 0)
		synctest.Wait()
		if err, ok := finished(zero); !ok || err != nil {
			t.Errorf("Acquire(0) on a full budget nobody waits for = %v, %t; want nil, true", err, ok)
		}
	})
}

// TestBudgetExactInFlight holds many acquirers and checks that exactly as many as fit are admitted.
func TestBudgetExactInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget, each, workers = 1000, 100, 25
		b := partitioner.NewBudget(budget)
		var started, holding atomic.Int64
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				started.Add(1)
				if err := b.Acquire(t.Context(), each); err != nil {
					t.Error(err)
					return
				}
				holding.Add(1)
				<-release
				holding.Add(-1)
				b.Release(each)
			})
		}
		synctest.Wait()
		if got, want := holding.Load(), int64(budget/each); got != want {
			t.Errorf("%d holders at once; want exactly %d", got, want)
		}
		if got, want := b.InUse(), int64(budget); got != want {
			t.Errorf("InUse() = %d; want %d", got, want)
		}
		if got, want := started.Load()-holding.Load(), int64(workers-budget/each); got != want {
			t.Errorf("%d acquirers waiting; want %d", got, want)
		}
		close(release)
		wg.Wait()
		if got := b.InUse(); got != 0 {
			t.Errorf("InUse() = %d at the end; want 0", got)
		}
	})
}

func TestBudgetReleaseTooMuchPanics(t *testing.T) {
	b := partitioner.NewBudget(10)
	defer func() {
		if recover() == nil {
			t.Error("Release(5) with nothing held did not panic")
		}
	}()
	b.Release(5)
}

func TestBudgetNegativeAcquire(t *testing.T) {
	b := partitioner.NewBudget(10)
	if err := b.Acquire(context.Background(), -1); err == nil {
		t.Error("Acquire(-1) = nil; want an error")
	}
}

// TestBudgetOversizeReleasedInParts: an oversize request holds the whole budget until the bytes in
// flight are back under it, however they are released.
func TestBudgetOversizeReleasedInParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := partitioner.NewBudget(100)
		if err := b.Acquire(t.Context(), 250); err != nil {
			t.Fatal(err)
		}
		small := acquireAsync(t.Context(), b, 10)
		b.Release(100) // 150 of 100 still held
		synctest.Wait()
		if _, ok := finished(small); ok {
			t.Fatal("Acquire(10) with 150 of 100 held returned; want it to wait")
		}
		b.Release(60) // 90 held: 10 more fit
		synctest.Wait()
		if err, ok := finished(small); !ok || err != nil {
			t.Fatalf("Acquire(10) with 90 of 100 held = %v, %t; want nil, true", err, ok)
		}
		more := acquireAsync(t.Context(), b, 1)
		synctest.Wait()
		if _, ok := finished(more); ok {
			t.Fatal("Acquire(1) with 100 of 100 held returned; want it to wait")
		}
		b.Release(90)
		b.Release(10)
		synctest.Wait()
		if err, ok := finished(more); !ok || err != nil {
			t.Fatalf("Acquire(1) on an empty budget = %v, %t; want nil, true", err, ok)
		}
		b.Release(1)
		if got := b.InUse(); got != 0 {
			t.Errorf("InUse() = %d at the end; want 0", got)
		}
		// Everything came back: the whole budget can be taken again.
		whole := acquireAsync(t.Context(), b, 100)
		synctest.Wait()
		if err, ok := finished(whole); !ok || err != nil {
			t.Fatalf("Acquire(100) on an empty budget = %v, %t; want nil, true", err, ok)
		}
	})
}

func TestBudgetMax(t *testing.T) {
	for _, tt := range []struct{ max, want int64 }{{100, 100}, {1, 1}, {0, 1}, {-5, 1}} {
		if got := partitioner.NewBudget(tt.max).Max(); got != tt.want {
			t.Errorf("NewBudget(%d).Max() = %d; want %d", tt.max, got, tt.want)
		}
	}
}

func TestBudgetTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := partitioner.NewBudget(100)
		if !b.TryAcquire(30, 50) || b.InUse() != 30 {
			t.Fatalf("TryAcquire(30, 50) on an idle budget: held %d; want it taken", b.InUse())
		}
		if b.TryAcquire(30, 50) {
			t.Fatal("TryAcquire(30, 50) with 30 held: taken; want refused (60 > limit 50)")
		}
		if !b.TryAcquire(20, 50) || b.InUse() != 50 {
			t.Fatalf("TryAcquire(20, 50) with 30 held: held %d; want 50", b.InUse())
		}
		if b.TryAcquire(60, 1000) || b.TryAcquire(-1, 1000) {
			t.Fatal("TryAcquire past the budget's size, or of a negative count: taken; want refused")
		}
		// A waiting Acquire is never overtaken, even by bytes that would fit.
		done := acquireAsync(t.Context(), b, 60)
		synctest.Wait()
		if _, ok := finished(done); ok {
			t.Fatal("Acquire(60) with 50 of 100 held returned; want it to wait")
		}
		if b.TryAcquire(1, 1000) {
			t.Fatal("TryAcquire(1) while an Acquire waits: taken; want refused")
		}
		b.Release(50)
		synctest.Wait()
		if err, ok := finished(done); !ok || err != nil || b.InUse() != 60 {
			t.Fatalf("after Release: Acquire(60) = %v, returned %t, held %d; want nil, true, 60", err, ok, b.InUse())
		}
		b.Release(60)
	})
}
