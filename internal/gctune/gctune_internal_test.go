package gctune

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC checks that a load sets the memory limit from its budget and raises GOGC only when the
// user set neither GOMEMLIMIT nor GOGC, and that restore puts the previous settings back.
func TestTuneGC(t *testing.T) {
	const budget = 32 << 20
	for _, tc := range []struct {
		name      string
		env       map[string]string
		decoders  int
		wantLimit int64 // 0: nothing set
	}{
		{"neither set", nil, 2, budget + gcBase + 2*gcPerDecoder},
		{"one decoder", nil, 1, budget + gcBase + gcPerDecoder},
		{"many decoders", nil, 64, budget + gcMaxHeadroom},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 2, 0},
		{"GOGC set", map[string]string{"GOGC": "100"}, 2, 0},
		{"GOGC set to off", map[string]string{"GOGC": "off"}, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			beforeLimit := debug.SetMemoryLimit(-1)
			beforePercent := debug.SetGCPercent(-1)
			debug.SetGCPercent(beforePercent)
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }

			restore, limit := ForLoad(budget, tc.decoders, lookup)
			if limit != tc.wantLimit {
				t.Errorf("ForLoad(%d, %d) limit = %d; want %d", budget, tc.decoders, limit, tc.wantLimit)
			}
			gotLimit := debug.SetMemoryLimit(-1)
			gotPercent := debug.SetGCPercent(-1)
			debug.SetGCPercent(gotPercent)
			wantLimit, wantPercent := beforeLimit, beforePercent
			if tc.wantLimit != 0 {
				wantLimit, wantPercent = tc.wantLimit, gcPercent
			}
			if gotLimit != wantLimit || gotPercent != wantPercent {
				t.Errorf("after ForLoad: memory limit %d, GOGC %d; want %d, %d", gotLimit, gotPercent, wantLimit, wantPercent)
			}

			restore()
			if l, p := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1); l != beforeLimit || p != beforePercent {
				t.Errorf("after restore: memory limit %d, GOGC %d; want %d, %d", l, p, beforeLimit, beforePercent)
			}
			debug.SetGCPercent(beforePercent)
		})
	}
}
