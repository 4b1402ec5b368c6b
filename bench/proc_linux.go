package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// setDeathSignal has the kernel kill the sink if this process dies first (so even a crashed bench
// leaves no sink behind). The signal follows the thread that started the child; Go does not end its
// threads while the process runs, save for locked ones, and exec does not lock.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// procCPUTime is the user+system CPU time process pid has used so far, from /proc/PID/stat
// (fields 14 and 15, in clock ticks of 1/100 s: USER_HZ is 100 on every Linux ABI).
func procCPUTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU reads utime and stime from the text of /proc/PID/stat. The command name (field 2)
// is in parentheses and may hold spaces, so fields are counted after its closing parenthesis.
func parseProcStatCPU(stat []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3 (state), so utime (14) is f[11], stime (15) f[12]
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || u < 0 || s < 0 {
		return 0, false
	}
	return time.Duration(u+s) * (time.Second / 100), true
}
