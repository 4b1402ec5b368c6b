// Package manifest records, durably, which rows of which source files a target has acknowledged, so
// that a re-run skips what is done and finishes what is not.
//
// A manifest is one append-only file per (target, table), named by [Path]. A source file is identified
// by a [FileID]: its path, size, modification time and schema fingerprint, so a changed file is a new
// file with no history. It also holds the file's unit layout, so a run that splits the file
// differently (other CSV split points) does not read another run's unit numbers as its own. Within a
// file, work is recorded per unit (a Parquet row group, a CSV range, an IPC batch range) as
// acknowledged row ranges, so an interrupted unit resumes after its last acknowledged frame.
//
// Before rows are sent, the loader records its intent ("this range is sent, not yet acknowledged")
// and makes it durable ([Manifest.Intent], then [Manifest.Sync]; concurrent senders share fsyncs).
// After a crash, the ranges sent but not acknowledged ([Manifest.Pending]) are exactly those the
// target may or may not hold: a re-run sends them again and counts them as possibly duplicated
// ([Manifest.Duplicate]), unless the target stores each unit range once. Nothing is recorded as
// acknowledged before the target acknowledged it, so a crash can cause rows to be sent again but
// never skipped.
//
// # File format
//
// The file is JSON Lines, format 2. The first line is a header with the format, the epoch (bumped by
// [Manifest.Reset], loader load --force; it is part of the unit ids a deduplicating target keeps, so
// a forced load is stored again) and, when given, the target and table:
//
//	{"manifest":2,"epoch":0,"target":"zerobus:grpc://127.0.0.1:7070","table":"main.sales.orders"}
//
// A file version is declared once, with a small integer that later lines use:
//
//	{"file":0,"path":"data/a.parquet","size":1234,"mtime_ns":1700000000000000000,"schema":"9f2c...","layout":"51ab..."}
//	{"f":0,"u":3,"sent":{"from":0,"to":65536}}  rows [0, 65536) of unit 3 are being sent (intent)
//	{"f":0,"u":3,"from":0,"to":65536}           rows [0, 65536) of unit 3 are acknowledged
//	{"f":0,"u":3,"rows":100000}                 unit 3 has 100000 rows in all
//	{"f":0,"u":3,"dup":{"from":0,"to":4096}}    rows [0, 4096) were sent again with their fate unknown
//	{"f":0,"failed":"unit 2: ..."}              why the last run gave the file up ("" clears it)
//	{"reported":4096}                           a run's summary counted this many possibly duplicated rows
//	{"dup_extra":12}                            (compaction) duplicates beyond the merged dup ranges
//
// Format 1 (no epoch, layouts, intents or duplicates) is read too and rewritten as format 2 when
// opened; its files match any layout.
//
// Records go through a buffer; [Manifest.Sync] writes and fsyncs them, and concurrent Syncs share one
// fsync (group commit), so callers may Sync as often as they like. [Open] replays the file: a torn
// last line, left by a crash in the middle of a write, is ignored and cut off; a bad line followed by
// good ones is corruption and an error ([ErrCorrupt]). When the file has grown to several times the
// size of what it says, Open rewrites it compactly (to a temporary file, fsync'd, then renamed), so
// the file is never seen half-written. [Inspect] reads a manifest without locking it (loader status).
//
// # Locking
//
// Open takes an exclusive advisory lock on a companion file (the manifest path plus ".lock"), held
// until Close, so two loaders cannot share a manifest: the second gets [ErrLocked]. The lock is
// released by the operating system when a process dies. On Unix it is flock(2); on Windows
// LockFileEx; elsewhere there is no lock.
//
// # Memory
//
// A Manifest holds what it knows of every file in memory, from Open to Close: 250 to 270 bytes
// of heap for a finished file with a 100-byte path and an S3 ETag (TestHeapPerFile; where in that
// range depends on the file count, as the map grows in steps), most of it the file's identity. A
// unit with ranges pending, duplicated or acknowledged in pieces keeps them until it is finished.
//
// # Concurrency
//
// A Manifest is safe for concurrent use; record and query methods take a mutex and never wait for
// the disk, except Sync, Reset and Close.
package manifest
