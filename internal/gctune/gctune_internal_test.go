package gctune

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC checks that a load sets the memory limit from its budget and raises GOGC only when the
// user set neither GOMEMLIMIT nor GOGC, and that restore puts the previous settings back.
func TestTuneGC(t *testing.T) {
	const budget = 32 << 20
	const fileRSS = 50 << 20
	ceiling := maxHeadroom(fileRSS)
	for _, tc := range []struct {
		name      string
		env       map[string]string
		decoders  int
		wantLimit int64 // 0: nothing set
	}{
		{"neither set", nil, 2, budget + min(gcBase+2*gcPerDecoder, ceiling)},
		{"one decoder", nil, 1, budget + min(gcBase+gcPerDecoder, ceiling)},
		{"many decoders", nil, 64, budget + ceiling},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 2, 0},
		{"GOGC set", map[string]string{"GOGC": "100"}, 2, 0},
		{"GOGC set to off", map[string]string{"GOGC": "off"}, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			beforeLimit := debug.SetMemoryLimit(-1)
			beforePercent := debug.SetGCPercent(-1)
			debug.SetGCPercent(beforePercent)
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }

			restore, limit := forLoad(budget, tc.decoders, lookup, func() int64 { return fileRSS })
			if limit != tc.wantLimit {
				t.Errorf("forLoad(%d, %d) limit = %d; want %d", budget, tc.decoders, limit, tc.wantLimit)
			}
			gotLimit := debug.SetMemoryLimit(-1)
			gotPercent := debug.SetGCPercent(-1)
			debug.SetGCPercent(gotPercent)
			wantLimit, wantPercent := beforeLimit, beforePercent
			if tc.wantLimit != 0 {
				wantLimit, wantPercent = tc.wantLimit, gcPercent
			}
			if gotLimit != wantLimit || gotPercent != wantPercent {
				t.Errorf("after forLoad: memory limit %d, GOGC %d; want %d, %d", gotLimit, gotPercent, wantLimit, wantPercent)
			}

			restore()
			if l, p := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1); l != beforeLimit || p != beforePercent {
				t.Errorf("after restore: memory limit %d, GOGC %d; want %d, %d", l, p, beforeLimit, beforePercent)
			}
			debug.SetGCPercent(beforePercent)
		})
	}
}

// TestHeadroomLeavesRoomForFileBackedPages checks that the heap's headroom shrinks as the
// executable's resident pages grow, so that the headroom, those pages and their expected growth stay
// within rssBound, down to the floor of gcMinCeiling; and that RssFile is read from a status text.
func TestHeadroomLeavesRoomForFileBackedPages(t *testing.T) {
	for _, tc := range []struct {
		decoders int
		fileRSS  int64
		want     int64
	}{
		{1, 10 << 20, gcBase + gcPerDecoder},           // small binary: what one decoder needs
		{2, 10 << 20, gcBase + 2*gcPerDecoder},         // 160 MiB fits under 200 - 10 - 12
		{2, 50 << 20, rssBound - 50<<20 - fileGrowth},  // capped: 138 MiB
		{64, 57 << 20, rssBound - 57<<20 - fileGrowth}, // capped however many decoders
		{2, 150 << 20, gcMinCeiling},                   // a huge binary: the floor
	} {
		if got := gcHeadroom(tc.decoders, tc.fileRSS); got != tc.want {
			t.Errorf("gcHeadroom(%d, %d MiB) = %d MiB; want %d MiB", tc.decoders, tc.fileRSS>>20, got>>20, tc.want>>20)
		}
	}

	status := "Name:\tloader\nVmHWM:\t  250000 kB\nRssAnon:\t  6908 kB\nRssFile:\t   50016 kB\nRssShmem:\t0 kB\n"
	if got := parseRssFile([]byte(status)); got != 50016<<10 {
		t.Errorf("parseRssFile = %d; want %d", got, 50016<<10)
	}
	for _, bad := range []string{"", "RssFile:\tlots kB\n", "RssFile:\t12 MB\n", "RssAnon:\t1 kB\n"} {
		if got := parseRssFile([]byte(bad)); got != fileDefault {
			t.Errorf("parseRssFile(%q) = %d; want fileDefault %d", bad, got, fileDefault)
		}
	}
	if got := fileBackedRSS(); got <= 0 {
		t.Errorf("fileBackedRSS() = %d; want a positive size", got)
	}
}

// TestForDiscardSink checks that the discard sink's settings apply only when the user set neither
// variable, and that restore puts the previous ones back.
func TestForDiscardSink(t *testing.T) {
	for _, env := range []map[string]string{nil, {"GOGC": "100"}, {"GOMEMLIMIT": "1GiB"}} {
		beforeLimit := debug.SetMemoryLimit(-1)
		beforePercent := debug.SetGCPercent(-1)
		debug.SetGCPercent(beforePercent)
		restore, limit := ForDiscardSink(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		gotLimit := debug.SetMemoryLimit(-1)
		gotPercent := debug.SetGCPercent(-1)
		debug.SetGCPercent(gotPercent)
		wantLimit, wantPercent, wantSet := beforeLimit, beforePercent, int64(0)
		if env == nil {
			wantLimit, wantPercent, wantSet = discardSinkLimit, gcPercent, discardSinkLimit
		}
		if limit != wantSet || gotLimit != wantLimit || gotPercent != wantPercent {
			t.Errorf("env %v: ForDiscardSink set %d; runtime limit %d, GOGC %d; want %d, %d, %d", env, limit, gotLimit, gotPercent, wantSet, wantLimit, wantPercent)
		}
		restore()
		if l, p := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1); l != beforeLimit || p != beforePercent {
			t.Errorf("env %v: after restore: limit %d, GOGC %d; want %d, %d", env, l, p, beforeLimit, beforePercent)
		}
		debug.SetGCPercent(beforePercent)
	}
}
