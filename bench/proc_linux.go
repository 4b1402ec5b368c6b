package bench

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the sink if this process dies first (so even a crashed bench
// leaves no sink behind). The signal follows the thread that started the child; Go does not end its
// threads while the process runs, save for locked ones, and exec does not lock.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
