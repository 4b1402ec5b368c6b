package bench

import (
	"os"
	"testing"
	"time"
)

// TestProcCPUTime checks that utime and stime are read from /proc/PID/stat, also when the command
// name holds spaces and parentheses, and that this process's CPU time is read and grows with work.
func TestProcCPUTime(t *testing.T) {
	stat := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 0 0\n"
	if got, ok := parseProcStatCPU([]byte(stat)); !ok || got != 3250*time.Millisecond {
		t.Errorf("parseProcStatCPU = %v, %v; want 3.25s (250 + 75 ticks)", got, ok)
	}
	for _, bad := range []string{"", "4242 (cmd S 1", "4242 (cmd) S 1 2 3", "4242 (cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 x 75 0"} {
		if _, ok := parseProcStatCPU([]byte(bad)); ok {
			t.Errorf("parseProcStatCPU(%q) succeeded; want it to fail", bad)
		}
	}
	before, ok := procCPUTime(os.Getpid())
	if !ok {
		t.Fatal("procCPUTime(this process) failed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for x := 0; ; x++ { // burn CPU until the kernel has counted some more ticks
		if now, _ := procCPUTime(os.Getpid()); now > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("procCPUTime did not grow from %v in 5 s of work", before)
		}
		_ = x * x
	}
}
