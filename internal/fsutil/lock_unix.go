//go:build unix

package fsutil

import (
	"errors"
	"os"
	"syscall"
)

func lockFile(f *os.File) error {
	return retryEINTR(func() error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) })
}

// retryEINTR calls flock until a signal does not interrupt it, and maps "would block" to ErrLocked.
func retryEINTR(flock func() error) error {
	for {
		err := flock()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		default:
			return err
		}
	}
}
