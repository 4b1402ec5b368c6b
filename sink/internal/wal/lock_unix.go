//go:build unix

package wal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir opens path and takes an exclusive, non-blocking flock on it.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s is held; is another sink serving this warehouse?)", ErrLocked, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func unlock(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close() // closing the descriptor drops the flock
}
