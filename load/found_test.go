package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/readers"
)

// objectsBeyondBuffer puts more small CSV objects under s3://data/many/ than findFiles buffers, so a
// listing nobody consumes cannot end.
func objectsBeyondBuffer(t *testing.T) (*objstore.Store, []string) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "data")
	var keys []string
	for i := range streamingBuffer + 60 {
		key := fmt.Sprintf("many/part-%04d.csv", i)
		srv.Put(t, "data", key, fmt.Appendf(nil, "id\n%d\n", i))
		keys = append(keys, "s3://data/"+key)
	}
	st := objstore.New()
	t.Cleanup(func() { _ = st.Close() })
	return st, keys
}

func TestObjectListingStreamsIntoTheLoad(t *testing.T) {
	st, keys := objectsBeyondBuffer(t)
	for _, tc := range []struct {
		name string
		sel  Selector
	}{
		{"all files", nil},
		{"hash shard 1 of 3", HashSelector{Index: 1, Count: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Sources: []string{"s3://data/many/"}, Objects: st, Select: tc.sel,
				Logger: slog.New(slog.DiscardHandler), Progress: &Progress{}}
			ff, err := findFiles(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ff.Close()
			if ff.first.Path != keys[0] {
				t.Errorf("first file %q; want %q, whichever shard takes it", ff.first.Path, keys[0])
			}
			// Nothing has been taken: the listing waits on the full buffer instead of running ahead
			// (with a shard, a third of the files fit in the buffer, so the listing may end).
			if tc.sel == nil && (!ff.listing() || cfg.Progress.Listed.Load()) {
				t.Fatalf("the listing of %d objects ended before any was loaded; want it to stream", len(keys))
			}
			if n := cfg.Progress.FilesTotal.Load(); n > streamingBuffer {
				t.Errorf("%d files counted as found while the buffer holds %d", n, streamingBuffer)
			}
			all, err := discover(context.Background(), cfg) // the listing in full, for comparison
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i, f := range all {
				if f.Path != keys[i] {
					t.Fatalf("file %d listed as %q; want %q", i, f.Path, keys[i])
				}
				if tc.sel == nil || tc.sel.(FileSelector).Takes(f) {
					want = append(want, f.Path)
				}
			}
			if tc.sel != nil && (len(want) == 0 || len(want) == len(all)) {
				t.Fatalf("shard takes %d of %d files: the test needs a proper subset", len(want), len(all))
			}
			var got []string
			for {
				f, ok, err := ff.next(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, f.Path)
			}
			if !slices.Equal(got, want) {
				t.Errorf("streamed %d files, want %d in lexical order:\n got %v\nwant %v", len(got), len(want), got, want)
			}
			if !cfg.Progress.Listed.Load() || cfg.Progress.FilesTotal.Load() != int64(len(want)) {
				t.Errorf("after the listing: listed %v, files total %d; want true, %d",
					cfg.Progress.Listed.Load(), cfg.Progress.FilesTotal.Load(), len(want))
			}
		})
	}
}

// A listing abandoned part way (the load stopping) ends its goroutine; goleak checks.
func TestAbandonedListingStops(t *testing.T) {
	st, _ := objectsBeyondBuffer(t)
	cfg := &Config{Sources: []string{"s3://data/many/"}, Objects: st,
		Logger: slog.New(slog.DiscardHandler), Progress: &Progress{}}
	ff, err := findFiles(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ff.next(context.Background()); !ok || err != nil {
		t.Fatalf("next: %v %v", ok, err)
	}
	ff.Close()
	if ff.listing() {
		t.Error("Close returned with the listing still running")
	}
}

// A source that matches nothing, listed first, fails before the load starts, as for local files.
func TestEmptyPrefixFailsBeforeTheLoad(t *testing.T) {
	st, _ := objectsBeyondBuffer(t)
	cfg := &Config{Sources: []string{"s3://data/none/"}, Objects: st,
		Logger: slog.New(slog.DiscardHandler), Progress: &Progress{}}
	_, err := findFiles(context.Background(), cfg)
	if !errors.Is(err, readers.ErrNoFiles) {
		t.Fatalf("findFiles of an empty prefix: %v; want ErrNoFiles", err)
	}
}
