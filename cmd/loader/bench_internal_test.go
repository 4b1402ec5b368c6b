package main

import (
	"strings"
	"testing"
	"time"
)

func TestIntListSet(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{"1,2,4,8,16", "1,2,4,8,16", ""},
		{" 4 , 8 ", "4,8", ""},
		{"3", "3", ""},
		{"1,2,x", "", `"x"`},
		{"0", "", `"0"`},
		{"1,,2", "", `""`},
		{"257", "", `"257"`},
		{"-1", "", `"-1"`},
	}
	for _, tt := range tests {
		var l intList
		err := l.Set(tt.in)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("intList.Set(%q) = %v; want %s", tt.in, err, tt.want)
		case tt.wantErr == "" && l.String() != tt.want:
			t.Errorf("intList.Set(%q) = %s; want %s", tt.in, l.String(), tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("intList.Set(%q) = %v; want an error naming %s", tt.in, err, tt.wantErr)
		}
	}
}

func TestThrottleFlagSet(t *testing.T) {
	tests := []struct {
		in      string
		rate    int64
		latency time.Duration
		wantErr string
	}{
		{"25MB,150ms", 25e6, 150 * time.Millisecond, ""},
		{"2MiB, 1s", 2 << 20, time.Second, ""},
		{"25MB/s,150ms", 25e6, 150 * time.Millisecond, ""},
		{"1000,0s", 1000, 0, ""},
		{"25MB", 0, 0, "RATE,LATENCY"},
		{"fast,150ms", 0, 0, `rate "fast"`},
		{"0,150ms", 0, 0, `rate "0"`},
		{"25MB,soon", 0, 0, `latency "soon"`},
		{"25MB,-1s", 0, 0, `latency "-1s"`},
	}
	for _, tt := range tests {
		var f throttleFlag
		err := f.Set(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || f.set {
				t.Errorf("throttleFlag.Set(%q) = %v (set %v); want an error naming %s", tt.in, err, f.set, tt.wantErr)
			}
			continue
		}
		if err != nil || !f.set || int64(f.rate) != tt.rate || f.latency != tt.latency {
			t.Errorf("throttleFlag.Set(%q) = rate %d, latency %s, %v; want %d, %s", tt.in, f.rate, f.latency, err, tt.rate, tt.latency)
		}
	}
}
