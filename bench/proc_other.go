//go:build !linux

package bench

import "os/exec"

// setDeathSignal: only Linux can tie a child's life to its parent's.
func setDeathSignal(*exec.Cmd) {}
