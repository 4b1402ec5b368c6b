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

// FuzzFastTimestamp checks that fastTimestamp accepts only texts parseTimestamp reads, with the
// same value.
func FuzzFastTimestamp(f *testing.F) {
	for _, s := range []string{
		"2024-01-02T03:04:05Z", "2024-01-02 03:04:05.123456789+01:00", "0000-01-01T00:00:00-23:59",
		"9999-12-31T23:59:59.999999999Z", "2024-02-29T00:00:00", "2023-02-29T00:00:00", "1969-12-31T23:59:59.9999995Z",
		"2024-01-02T03:04:05.", "2024-01-02T03:04:05.1234567890Z", "2024-01-02T24:00:00Z", "2024-01-02T03:04:05-00:00",
		"1900-03-01T00:00:00+14:00", "2000-02-29T12:00:00.5", "2024-13-01T00:00:00Z", "2024-01-02T03:04:05+0100",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		us, ok := fastTimestamp(b)
		if !ok {
			return
		}
		tm, slowOK, _ := parseTimestamp(b, "", nil)
		if !slowOK {
			t.Fatalf("fastTimestamp(%q) = %d; parseTimestamp refuses it", b, us)
		}
		want, _ := timeMicros(tm)
		if us != want {
			t.Fatalf("fastTimestamp(%q) = %d; want %d (%s)", b, us, want, tm)
		}
	})
}

func TestFastTimestamp(t *testing.T) {
	for _, s := range []string{"2024-01-02T03:04:05Z", "2024-01-02 03:04:05.123456789+01:00", "2024-01-02T03:04:05", "2024-01-02T03:04:05.5-07:00"} {
		if _, ok := fastTimestamp([]byte(s)); !ok {
			t.Errorf("fastTimestamp(%q) declines; want it read", s)
		}
	}
	for _, s := range []string{"2024-01-02", "2024-01-02T03:04", "2024-01-02T03:04:05+0100", "2024-01-02T03:04:05.1234567890Z", "2023-02-29T00:00:00Z"} {
		if _, ok := fastTimestamp([]byte(s)); ok {
			t.Errorf("fastTimestamp(%q) reads it; want it left to parseTimestamp", s)
		}
	}
}
