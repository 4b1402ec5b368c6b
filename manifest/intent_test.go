package manifest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderproject/loader/manifest"
)

// TestIntentsPendingAndDuplicates: intents not covered by acknowledgements are pending across a
// reopen; duplicates are counted (overlaps each time) until reported; all of it survives a compaction.
func TestIntentsPendingAndDuplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	m, err := manifest.Open(path, manifest.WithLabel("zerobus:grpc://x", "main.s.t"))
	must(t, err)
	must(t, m.Intent(fileA, 0, manifest.Range{From: 0, To: 100}))
	must(t, m.Intent(fileA, 0, manifest.Range{From: 100, To: 200}))
	must(t, m.Ack(fileA, 0, manifest.Range{From: 0, To: 50}))
	must(t, m.Ack(fileA, 0, manifest.Range{From: 120, To: 150}))
	must(t, m.Duplicate(fileA, 0, manifest.Range{From: 10, To: 20}))
	must(t, m.Duplicate(fileA, 0, manifest.Range{From: 10, To: 20})) // sent a third time
	must(t, m.Failed(fileA, "bad row 7"))
	must(t, m.Close())

	check := func(m *manifest.Manifest, what string) {
		t.Helper()
		want := []manifest.Range{{50, 120}, {150, 200}}
		if got := m.Pending(fileA, 0); !slices.Equal(got, want) {
			t.Errorf("%s: Pending() = %v; want %v", what, got, want)
		}
		if got := m.Unreported(); got != 20 {
			t.Errorf("%s: Unreported() = %d; want 20", what, got)
		}
	}
	m = open(t, path)
	check(m, "reopened")
	st := m.Status()
	if len(st) != 1 || st[0].Failed != "bad row 7" || len(st[0].Units) != 1 || !slices.Equal(st[0].Units[0].Duplicated, []manifest.Range{{10, 20}}) {
		t.Errorf("Status() = %+v", st)
	}
	must(t, m.Reported(15))
	if got := m.Unreported(); got != 5 {
		t.Errorf("Unreported() after Reported(15) = %d; want 5", got)
	}
	// Finishing a unit clears the failure.
	must(t, m.UnitRows(fileA, 0, 200))
	must(t, m.Close())

	info, err := manifest.Inspect(path)
	must(t, err)
	if info.Target != "zerobus:grpc://x" || info.Table != "main.s.t" || info.PossiblyDuplicatedRows != 20 || len(info.Files) != 1 || info.Files[0].Failed != "" {
		t.Errorf("Inspect() = %+v", info)
	}
	if u := info.Files[0].Units[0]; u.Rows != 200 || u.Done {
		t.Errorf("unit = %+v; want 200 rows, not done", u)
	}
}

// TestResetStartsANewEpoch: --force forgets the history and bumps the epoch, durably.
func TestResetStartsANewEpoch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	m := open(t, path)
	if m.Epoch() != 0 {
		t.Errorf("new manifest epoch %d; want 0", m.Epoch())
	}
	must(t, m.Duplicate(fileA, 0, manifest.Range{From: 0, To: 5}))
	must(t, m.Reset())
	must(t, m.Reset())
	must(t, m.Close())
	m = open(t, path)
	defer m.Close()
	if m.Epoch() != 2 || m.Unreported() != 0 || len(m.Status()) != 0 {
		t.Errorf("after two resets: epoch %d, unreported %d, %d files; want 2, 0, 0", m.Epoch(), m.Unreported(), len(m.Status()))
	}
}

// TestFormat1IsUpgraded: a format 1 manifest is read, rewritten as format 2, and its files match a
// FileID with a layout.
func TestFormat1IsUpgraded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	v1 := `{"manifest":1}` + "\n" +
		`{"file":0,"path":"data/a.parquet","size":1000,"mtime_ns":1700000000000000000,"schema":"s1"}` + "\n" +
		`{"f":0,"u":0,"rows":10}` + "\n" + `{"f":0,"u":0,"from":0,"to":10}` + "\n"
	must(t, os.WriteFile(path, []byte(v1), 0o644))
	m := open(t, path)
	withLayout := fileA
	withLayout.Layout = "abc"
	if !m.UnitDone(withLayout, 0) {
		t.Error("a format 1 file does not match the same file with a layout")
	}
	must(t, m.Close())
	b, err := os.ReadFile(path)
	must(t, err)
	if !strings.HasPrefix(string(b), `{"manifest":2,`) {
		t.Errorf("manifest not rewritten as format 2:\n%s", b)
	}
	other := fileA
	other.Layout = "xyz"
	m = open(t, path)
	defer m.Close()
	must(t, m.Ack(other, 1, manifest.Range{From: 0, To: 1}))
	if got := m.Acked(fileA, 1); got == nil {
		t.Error("records of a layout-less file went elsewhere")
	}
}

