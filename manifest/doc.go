// Package manifest records, durably, which rows of which source files a target has acknowledged, so
// that a re-run skips what is done and finishes what is not.
//
// A manifest is one append-only file per (target, table), named by [Path]. A source file is identified
// by a [FileID]: its path, size, modification time and schema fingerprint, so a changed file is a new
// file with no history. Within a file, work is recorded per unit (a Parquet row group, a CSV range, an
// IPC batch range) as acknowledged row ranges, so an interrupted unit resumes after its last
// acknowledged frame. Nothing is recorded before the target acknowledged it, so a crash can cause rows
// to be sent again but never skipped.
//
// # File format
//
// The file is JSON Lines. The first line is a version header, {"manifest":1}. A file version is
// declared once, with a small integer that later lines use:
//
//	{"file":0,"path":"data/a.parquet","size":1234,"mtime_ns":1700000000000000000,"schema":"9f2c..."}
//	{"f":0,"u":3,"from":0,"to":65536}      rows [0, 65536) of unit 3 are acknowledged
//	{"f":0,"u":3,"rows":100000}            unit 3 has 100000 rows in all
//
// Records go through a buffer; [Manifest.Sync] writes and fsyncs them, and concurrent Syncs share one
// fsync (group commit), so callers may Sync as often as they like. [Open] replays the file: a torn
// last line, left by a crash in the middle of a write, is ignored and cut off; a bad line followed by
// good ones is corruption and an error ([ErrCorrupt]). When the file has grown to several times the
// size of what it says, Open rewrites it compactly (to a temporary file, fsync'd, then renamed).
//
// # Locking
//
// Open takes an exclusive advisory lock on a companion file (the manifest path plus ".lock"), held
// until Close, so two loaders cannot share a manifest: the second gets [ErrLocked]. The lock is
// released by the operating system when a process dies. On Unix it is flock(2); on Windows
// LockFileEx; elsewhere there is no lock.
//
// # Concurrency
//
// A Manifest is safe for concurrent use; record and query methods take a mutex and never wait for
// the disk, except Sync, Reset and Close.
package manifest
