//go:build !unix && !windows

package fsutil

import "os"

// lockFile does nothing where the platform has no advisory file locks.
func lockFile(*os.File) error { return nil }
