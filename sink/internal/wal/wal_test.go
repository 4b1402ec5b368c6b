package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/loaderproject/loader/sink/internal/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func payload(i int) []byte {
	return []byte(fmt.Sprintf("record-%06d-%s", i, bytes.Repeat([]byte{byte(i)}, i%97)))
}

// appendAll appends n records (payload(start..start+n-1)) and waits for them all.
func appendAll(t *testing.T, w *wal.WAL, start, n int) []uint64 {
	t.Helper()
	ps := make([]*wal.Pending, n)
	for i := range n {
		p, err := w.Append(t.Context(), payload(start+i))
		if err != nil {
			t.Fatalf("Append(%d) = %v", start+i, err)
		}
		ps[i] = p
	}
	seqs := make([]uint64, n)
	for i, p := range ps {
		if err := p.Err(); err != nil {
			t.Fatalf("record %d: %v", start+i, err)
		}
		seqs[i] = p.Seq()
	}
	return seqs
}

// appendEach appends n records one at a time, each in its own group commit.
func appendEach(t *testing.T, w *wal.WAL, start, n int) {
	t.Helper()
	for i := range n {
		appendAll(t, w, start+i, 1)
	}
}

type rec struct {
	seq     uint64
	payload string
}

func replay(t *testing.T, w *wal.WAL, after, upTo uint64) []rec {
	t.Helper()
	var out []rec
	if err := w.Replay(t.Context(), after, upTo, func(seq uint64, p []byte) error {
		out = append(out, rec{seq, string(p)})
		return nil
	}); err != nil {
		t.Fatalf("Replay(%d, %d) = %v", after, upTo, err)
	}
	return out
}

func mustOpen(t *testing.T, dir string, opts ...wal.Option) *wal.WAL {
	t.Helper()
	w, err := wal.Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s) = %v", dir, err)
	}
	return w
}

func TestAppendReplayConcurrent(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, wal.WithSegmentBytes(8<<10))
	defer w.Close()

	const writers, each = 8, 50
	var mu sync.Mutex
	got := map[uint64]string{}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ps []*wal.Pending
			for i := range each {
				// Two parts: the payload is their concatenation.
				p, err := w.Append(context.Background(), []byte(fmt.Sprintf("g%d-", g)), payload(i))
				if err != nil {
					t.Errorf("Append = %v", err)
					return
				}
				ps = append(ps, p)
			}
			var last uint64
			for i, p := range ps {
				if err := p.Err(); err != nil {
					t.Errorf("Pending.Err = %v", err)
					return
				}
				if p.Seq() <= last {
					t.Errorf("writer %d: seq %d after %d: one writer's records must stay in order", g, p.Seq(), last)
				}
				last = p.Seq()
				mu.Lock()
				got[p.Seq()] = fmt.Sprintf("g%d-%s", g, payload(i))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != writers*each {
		t.Fatalf("%d distinct sequence numbers; want %d", len(got), writers*each)
	}
	if w.LastSeq() != writers*each {
		t.Errorf("LastSeq() = %d; want %d", w.LastSeq(), writers*each)
	}
	recs := replay(t, w, 0, w.LastSeq())
	if len(recs) != writers*each {
		t.Fatalf("Replay returned %d records; want %d", len(recs), writers*each)
	}
	for i, r := range recs {
		if r.seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d; want %d", i, r.seq, i+1)
		}
		if got[r.seq] != r.payload {
			t.Fatalf("record %d payload differs from what was appended", r.seq)
		}
	}
	// A sub-range.
	sub := replay(t, w, 100, 120)
	if len(sub) != 20 || sub[0].seq != 101 || sub[19].seq != 120 {
		t.Errorf("Replay(100, 120) = %d records from %d; want 20 from 101", len(sub), sub[0].seq)
	}
}

func TestReopenContinues(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir)
	appendAll(t, w, 0, 10)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
	if _, err := w.Append(t.Context(), []byte("x")); !errors.Is(err, wal.ErrClosed) {
		t.Errorf("Append after Close = %v; want ErrClosed", err)
	}

	var recovered []uint64
	w = mustOpen(t, dir, wal.WithRecoveredRecord(func(seq uint64, p []byte) { recovered = append(recovered, seq) }))
	defer w.Close()
	if len(recovered) != 10 || recovered[9] != 10 {
		t.Errorf("recovered %v; want 1..10", recovered)
	}
	seqs := appendAll(t, w, 10, 5)
	if seqs[0] != 11 {
		t.Errorf("first seq after reopen = %d; want 11", seqs[0])
	}
	if n := len(replay(t, w, 0, 100)); n != 15 {
		t.Errorf("Replay after reopen = %d records; want 15", n)
	}
}

func TestFloor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing int
		floor    uint64
		want     uint64
	}{
		{"empty log, floor above", 0, 100, 101},
		{"records above the floor", 20, 5, 21},
		{"floor above the records", 20, 50, 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.existing > 0 {
				w := mustOpen(t, dir)
				appendAll(t, w, 0, tc.existing)
				w.Close()
			}
			w := mustOpen(t, dir, wal.WithFloor(tc.floor))
			defer w.Close()
			if got := appendAll(t, w, 0, 1)[0]; got != tc.want {
				t.Errorf("first seq = %d; want %d", got, tc.want)
			}
		})
	}
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	sort.Strings(m)
	return m[len(m)-1]
}

