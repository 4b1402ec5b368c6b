//go:build !unix

package wal

import "os"

// lockDir opens the lock file. Platforms without flock get no cross-process protection.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}

func unlock(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close()
}
