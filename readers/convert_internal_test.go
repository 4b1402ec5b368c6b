package readers

import (
	"strings"
	"testing"
	"time"
)

// TestTimestampLayoutOf: for every form parseTimestamp reads without a layout, the layout its shape
// names is the first of tsLayouts that parses it, so a valid value is parsed once.
func TestTimestampLayoutOf(t *testing.T) {
	for _, s := range []string{
		"2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123456789Z", "2024-01-02T03:04:05.5+01:00",
		"2024-01-02T03:04:05-0800", "2024-01-02T03:04:05,25+0530", "2024-01-02T03:04:05+01", "2024-01-02T03:04:05.1-03",
		"2024-01-02T03:04:05", "2024-01-02T03:04:05.000001", "2024-01-02T03:04", "2024-01-02",
	} {
		first := -1
		for i, l := range tsLayouts {
			if _, err := time.Parse(l, s); err == nil {
				first = i
				break
			}
		}
		if first < 0 {
			t.Fatalf("%q parses with no layout", s)
		}
		if got := tsLayoutOf(s); got != first {
			t.Errorf("tsLayoutOf(%q) = %d; want %d (%s)", s, got, first, tsLayouts[first])
		}
		want, _ := time.Parse(tsLayouts[first], s)
		spaced := s
		if len(s) > 10 {
			spaced = s[:10] + " " + s[11:]
		}
		for _, in := range []string{s, spaced} {
			got, ok, _ := parseTimestamp([]byte(in), "", nil)
			if !ok || !got.Equal(want) {
				t.Errorf("parseTimestamp(%q) = %v, %t; want %v", in, got, ok, want)
			}
		}
	}
	for _, s := range []string{"", "2024-01-02T03:04:05Q", "2024-01-02T03:04:05z", "2024-13-02", "2024-01-02T03:04:05+1", strings.Repeat("9", 25)} {
		if _, ok, _ := parseTimestamp([]byte(s), "", nil); ok {
			t.Errorf("parseTimestamp(%q) ok; want a failure", s)
		}
	}
}
