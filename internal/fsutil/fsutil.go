// Package fsutil holds the file-system steps durable state needs, once: fsyncing a directory so the
// entries created or renamed in it survive a crash, creating a directory tree durably, and an
// exclusive advisory lock that tells "held by someone else" apart from other failures.
//
// Used by the manifest, the Delta log and warehouse, and the sink's write-ahead log and rejected
// records. Its functions are safe for concurrent use; errors name the path.
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// SyncDir fsyncs the directory dir, so that the entries created, renamed or removed in it are
// durable. Windows cannot fsync a directory (its entries are durable with the files' metadata), so
// there it does nothing.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return d.Close()
}

// MkdirAllSync creates dir (mode 0755) and its missing parents, fsyncing each directory it creates
// and the parent it was created in, so the new tree survives a crash. An existing dir is left as it
// is; a path component that exists but is not a directory is an error.
func MkdirAllSync(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("create directory %s: %s is not a directory", dir, d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("create directory %s: %w", dir, err)
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create directory %s: %w", dir, err)
		}
		if err := SyncDir(d); err != nil {
			return err
		}
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// ErrLocked means another process, or another Lock in this one, holds the lock.
var ErrLocked = errors.New("the lock is held by someone else")

// Lock opens (creating, mode 0644) the file at path and takes an exclusive, non-blocking lock on
// it: flock(2) on Unix (retried when a signal interrupts it), LockFileEx on Windows; elsewhere the
// file is only opened, with no protection across processes. It fails with an error wrapping
// ErrLocked when the lock is held. Closing the returned file releases the lock; so does the
// process's end.
func Lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
