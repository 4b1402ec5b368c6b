package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// faultState holds the installed fault set and its call counters.
type faultState struct {
	mu          sync.Mutex
	f           Faults
	unavailable int // calls still to refuse
	dropCalls   int // DoPuts still to drop; meaningful when f.DropCalls > 0
	silent      int // DoPuts still to keep silent
}

func (fs *faultState) set(f Faults) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.f = f
	fs.unavailable = max(f.UnavailableCalls, 0)
	fs.dropCalls = max(f.DropCalls, 0)
	fs.silent = max(f.SilentCalls, 0)
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
	silent      bool // send no acks
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
	if fs.silent > 0 {
		fs.silent--
		sf.silent = true
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

// UnmarshalJSON reads a fault set strictly (unknown keys are errors). Durations may be integers of
// nanoseconds, as MarshalJSON writes them, or Go duration strings such as "150ms".
func (f *Faults) UnmarshalJSON(b []byte) error {
	type plain Faults
	var aux struct {
		plain
		AckDelay    jsonDuration `json:"ack_delay,omitempty"`
		RotateGrace jsonDuration `json:"rotate_grace,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the fault set")
	}
	*f = Faults(aux.plain)
	f.AckDelay, f.RotateGrace = time.Duration(aux.AckDelay), time.Duration(aux.RotateGrace)
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"drop_after_frames", int64(f.DropAfterFrames)}, {"drop_calls", int64(f.DropCalls)},
		{"ack_delay", int64(f.AckDelay)}, {"rotate_after_frames", int64(f.RotateAfterFrames)},
		{"rotate_grace", int64(f.RotateGrace)}, {"unavailable_calls", int64(f.UnavailableCalls)},
		{"silent_calls", int64(f.SilentCalls)},
	} {
		if c.v < 0 {
			return fmt.Errorf("%s is negative", c.name)
		}
	}
	return nil
}

// jsonDuration is a duration given as nanoseconds or as a Go duration string.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = jsonDuration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want nanoseconds or a duration string such as \"150ms\": %w", err)
	}
	*d = jsonDuration(n)
	return nil
}
