package manifest_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/loaderproject/loader/manifest"
)

// heapFiles is how many files TestHeapPerFile records: an object-store prefix's worth, enough for the
// map's growth steps to average out.
const heapFiles = 100_000

// objectID is the FileID the loader makes for the i-th object of a prefix: a 100-byte URL (the
// bucket, then a name of its own), an S3 ETag, the schema fingerprint every file shares (a string of
// its own per file, as the loader computes it per file) and a layout of its own (the files differ
// in size).
func objectID(i int, schema string) manifest.FileID {
	const bucket = "s3://bucket/"
	name := fmt.Sprintf("-%07d.parquet", i)
	return manifest.FileID{
		Path:   bucket + strings.Repeat("p", 100-len(bucket)-len(name)) + name,
		Size:   1<<20 + int64(i),
		ETag:   fmt.Sprintf(`"%032x"`, uint64(i)*0x9e3779b97f4a7c15),
		Schema: strings.Clone(schema),
		Layout: fmt.Sprintf("%016x", uint64(i)*0xbf58476d1ce4e5b9),
	}
}

// loadObject makes the calls the loader makes for a file of one unit (load/run.go): is the unit done,
// what is acknowledged or pending, the intent before sending, the row count once read, the ack.
func loadObject(t *testing.T, m *manifest.Manifest, id manifest.FileID, rows int64) {
	t.Helper()
	if m.UnitDone(id, 0) || m.Acked(id, 0) != nil || m.Pending(id, 0) != nil {
		t.Fatalf("%s: history before it was loaded", id.Path)
	}
	must(t, m.Intent(id, 0, manifest.Range{From: 0, To: rows}))
	must(t, m.UnitRows(id, 0, rows))
	must(t, m.Ack(id, 0, manifest.Range{From: 0, To: rows}))
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestHeapPerFile measures the heap a manifest keeps per finished file (issue 11: a million-object
// prefix must load in bounded memory), as the loader records the files and after a reopen replays
// them. The bounds are about twice what was measured, to catch a regression, not a few bytes.
func TestHeapPerFile(t *testing.T) {
	if testing.Short() {
		t.Skip("records 100,000 files")
	}
	const (
		rows      = 4096
		wantFresh = 500 // bytes per file; measured 251 (670 with a map per file's units and an 80-byte map key)
		wantOpen  = 500 // measured 252 (671)
	)
	schema := "9f2c4be01d7a3e55"
	path := filepath.Join(t.TempDir(), "m.jsonl")
	m := open(t, path)
	base := heapAlloc()
	for i := range heapFiles {
		loadObject(t, m, objectID(i, schema), rows)
		if i%1000 == 999 {
			must(t, m.Sync())
		}
	}
	must(t, m.Sync())
	fresh := float64(heapAlloc()-base) / heapFiles
	runtime.KeepAlive(m)
	must(t, m.Close())

	base = heapAlloc()
	m = open(t, path)
	defer m.Close()
	reopened := float64(heapAlloc()-base) / heapFiles
	for _, i := range []int{0, heapFiles / 2, heapFiles - 1} {
		if id := objectID(i, schema); !m.UnitDone(id, 0) {
			t.Errorf("UnitDone(%s) = false after reopen; want true", id.Path)
		}
	}
	t.Logf("heap per file with %d-byte keys: %.0f B recorded, %.0f B replayed", len(objectID(0, schema).Path), fresh, reopened)
	if fresh > wantFresh || reopened > wantOpen {
		t.Errorf("heap per file: %.0f B recorded, %.0f B replayed; want at most %d and %d", fresh, reopened, wantFresh, wantOpen)
	}
}