// TestLayoutSeparatesFiles: the same file split differently is another file.
func TestLayoutSeparatesFiles(t *testing.T) {
	m := open(t, filepath.Join(t.TempDir(), "m.jsonl"))
	defer m.Close()
	a, b := fileA, fileA
	a.Layout, b.Layout = "one", "two"
	must(t, m.UnitRows(a, 0, 5))
	must(t, m.Ack(a, 0, manifest.Range{From: 0, To: 5}))
	if m.UnitDone(b, 0) {
		t.Error("a unit done under one layout is done under another")
	}
}

// TestFinishedUnit: a finished unit (kept in a smaller form) answers as before, writes nothing for
// records it holds already, still rejects contradictions, and still takes later duplicates and intents.
func TestFinishedUnit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	m := open(t, path)
	must(t, m.Intent(fileA, 0, manifest.Range{From: 0, To: 10}))
	must(t, m.UnitRows(fileA, 0, 10))
	must(t, m.Ack(fileA, 0, manifest.Range{From: 0, To: 10}))
	must(t, m.Sync())
	size := fileSize(t, path)
	must(t, m.Ack(fileA, 0, manifest.Range{From: 0, To: 10}))
	must(t, m.Ack(fileA, 0, manifest.Range{From: 2, To: 5}))
	must(t, m.Intent(fileA, 0, manifest.Range{From: 0, To: 10}))
	must(t, m.Intent(fileA, 0, manifest.Range{From: 3, To: 4}))
	must(t, m.UnitRows(fileA, 0, 10))
	must(t, m.Sync())
	if got := fileSize(t, path); got != size {
		t.Errorf("records the manifest held already grew the file from %d to %d bytes", size, got)
	}
	if err := m.Ack(fileA, 0, manifest.Range{From: 5, To: 11}); err == nil {
		t.Error("Ack(past the rows) = nil; want an error")
	}
	if err := m.UnitRows(fileA, 0, 11); err == nil {
		t.Error("UnitRows(another count) = nil; want an error")
	}

	check := func(m *manifest.Manifest, what string, want manifest.UnitStatus) {
		t.Helper()
		if got := m.Acked(fileA, 0); !slices.Equal(got, want.Acked) {
			t.Errorf("%s: Acked() = %v; want %v", what, got, want.Acked)
		}
		if got := m.Pending(fileA, 0); !slices.Equal(got, want.Pending) {
			t.Errorf("%s: Pending() = %v; want %v", what, got, want.Pending)
		}
		if n, ok := m.UnitRowCount(fileA, 0); n != want.Rows || !ok || !m.UnitDone(fileA, 0) {
			t.Errorf("%s: UnitRowCount() = %d, %t, UnitDone() = %t; want %d, true, true", what, n, ok, m.UnitDone(fileA, 0), want.Rows)
		}
		st := m.Status()
		if len(st) != 1 || len(st[0].Units) != 1 {
			t.Fatalf("%s: Status() = %+v; want one file of one unit", what, st)
		}
		got := st[0].Units[0]
		if got.Unit != 0 || got.Rows != want.Rows || !got.Done || !slices.Equal(got.Acked, want.Acked) ||
			!slices.Equal(got.Pending, want.Pending) || !slices.Equal(got.Duplicated, want.Duplicated) {
			t.Errorf("%s: Status() unit = %+v; want %+v", what, got, want)
		}
	}
	finished := manifest.UnitStatus{Rows: 10, Acked: []manifest.Range{{0, 10}}, Done: true}
	check(m, "recorded", finished)
	must(t, m.Close())
	m = open(t, path)
	check(m, "reopened", finished)

	must(t, m.Duplicate(fileA, 0, manifest.Range{From: 0, To: 4}))
	must(t, m.Intent(fileA, 0, manifest.Range{From: 10, To: 12}))
	later := finished
	later.Pending, later.Duplicated = []manifest.Range{{10, 12}}, []manifest.Range{{0, 4}}
	check(m, "after a duplicate and an intent", later)
	must(t, m.Close())
	m = open(t, path)
	defer m.Close()
	check(m, "reopened after a duplicate and an intent", later)
}
