//go:build !linux

package bench

import (
	"os/exec"
	"time"
)

// setDeathSignal: only Linux can tie a child's life to its parent's.
func setDeathSignal(*exec.Cmd) {}

// procCPUTime: another process's CPU time is read from /proc on Linux only.
func procCPUTime(int) (time.Duration, bool) { return 0, false }
