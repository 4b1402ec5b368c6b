package manifest

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// Replica keeps a second, remote copy of a manifest's file, for machines that do not keep their
// disks (a manifest in object storage). The manifest calls it with every byte it makes durable
// locally, in order, under its sync lock: never concurrently.
type Replica interface {
	// Append stores data, the bytes appended to the file since the previous Append or Reset. It is
	// called after they are fsynced locally and before Sync returns, so a record Sync made durable is
	// durable in the replica too. An error fails the manifest, as a failed fsync does.
	Append(data []byte) error
	// Reset replaces the replica's copy with data, the whole file after it was rewritten: when the
	// manifest is opened (a new header, a torn tail cut or a compaction) and by Reset (--force).
	Reset(data []byte) error
}

// WithReplica keeps r in step with the manifest's file (see Replica). Open calls r.Reset with the
// file once it is replayed, so the replica starts compacted.
func WithReplica(r Replica) Option {
	return func(m *Manifest) { m.replica = r }
}

// sink is what the buffered writer writes to: the file, and with a replica also the tail the next
// Sync hands it.
func (m *Manifest) sink() io.Writer {
	if m.replica == nil {
		return m.f
	}
	return io.MultiWriter(m.f, &m.tail)
}

// takeTail returns the bytes written since the last call and forgets them. m.mu must be held.
func (m *Manifest) takeTail() []byte {
	if m.tail.Len() == 0 {
		return nil
	}
	b := bytes.Clone(m.tail.Bytes())
	m.tail.Reset()
	return b
}

// resetReplica hands the replica the whole file, as it is on disk. m.mu must be held and the
// buffered writer empty.
func (m *Manifest) resetReplica() error {
	if m.replica == nil {
		return nil
	}
	data, err := os.ReadFile(m.path)
	if err != nil {
		return fmt.Errorf("manifest %s: read for its replica: %w", m.path, err)
	}
	m.tail.Reset()
	if err := m.replica.Reset(data); err != nil {
		return fmt.Errorf("manifest %s: replica: %w", m.path, err)
	}
	return nil
}
