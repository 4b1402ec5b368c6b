package load

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/readers"
)

// foundFiles is the files a run takes, handed to it as discovery finds them. Below an object-store
// prefix the listing streams: the load starts after the first list request, holding one page of the
// listing at a time, and a prefix of a million objects never sits in memory whole. Local sources, and
// shard plans (which check the whole listing against the plan), are listed in full first, so their
// errors still come before anything is loaded.
type foundFiles struct {
	files    chan readers.File // closed when discovery ends; then err is set
	err      error
	cancel   context.CancelFunc
	done     chan struct{}
	progress *Progress // its FilesTotal counts the files found; Listed says the listing ended
	// first is the first file discovered, whichever shard takes it: the table may be created like it.
	first readers.File
}

// streamingBuffer is how many discovered files may wait for the decoders.
const streamingBuffer = 256

// findFiles starts discovering cfg's sources and returns once the first file is known (or discovery
// failed before finding one). Close stops discovery; next hands the files over in order.
func findFiles(ctx context.Context, cfg *Config) (*foundFiles, error) {
	dctx, cancel := context.WithCancel(ctx)
	ff := &foundFiles{files: make(chan readers.File, streamingBuffer), cancel: cancel, done: make(chan struct{}),
		progress: cfg.Progress}
	fsel, perFile := cfg.Select.(FileSelector)
	if cfg.Select == nil || perFile {
		if slices.ContainsFunc(cfg.Sources, objstore.IsURL) {
			return ff, ff.stream(dctx, cfg, fsel)
		}
	}
	all, err := discover(dctx, cfg)
	if err == nil {
		var files []readers.File
		if files, err = selectShard(cfg, all); err == nil {
			ff.first = all[0]
			ff.progress.FilesTotal.Store(int64(len(files)))
			ff.progress.Listed.Store(true)
			go ff.feed(dctx, files)
			return ff, nil
		}
	}
	cancel()
	close(ff.done)
	return nil, err
}

// stream lists the sources on a goroutine, handing each file the shard takes (all, without one) to
// next, and waits for the first file found.
func (ff *foundFiles) stream(ctx context.Context, cfg *Config, sel FileSelector) error {
	ff.progress.FilesTotal.Store(0)
	ff.progress.Listed.Store(false)
	firstFound := make(chan struct{})
	var (
		once  sync.Once
		found bool
	)
	go func() {
		defer close(ff.done)
		defer once.Do(func() { close(firstFound) })
		err := readers.DiscoverFunc(ctx, cfg.Sources, func(f readers.File) error {
			once.Do(func() {
				ff.first, found = f, true
				close(firstFound)
			})
			if sel != nil && !sel.Takes(f) {
				return nil
			}
			if err := ff.put(ctx, f); err != nil {
				return err
			}
			ff.progress.FilesTotal.Add(1)
			return nil
		}, discoverOptions(cfg)...)
		ff.err = err
		ff.progress.Listed.Store(true)
		close(ff.files)
	}()
	<-firstFound
	if !found { // discovery ended before finding a file
		<-ff.done
		ff.cancel()
		return ff.err
	}
	return nil
}

// feed hands over files listed in full.
func (ff *foundFiles) feed(ctx context.Context, files []readers.File) {
	defer close(ff.done)
	for _, f := range files {
		if err := ff.put(ctx, f); err != nil {
			ff.err = err
			break
		}
	}
	close(ff.files)
}

func (ff *foundFiles) put(ctx context.Context, f readers.File) error {
	select {
	case ff.files <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next returns the next file, or ok false when discovery has ended (err then says whether it
// failed) or ctx ended.
func (ff *foundFiles) next(ctx context.Context) (f readers.File, ok bool, err error) {
	select {
	case f, ok := <-ff.files:
		if !ok {
			return readers.File{}, false, ff.err
		}
		return f, true, nil
	case <-ctx.Done():
		return readers.File{}, false, nil
	}
}

// listing reports whether discovery may still find files.
func (ff *foundFiles) listing() bool {
	select {
	case <-ff.done:
		return false
	default:
		return true
	}
}

// Close stops discovery and waits for it to end.
func (ff *foundFiles) Close() {
	ff.cancel()
	<-ff.done
}

// fileState is one file of a run: what it is, its identity in the manifest once opened, and its rows
// acknowledged. The wire's callbacks find it by the frame's file index until its last frame is
// acknowledged; then the table lets it go, so a run over a million files holds the state of the files
// in flight, not of every file.
type fileState struct {
	file readers.File
	id   manifest.FileID // set when the file is opened, before any of its frames is made
	key  string          // the unit id prefix, set with id
	rows atomic.Int64    // rows acknowledged
	refs atomic.Int64    // the file's run, plus its frames not yet acknowledged
}

// fileTable holds the states of a run's files by index, in discovery order.
type fileTable struct {
	mu    sync.RWMutex
	files []*fileState // nil once let go
}

// add appends a file and returns its index and state, referenced once (by the file's run).
func (t *fileTable) add(f readers.File) (int, *fileState) {
	st := &fileState{file: f}
	st.refs.Store(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.files = append(t.files, st)
	return len(t.files) - 1, st
}

// get returns file i's state; it must be referenced (the caller holds a frame of it or runs it).
func (t *fileTable) get(i int) *fileState {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.files[i]
}

// unref drops one reference to file i and lets the state go after the last.
func (t *fileTable) unref(i int, st *fileState) {
	if st.refs.Add(-1) > 0 {
		return
	}
	t.mu.Lock()
	t.files[i] = nil
	t.mu.Unlock()
}
