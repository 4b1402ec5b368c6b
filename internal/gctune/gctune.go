// Package gctune sets the Go runtime's garbage collector for a load: a memory limit derived from
// the load's in-flight budget and a higher GOGC, unless the user set GOMEMLIMIT or GOGC. `loader load`
// and `loader bench` (around its loader runs, so it measures the loader as users run it) call it.
package gctune

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
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
//
// The limit covers only the memory the Go runtime manages. The rest of the resident set is mostly
// the executable's own pages (code, read-only data), which the kernel maps in as they are touched,
// with fault-around 64 KiB or more at a time: for this binary (object-store SDKs, OpenTelemetry)
// about 50 MiB at start and 57 MiB at a load's peak. So the headroom above the budget is capped at
// rssBound less that file-backed part (measured when the load starts, plus fileGrowth for the pages
// the load touches later), to keep the peak RSS within the budget + rssBound however large the
// binary grows and however many decoders run.
const (
	gcBase       = 64 << 20 // the runtime, gRPC's buffers, the manifest, the encoder's pools
	gcPerDecoder = 48 << 20 // a decoded batch (8 MiB), its cast, its pages and the frames it encodes
	gcPercent    = 400

	rssBound     = 200 << 20 // the documented bound on peak RSS above the budget
	fileGrowth   = 12 << 20  // code and data pages a load faults in after it starts
	fileDefault  = 64 << 20  // the file-backed resident set assumed where it cannot be read
	gcMinCeiling = 96 << 20  // the least headroom, however large the file-backed part
)

// gcHeadroom is what a load holds besides its in-flight frames, with decoders units read at once,
// at most maxHeadroom(fileRSS): the limit is soft, so with many decoders the collector runs more
// often rather than letting memory grow with the core count.
func gcHeadroom(decoders int, fileRSS int64) int64 {
	return min(gcBase+int64(max(decoders, 1))*gcPerDecoder, maxHeadroom(fileRSS))
}

// maxHeadroom is the most the Go heap may hold above the budget when fileRSS bytes of the resident
// set are file-backed pages (the executable's), so that the whole stays within the budget + rssBound.
func maxHeadroom(fileRSS int64) int64 {
	return max(rssBound-fileRSS-fileGrowth, gcMinCeiling)
}

// fileBackedRSS reads RssFile, the file-backed part of this process's resident set, from
// /proc/self/status (Linux); elsewhere, or when it cannot be read, it returns fileDefault.
func fileBackedRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fileDefault
	}
	return parseRssFile(b)
}

// parseRssFile returns the RssFile line's value in bytes from the text of /proc/PID/status, or
// fileDefault when it has none.
func parseRssFile(status []byte) int64 {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("RssFile:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return fileDefault
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return fileDefault
		}
		return kb << 10
	}
	return fileDefault
}

// ForLoad applies the memory limit and GOGC described above for a load with an in-flight budget of
// budget bytes and decoders units read at once (0: GOMAXPROCS), unless lookup (os.LookupEnv) finds
// GOMEMLIMIT or GOGC. It returns a function that restores the previous settings, and the limit it
// set (0 when it set none).
func ForLoad(budget int64, decoders int, lookup func(string) (string, bool)) (restore func(), limit int64) {
	return forLoad(budget, decoders, lookup, fileBackedRSS)
}

// forLoad is ForLoad with the file-backed resident set read by fileRSS, only when a limit is set.
func forLoad(budget int64, decoders int, lookup func(string) (string, bool), fileRSS func() int64) (restore func(), limit int64) {
	if _, ok := lookup("GOMEMLIMIT"); ok {
		return func() {}, 0
	}
	if _, ok := lookup("GOGC"); ok {
		return func() {}, 0
	}
	if decoders <= 0 {
		decoders = runtime.GOMAXPROCS(0)
	}
	limit = budget + gcHeadroom(decoders, fileRSS())
	oldLimit := debug.SetMemoryLimit(limit)
	oldPercent := debug.SetGCPercent(gcPercent)
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}, limit
}

// discardSinkLimit is the memory limit of a discard sink's heap: what it holds is the frames being
// checked (a few MiB per stream), so the limit only stops a pathological load from growing it.
const discardSinkLimit = 512 << 20

// ForDiscardSink sets the collector for `loader serve --discard`, unless lookup finds GOMEMLIMIT
// or GOGC: GOGC=400 under a limit of discardSinkLimit. Such a sink allocates a buffer per frame
// received and keeps almost nothing, so with Go's default GOGC=100 it collects a tiny heap very
// often (and gRPC's buffer pools, which the collector empties, miss). It returns a function that
// restores the previous settings, and the limit it set (0 when it set none).
func ForDiscardSink(lookup func(string) (string, bool)) (restore func(), limit int64) {
	if _, ok := lookup("GOMEMLIMIT"); ok {
		return func() {}, 0
	}
	if _, ok := lookup("GOGC"); ok {
		return func() {}, 0
	}
	oldLimit := debug.SetMemoryLimit(discardSinkLimit)
	oldPercent := debug.SetGCPercent(gcPercent)
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}, discardSinkLimit
}
