package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag value holding a byte count written as "2MiB", "256MB", "1g" or "4096".
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

func (s *byteSize) Set(v string) error {
	t := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 || n*float64(mult) > 1<<62 {
		return fmt.Errorf("%q is not a positive size such as 2MiB, 256MB or 4096", v)
	}
	*s = byteSize(n * float64(mult))
	return nil
}

func (s *byteSize) String() string { return humanBytes(int64(*s)) }
func (s *byteSize) Type() string   { return "size" }

// byteRate is a flag value holding bytes per second, written as a size with an optional "/s":
// "25MB/s", "100MiB", "1g/s". Its zero value means no limit.
type byteRate int64

func (r *byteRate) Set(v string) error {
	var s byteSize
	t := strings.TrimSpace(v)
	if err := s.Set(strings.TrimSuffix(strings.TrimSuffix(t, "/s"), "/S")); err != nil {
		return fmt.Errorf("%q is not a positive rate such as 25MB/s or 100MiB/s", v)
	}
	*r = byteRate(s)
	return nil
}

func (r *byteRate) String() string {
	if *r == 0 {
		return ""
	}
	return humanBytes(int64(*r)) + "/s"
}
func (r *byteRate) Type() string { return "rate" }

// humanBytes renders n in binary units with one decimal: "2.0 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
