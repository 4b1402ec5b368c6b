package bench

import (
	"math"
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want spread
	}{
		{"one", []float64{4}, spread{4, 4, 4}},
		{"odd", []float64{9, 1, 5}, spread{1, 5, 9}},
		{"even: the mean of the middle two", []float64{8, 2, 4, 6}, spread{2, 5, 8}},
		{"repeated", []float64{3, 3, 1}, spread{1, 3, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.in...)
			if got := spreadOf(tt.in); got != tt.want {
				t.Errorf("spreadOf(%v) = %+v; want %+v", tt.in, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.in[i] {
					t.Fatalf("spreadOf reordered its input: %v, was %v", tt.in, in)
				}
			}
		})
	}
	if got := spreadOf(nil); !math.IsNaN(got.min) || !math.IsNaN(got.median) || !math.IsNaN(got.max) {
		t.Errorf("spreadOf(nil) = %+v; want NaNs", got)
	}
}

func TestResultStats(t *testing.T) {
	// 100 MB framed: runs of 1, 2 and 4 s are 100, 50 and 25 MB/s whatever each run sent.
	r := &Result{Kind: KindLoader, Streams: 2, Connections: 2, Samples: []Sample{
		{Seconds: 2, CPUSeconds: 1, PeakRSS: 10 << 20, Rows: 1000},
		{Seconds: 1, CPUSeconds: 3, PeakRSS: 30 << 20, Rows: 1000},
		{Seconds: 4, CPUSeconds: 2, PeakRSS: 20 << 20, Rows: 1000},
	}}
	st := r.stats(100e6)
	if st.mbs != (spread{25, 50, 100}) || st.rows != (spread{250, 500, 1000}) {
		t.Errorf("stats() MB/s %+v, rows/s %+v; want 25/50/100 and 250/500/1000", st.mbs, st.rows)
	}
	if st.cpuPerGB != 20 || st.peakRSS != 30<<20 || st.seconds.median != 2 {
		t.Errorf("stats() CPU/GB %v, peak %d, median %vs; want 20 (2 s per 0.1 GB), 30 MiB, 2 s", st.cpuPerGB, st.peakRSS, st.seconds.median)
	}
	r.Samples[1].CPUSeconds, r.Samples[1].PeakRSS = -1, -1
	r.Samples[0].PeakRSS, r.Samples[2].PeakRSS = -1, -1
	if st := r.stats(100e6); !math.IsNaN(st.cpuPerGB) || st.peakRSS != -1 {
		t.Errorf("stats() with unknown CPU and RSS = %v, %d; want NaN and -1", st.cpuPerGB, st.peakRSS)
	}
}

func TestMeasure(t *testing.T) {
	s, err := measure(func() (int64, int64, error) {
		buf := make([]byte, 8<<20)
		for i := range buf {
			buf[i] = byte(i)
		}
		deadline := time.Now().Add(20 * time.Millisecond)
		for time.Now().Before(deadline) {
		}
		return 7, int64(buf[len(buf)-1]), nil
	})
	if err != nil || s.Rows != 7 || s.Seconds <= 0 {
		t.Fatalf("measure() = %+v, %v; want 7 rows and a positive time", s, err)
	}
	if _, ok := cpuTime(); ok && s.CPUSeconds <= 0 {
		t.Errorf("measure() CPU = %v s for a busy loop; want > 0", s.CPUSeconds)
	}
	if resetPeakRSS() && s.PeakRSS < 8<<20 {
		t.Errorf("measure() peak RSS = %d for a run that touched 8 MiB; want at least that", s.PeakRSS)
	}
}

func TestStepString(t *testing.T) {
	tests := []struct {
		step Step
		want string
	}{
		{Step{N: 7, Total: 21, Kind: KindLoader, Streams: 4, Connections: 1, Run: 2, Runs: 3}, "7/21 loader streams=4 connections=1 run 2/3"},
		{Step{N: 1, Total: 21, Kind: KindDecode, Run: 1, Runs: 3}, "1/21 decode_ceiling run 1/3"},
		{Step{N: 9, Total: 21, Kind: KindADBC, Throttled: true, Streams: 1, Connections: 1, Run: 3, Runs: 3}, "9/21 adbc throttled streams=1 connections=1 run 3/3"},
	}
	for _, tt := range tests {
		if got := tt.step.String(); got != tt.want {
			t.Errorf("Step.String() = %q; want %q", got, tt.want)
		}
	}
}

func TestConfigDefaultsAndLimits(t *testing.T) {
	ok := func() Config { return Config{Binary: "loader"} }
	c := ok()
	if err := c.applyDefaults(); err != nil {
		t.Fatalf("applyDefaults() = %v", err)
	}
	if len(c.Streams) != 5 || c.Repeat != DefaultRepeat || c.Load.Table != DefaultTable || len(c.Connections) != 1 || c.Connections[0] != 0 {
		t.Errorf("defaults = streams %v, repeat %d, table %s, connections %v", c.Streams, c.Repeat, c.Load.Table, c.Connections)
	}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no binary for local sinks", func(c *Config) { c.Binary = "" }},
		{"zero streams", func(c *Config) { c.Streams = []int{0} }},
		{"too many streams", func(c *Config) { c.Streams = []int{MaxStreams + 1} }},
		{"negative connections", func(c *Config) { c.Connections = []int{-1} }},
		{"too many repeats", func(c *Config) { c.Repeat = MaxRepeat + 1 }},
		{"negative repeat", func(c *Config) { c.Repeat = -1 }},
		{"throttle without a rate", func(c *Config) { c.Throttle = &Throttle{Latency: time.Second} }},
		{"remote without a table", func(c *Config) { c.Load.Endpoint = "grpc://127.0.0.1:1" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok()
			tt.change(&c)
			if err := c.applyDefaults(); err == nil {
				t.Errorf("applyDefaults() = nil; want an error")
			}
		})
	}
}
