package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// resetPeakRSS resets the kernel's peak RSS counter (VmHWM) of this process to its current RSS by
// writing "5" to /proc/self/clear_refs (Linux 4.0 and later).
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS reads VmHWM, the peak resident set since the last reset, from /proc/self/status.
func peakRSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // "1234", "kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
