// Package wal is the embedded sink's write-ahead log: an append-only, segmented, checksummed log of
// opaque records with group commit.
//
// # Layout
//
// A log is a directory holding a LOCK file and segment files named after the first sequence number
// they may hold ("00000000000000000001.wal"). A segment starts with an 8-byte magic and holds records:
//
//	length   uint32 LE  payload length
//	crc      uint32 LE  CRC-32C (Castagnoli) of the 8 sequence bytes followed by the payload
//	sequence uint64 LE  strictly increasing across the whole log
//	payload  length bytes
//
// # Durability and group commit
//
// Append hands a record to the log's single writer goroutine and returns a [Pending]. The writer
// takes every record queued at that moment (up to a byte budget), writes them with one write and one
// fsync, assigns their sequence numbers in order, and only then completes their Pendings. A record
// whose Pending completed without error is on disk. A new segment's directory entry is fsync'd before
// any record in it is reported durable.
//
// # Recovery
//
// Open takes an exclusive flock on the LOCK file (a second process gets [ErrLocked]), then reads every
// segment. A torn or corrupt tail of the last segment (a crash during a write) is truncated away: such
// records were never reported durable. Damage anywhere else is reported as [ErrCorrupt], because the
// records after it were acknowledged and must not be dropped silently.
//
// # Concurrency
//
// Append, LastSeq and Stats are safe for concurrent use. Replay and Release are meant for one
// consumer (the sink's committer) and may run concurrently with Append. [ReadDir] reads a log without
// locking it, for tools that inspect a log another process owns.
package wal
