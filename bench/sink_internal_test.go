package bench

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// fakeSink starts the test binary as a sink in the given mode of TestMain.
func fakeSink(t *testing.T, ctx context.Context, mode string) (*sinkProc, error) {
	t.Helper()
	t.Setenv(fakeSinkEnv, mode)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startSink(ctx, bin, "test sink", slog.New(slog.DiscardHandler), "--listen", "127.0.0.1:0")
}

func TestStartSinkReadsItsAddressAndStops(t *testing.T) {
	s, err := fakeSink(t, context.Background(), "ok")
	if err != nil {
		t.Fatalf("startSink: %v", err)
	}
	if s.addr != "127.0.0.1:4242" || s.endpoint() != "grpc://127.0.0.1:4242" {
		t.Errorf("startSink() address = %q, endpoint %q; want 127.0.0.1:4242", s.addr, s.endpoint())
	}
	if err := s.stop(); err != nil {
		t.Errorf("stop() = %v; want a clean exit on SIGTERM", err)
	}
	select {
	case <-s.exited:
	default:
		t.Error("stop() returned before the process exited")
	}
	if err := s.stop(); err != nil {
		t.Errorf("a second stop() = %v; want nil", err)
	}
}

func TestStartSinkThatExitsQuotesItsStderr(t *testing.T) {
	s, err := fakeSink(t, context.Background(), "fail")
	if err == nil {
		s.stop()
		t.Fatal("startSink(a sink that exits) = nil error")
	}
	if !strings.Contains(err.Error(), "exited before listening") || !strings.Contains(err.Error(), "unknown flag: --stream-rate-limit") {
		t.Errorf("startSink(a sink that exits) = %v; want the exit and its stderr", err)
	}
}

func TestStartSinkCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The fake prints its address at once; either the address or the cancellation may win, and
	// either way nothing is left running.
	s, err := fakeSink(t, ctx, "ok")
	switch {
	case err == nil:
		if serr := s.stop(); serr != nil {
			t.Errorf("stop() = %v", serr)
		}
	case !errors.Is(err, context.Canceled):
		t.Errorf("startSink(cancelled) = %v; want context.Canceled", err)
	}
}

func TestLineTailKeepsTheLastLines(t *testing.T) {
	lt := &lineTail{max: 3}
	if got := lt.quote(); got != "" {
		t.Errorf("quote() of nothing = %q; want empty", got)
	}
	for _, l := range []string{"a", "b", "c", "d", "e"} {
		lt.add(l)
	}
	if got, want := lt.quote(), "; its stderr ends:\n  c\n  d\n  e"; got != want {
		t.Errorf("quote() = %q; want %q", got, want)
	}
}
