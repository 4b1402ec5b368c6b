package wal

import (
	"context"
	"testing"
)

// TestGroupCommit holds the writer inside its first group while 50 more records queue, so they
// must all land in the next group: 51 records, at most 2 writes and fsyncs.
func TestGroupCommit(t *testing.T) {
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.mu.Lock() // the writer takes mu at the start of every group
	var ps []*Pending
	for i := range 51 {
		p, err := w.Append(context.Background(), []byte{byte(i)})
		if err != nil {
			w.mu.Unlock()
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	w.mu.Unlock()
	for _, p := range ps {
		if err := p.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if g := w.Stats().Groups; g > 2 {
		t.Errorf("51 queued records took %d group commits; want at most 2", g)
	}
}
