//go:build !linux

package bench

// resetPeakRSS: the peak RSS of a run is known on Linux only.
func resetPeakRSS() bool { return false }

func peakRSS() (int64, bool) { return 0, false }
