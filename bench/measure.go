package bench

import (
	"runtime"
	"runtime/debug"
	"time"
)

// Sample is one timed run.
type Sample struct {
	Seconds    float64 // wall time of the run
	CPUSeconds float64 // user+system CPU time of this process during the run; -1 when unknown
	PeakRSS    int64   // peak resident set of this process during the run, in bytes; -1 when unknown
	// SinkCPUSeconds is the user+system CPU time of the local sink processes during the run (Linux);
	// -1 when unknown or when the run sends to no local sink.
	SinkCPUSeconds float64
	Rows           int64 // rows the run read or sent
	Bytes          int64 // bytes the run sent (frame bytes acknowledged), 0 when it does not say
	// Copies is how many times the run went through the dataset (throttled runs, see
	// Throttle.Run); 0 means once.
	Copies int
}

// times is how many times the run went through the dataset.
func (s Sample) times() float64 { return float64(max(s.Copies, 1)) }

// measure runs fn and times it: wall clock, the process's CPU time (getrusage RUSAGE_SELF, user +
// system, so every goroutine of this process and nothing of the sink subprocesses), and its peak
// RSS. Before the run, the heap is collected and returned to the OS and the kernel's peak RSS
// counter is reset, so the peak is this run's.
func measure(fn func() (rows, bytes int64, err error)) (Sample, error) {
	runtime.GC()
	debug.FreeOSMemory()
	peakOK := resetPeakRSS()
	cpu0, cpuOK := cpuTime()
	start := time.Now()
	rows, bytes, err := fn()
	wall := time.Since(start)
	cpu1, _ := cpuTime()
	s := Sample{Seconds: wall.Seconds(), CPUSeconds: -1, PeakRSS: -1, SinkCPUSeconds: -1, Rows: rows, Bytes: bytes}
	if cpuOK {
		s.CPUSeconds = (cpu1 - cpu0).Seconds()
	}
	if peakOK {
		if p, ok := peakRSS(); ok {
			s.PeakRSS = p
		}
	}
	return s, err
}
