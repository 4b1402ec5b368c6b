package manifest_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loaderproject/loader/manifest"
)

// memReplica records what a manifest hands its replica: the copy it would keep remotely.
type memReplica struct {
	mu      sync.Mutex
	data    []byte
	resets  int
	failing error
}

func (r *memReplica) Append(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing != nil {
		return r.failing
	}
	r.data = append(r.data, b...)
	return nil
}

func (r *memReplica) Reset(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.data = bytes.Clone(b)
	r.resets++
	return nil
}

func (r *memReplica) copy() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.data)
}

// The replica holds, after every Sync, exactly the bytes of the file: concurrent writers and syncs
// included, and a manifest opened from the replica's copy alone has every synced record.
func TestReplicaMirrorsEverySyncedByte(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.jsonl")
	rep := &memReplica{}
	m, err := manifest.Open(path, manifest.WithReplica(rep))
	if err != nil {
		t.Fatal(err)
	}
	if rep.resets != 1 || len(rep.copy()) == 0 {
		t.Fatalf("after Open: %d resets, %d bytes; want the header handed over once", rep.resets, len(rep.copy()))
	}
	f := manifest.FileID{Path: "a.parquet", Size: 10, Schema: "s"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				r := manifest.Range{From: int64(i * 10), To: int64(i*10 + 10)}
				if err := m.Intent(f, g, r); err != nil {
					t.Error(err)
					return
				}
				if err := m.Sync(); err != nil {
					t.Error(err)
					return
				}
				if err := m.Ack(f, g, r); err != nil {
					t.Error(err)
					return
				}
			}
			if err := m.Sync(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.copy(); !bytes.Equal(got, file) {
		t.Fatalf("replica holds %d bytes, the file %d; want the same bytes", len(got), len(file))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Open the replica's copy as a manifest of its own: every ack is there.
	other := filepath.Join(t.TempDir(), "copy.jsonl")
	if err := os.WriteFile(other, rep.copy(), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, err := manifest.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	for g := range 4 {
		if got := m2.Acked(f, g); len(got) != 1 || got[0] != (manifest.Range{From: 0, To: 500}) {
			t.Errorf("unit %d acked %v in the replica's copy; want [0,500)", g, got)
		}
	}
}

// Reset (--force) hands the replica the new, short file; a replica that fails makes Sync fail and
// the manifest refuse further writes, as a failed fsync does.
func TestReplicaResetAndFailure(t *testing.T) {
	rep := &memReplica{}
	m, err := manifest.Open(filepath.Join(t.TempDir(), "m.jsonl"), manifest.WithReplica(rep))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f := manifest.FileID{Path: "a.parquet", Size: 10, Schema: "s"}
	if err := m.Ack(f, 0, manifest.Range{From: 0, To: 5}); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	long := len(rep.copy())
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	if rep.resets != 2 || len(rep.copy()) >= long {
		t.Fatalf("after Reset: %d resets, %d bytes (was %d); want a second, shorter copy", rep.resets, len(rep.copy()), long)
	}
	boom := errors.New("store unreachable")
	rep.mu.Lock()
	rep.failing = boom
	rep.mu.Unlock()
	if err := m.Ack(f, 0, manifest.Range{From: 0, To: 5}); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); !errors.Is(err, boom) {
		t.Fatalf("Sync with a failing replica = %v; want %v", err, boom)
	}
	if err := m.Ack(f, 0, manifest.Range{From: 5, To: 6}); !errors.Is(err, boom) {
		t.Fatalf("Ack after a failed replica = %v; want the sticky %v", err, boom)
	}
}
