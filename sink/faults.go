package sink

import (
	"sync"
)

// faultState holds the installed fault set and its call counters.
type faultState struct {
	mu          sync.Mutex
	f           Faults
	unavailable int // calls still to refuse
	dropCalls   int // DoPuts still to drop; meaningful when f.DropCalls > 0
}

func (fs *faultState) set(f Faults) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.f = f
	fs.unavailable = max(f.UnavailableCalls, 0)
	fs.dropCalls = max(f.DropCalls, 0)
}

func (fs *faultState) get() Faults {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.f
}

// takeUnavailable reports whether this call is to be refused, counting it.
func (fs *faultState) takeUnavailable() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.unavailable > 0 {
		fs.unavailable--
		return true
	}
	return false
}

// streamFaults is the fault set one DoPut runs with.
type streamFaults struct {
	dropAfter   int // 0: never
	ackDelayNs  int64
	rotateAfter int
	rotateMs    uint64
}

// forStream snapshots the set for a DoPut whose setup succeeded, taking a drop turn if one is due.
func (fs *faultState) forStream() streamFaults {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sf := streamFaults{
		ackDelayNs:  int64(max(fs.f.AckDelay, 0)),
		rotateAfter: max(fs.f.RotateAfterFrames, 0),
		rotateMs:    uint64(max(fs.f.RotateGrace.Milliseconds(), 0)),
	}
	if fs.f.DropAfterFrames > 0 {
		switch {
		case fs.f.DropCalls <= 0:
			sf.dropAfter = fs.f.DropAfterFrames
		case fs.dropCalls > 0:
			fs.dropCalls--
			sf.dropAfter = fs.f.DropAfterFrames
		}
	}
	return sf
}
