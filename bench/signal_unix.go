//go:build unix

package bench

import (
	"os"
	"syscall"
)

// terminate asks the process to shut down gracefully.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
