// Package gctune sets the Go runtime's garbage collector for a load: a memory limit derived from
// the load's in-flight budget and a higher GOGC, unless the user set GOMEMLIMIT or GOGC. `loader load`
// and `loader bench` (around its loader runs, so it measures the loader as users run it) call it.
package gctune

import (
	"runtime"
	"runtime/debug"
)

// GC tuning for `loader load`. A load allocates several bytes per byte it sends (decoded batches,
// cast columns, frames) that die within one batch, while the memory it keeps is bounded by design:
// --max-inflight-bytes of frames plus each decoder's batch in the making. With Go's default GOGC=100
// the collector runs every time the small live heap doubles, and spends a fifth of the load's CPU
// doing so. When the user has set neither GOMEMLIMIT nor GOGC, the load instead sets a memory limit
// of the budget plus gcHeadroom (gcBase and gcPerDecoder for each decoder) and raises GOGC to
// gcPercent, so the heap may grow well past the live data, up to the limit, before a collection:
// fewer collections for the same bounded memory. A limit alone would change nothing below it, and
// GOGC=off would always fill it. Either variable set by the user is theirs: then nothing is changed
// (GOMEMLIMIT without GOGC keeps GOGC=100, as Go does).
const (
	gcBase        = 64 << 20  // the runtime, gRPC's buffers, the manifest, the encoder's pools
	gcPerDecoder  = 48 << 20  // a decoded batch (8 MiB), its cast, its pages and the frames it encodes
	gcMaxHeadroom = 160 << 20 // keeps the peak RSS near the budget + 200 MiB however many decoders
	gcPercent     = 400
)

// gcHeadroom is what a load holds besides its in-flight frames, with decoders units read at once,
// at most gcMaxHeadroom: the limit is soft, so with many decoders the collector runs more often
// rather than letting memory grow with the core count.
func gcHeadroom(decoders int) int64 {
	return min(gcBase+int64(max(decoders, 1))*gcPerDecoder, gcMaxHeadroom)
}

// ForLoad applies the memory limit and GOGC described above for a load with an in-flight budget of
// budget bytes and decoders units read at once (0: GOMAXPROCS), unless lookup (os.LookupEnv) finds
// GOMEMLIMIT or GOGC. It returns a function that restores the previous settings, and the limit it
// set (0 when it set none).
func ForLoad(budget int64, decoders int, lookup func(string) (string, bool)) (restore func(), limit int64) {
	if _, ok := lookup("GOMEMLIMIT"); ok {
		return func() {}, 0
	}
	if _, ok := lookup("GOGC"); ok {
		return func() {}, 0
	}
	if decoders <= 0 {
		decoders = runtime.GOMAXPROCS(0)
	}
	limit = budget + gcHeadroom(decoders)
	oldLimit := debug.SetMemoryLimit(limit)
	oldPercent := debug.SetGCPercent(gcPercent)
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}, limit
}
