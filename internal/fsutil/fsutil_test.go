package fsutil_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/loaderproject/loader/internal/fsutil"
)

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := fsutil.SyncDir(dir); err != nil {
		t.Errorf("SyncDir(%s) = %v", dir, err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	missing := filepath.Join(dir, "missing")
	if err := fsutil.SyncDir(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("SyncDir(missing) = %v; want fs.ErrNotExist naming it", err)
	}
}

func TestMkdirAllSync(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := fsutil.MkdirAllSync(deep); err != nil {
		t.Fatalf("MkdirAllSync(%s) = %v", deep, err)
	}
	if fi, err := os.Stat(deep); err != nil || !fi.IsDir() {
		t.Fatalf("after MkdirAllSync, Stat(%s) = %v, %v; want a directory", deep, fi, err)
	}
	if err := fsutil.MkdirAllSync(deep + string(filepath.Separator)); err != nil {
		t.Errorf("MkdirAllSync(existing) = %v; want nil", err)
	}
	file := filepath.Join(root, "a", "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsutil.MkdirAllSync(filepath.Join(file, "x")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("MkdirAllSync(under a file) = %v; want it to say a component is not a directory", err)
	}
}

// TestMkdirAllSyncConcurrent: creators racing for the same tree all succeed.
func TestMkdirAllSyncConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x", "y", "z")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = fsutil.MkdirAllSync(dir) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("MkdirAllSync #%d = %v", i, err)
		}
	}
}

func TestLock(t *testing.T) {
	if runtime.GOOS != "windows" && !unixLike() {
		t.Skip("no advisory locks on", runtime.GOOS)
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	f, err := fsutil.Lock(path)
	if err != nil {
		t.Fatalf("Lock(%s) = %v", path, err)
	}
	// flock and LockFileEx locks belong to the open file, so a second Lock in this process is
	// refused as another process's would be.
	if g, err := fsutil.Lock(path); !errors.Is(err, fsutil.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("second Lock = %v; want ErrLocked naming the path", err)
		if g != nil {
			g.Close()
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := fsutil.Lock(path)
	if err != nil {
		t.Fatalf("Lock after the holder closed = %v", err)
	}
	g.Close()
	if _, err := fsutil.Lock(filepath.Join(path, "under-a-file")); err == nil || errors.Is(err, fsutil.ErrLocked) {
		t.Errorf("Lock(a path that cannot be opened) = %v; want an error other than ErrLocked", err)
	}
}

func unixLike() bool {
	switch runtime.GOOS {
	case "aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "linux", "netbsd", "openbsd", "solaris":
		return true
	}
	return false
}
