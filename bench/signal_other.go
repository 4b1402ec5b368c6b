//go:build !unix

package bench

import "os"

// terminate: without SIGTERM, the process is killed.
func terminate(p *os.Process) error { return p.Kill() }
