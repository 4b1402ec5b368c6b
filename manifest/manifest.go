// Package manifest records, durably, which rows of which source files a target has acknowledged, so
// that a re-run skips what is done and finishes what is not.
//
// API CONTRACT (written before the implementation; the implementer fills in the bodies and may add
// to it, but must not change these signatures without updating every caller).
//
// A manifest is one append-only file per (target, table). A source file is identified by its path,
// size, modification time and schema fingerprint: a changed file is a new file. Within a file, work is
// recorded per unit as acknowledged row ranges, so an interrupted unit resumes after its last
// acknowledged frame. Nothing is recorded before the target acknowledged it, so a crash can cause rows
// to be sent again but never skipped.
package manifest

import (
	"errors"
)

// ErrLocked means another process holds the manifest.
var ErrLocked = errors.New("manifest is in use by another loader")

// FileID identifies one version of a source file.
type FileID struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	ModTimeNano int64  `json:"mtime_ns"`
	Schema      string `json:"schema"` // fingerprint of the file's Arrow schema
}

// Range is a half-open row range [From, To) within a unit.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Manifest is an open manifest. It is safe for concurrent use.
type Manifest struct{}

// Path returns the manifest file for a target and table inside dir: a readable, collision-free name.
func Path(dir, target, table string) string { panic("manifest: not implemented") }

// Open opens (creating if needed) the manifest at path and takes an exclusive lock on it.
func Open(path string) (*Manifest, error) { panic("manifest: not implemented") }

// Reset forgets everything recorded (loader load --force).
func (m *Manifest) Reset() error { panic("manifest: not implemented") }

// Acked returns the unit's acknowledged row ranges, sorted and merged.
func (m *Manifest) Acked(f FileID, unit int) []Range { panic("manifest: not implemented") }

// UnitDone reports whether every row of the unit is acknowledged (its row count must have been
// recorded with UnitRows).
func (m *Manifest) UnitDone(f FileID, unit int) bool { panic("manifest: not implemented") }

// Ack records that rows r of the unit are acknowledged. Records are buffered; Sync makes them durable.
func (m *Manifest) Ack(f FileID, unit int, r Range) error { panic("manifest: not implemented") }

// UnitRows records the unit's total row count, once the reader has seen all of it.
func (m *Manifest) UnitRows(f FileID, unit int, rows int64) error { panic("manifest: not implemented") }

// Sync writes and fsyncs buffered records.
func (m *Manifest) Sync() error { panic("manifest: not implemented") }

// Close syncs and releases the manifest.
func (m *Manifest) Close() error { panic("manifest: not implemented") }