func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(data []byte) []byte
		want   int // intact records after recovery
	}{
		{"truncated payload", func(d []byte) []byte { return d[:len(d)-3] }, 9},
		{"truncated header", func(d []byte) []byte { return append(d, 1, 2, 3, 4, 5) }, 10},
		{"flipped byte in last record", func(d []byte) []byte { d[len(d)-1] ^= 0xff; return d }, 9},
		{"garbage tail", func(d []byte) []byte { return append(d, bytes.Repeat([]byte{0xab}, 100)...) }, 10},
		{"zero-filled tail", func(d []byte) []byte { return append(d, make([]byte, 64)...) }, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := mustOpen(t, dir)
			appendAll(t, w, 0, 10)
			w.Close()
			seg := lastSegment(t, dir)
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seg, tc.damage(data), 0o644); err != nil {
				t.Fatal(err)
			}

			// A reader that does not repair stops quietly at the damage.
			var seen int
			if err := wal.ReadDir(t.Context(), dir, 0, func(uint64, []byte) error { seen++; return nil }); err != nil {
				t.Fatalf("ReadDir = %v", err)
			}
			if seen != tc.want {
				t.Errorf("ReadDir saw %d records; want %d", seen, tc.want)
			}

			w = mustOpen(t, dir)
			defer w.Close()
			if w.LastSeq() != uint64(tc.want) {
				t.Errorf("LastSeq() after recovery = %d; want %d", w.LastSeq(), tc.want)
			}
			seqs := appendAll(t, w, 100, 2)
			if seqs[0] != uint64(tc.want)+1 {
				t.Errorf("next seq = %d; want %d", seqs[0], tc.want+1)
			}
			recs := replay(t, w, 0, 1000)
			if len(recs) != tc.want+2 {
				t.Fatalf("Replay = %d records; want %d", len(recs), tc.want+2)
			}
			for i := range tc.want {
				if recs[i].payload != string(payload(i)) {
					t.Errorf("record %d changed by recovery", i+1)
				}
			}
			if recs[tc.want].payload != string(payload(100)) {
				t.Errorf("record appended after recovery reads back wrong")
			}
		})
	}
}

func TestCorruptionBeforeTail(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, wal.WithSegmentBytes(4<<10))
	appendEach(t, w, 0, 200)
	w.Close()
	m, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	sort.Strings(m)
	if len(m) < 2 {
		t.Fatalf("want several segments, have %d", len(m))
	}
	data, _ := os.ReadFile(m[0])
	data[len(data)/2] ^= 0x55
	os.WriteFile(m[0], data, 0o644)

	_, err := wal.Open(dir)
	if !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open over a damaged early segment = %v; want ErrCorrupt", err)
	}
	if want := filepath.Base(m[0]); !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q does not name segment %s", err, want)
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir)
	if _, err := wal.Open(dir); !errors.Is(err, wal.ErrLocked) {
		t.Errorf("second Open = %v; want ErrLocked", err)
	}
	w.Close()
	w = mustOpen(t, dir)
	w.Close()
}

func TestReleaseDeletesCommittedSegments(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, wal.WithSegmentBytes(4<<10))
	defer w.Close()
	appendEach(t, w, 0, 300)
	before := w.Stats().Segments
	if before < 3 {
		t.Fatalf("%d segments; want at least 3", before)
	}
	if err := w.Release(150); err != nil {
		t.Fatal(err)
	}
	after := w.Stats().Segments
	if after >= before {
		t.Errorf("Release(150) kept %d of %d segments", after, before)
	}
	recs := replay(t, w, 150, 300)
	if len(recs) != 150 || recs[0].seq != 151 {
		t.Fatalf("Replay(150, 300) after Release = %d records; want 150 from 151", len(recs))
	}
	// Everything committed: only the active segment stays.
	if err := w.Release(300); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().Segments; got != 1 {
		t.Errorf("after Release(all) %d segments; want 1 (the active one)", got)
	}
	w.Close()
	// Reopening with the committed floor continues above it even though the records are gone.
	w2 := mustOpen(t, dir, wal.WithFloor(300))
	defer w2.Close()
	if s := appendAll(t, w2, 0, 1)[0]; s <= 300 {
		t.Errorf("seq after release and reopen = %d; want > 300", s)
	}
}

func TestCancelledContext(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir)
	defer w.Close()
	appendAll(t, w, 0, 3)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := w.Append(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Append(cancelled) = %v; want context.Canceled", err)
	}
	if err := w.Replay(ctx, 0, 3, func(uint64, []byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Replay(cancelled) = %v; want context.Canceled", err)
	}
	if err := wal.ReadDir(ctx, dir, 0, func(uint64, []byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadDir(cancelled) = %v; want context.Canceled", err)
	}
}

func TestTooLarge(t *testing.T) {
	w := mustOpen(t, t.TempDir())
	defer w.Close()
	big := make([]byte, wal.MaxRecordBytes/2+1)
	if _, err := w.Append(t.Context(), big, big); !errors.Is(err, wal.ErrTooLarge) {
		t.Errorf("Append(over limit) = %v; want ErrTooLarge", err)
	}
}

func TestReadDirMissing(t *testing.T) {
	n := 0
	if err := wal.ReadDir(t.Context(), filepath.Join(t.TempDir(), "nope"), 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("ReadDir(missing) = %v, %d records; want nil, 0", err, n)
	}
}

func TestReadDirAfter(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, wal.WithSegmentBytes(4<<10))
	defer w.Close()
	appendEach(t, w, 0, 100)
	var seqs []uint64
	if err := wal.ReadDir(t.Context(), dir, 60, func(s uint64, _ []byte) error { seqs = append(seqs, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 40 || seqs[0] != 61 {
		t.Errorf("ReadDir(after 60) = %d records from %v; want 40 from 61", len(seqs), seqs[:1])
	}
}
