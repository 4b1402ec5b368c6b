package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Waits of a sink subprocess.
const (
	sinkStartTimeout = time.Minute      // from start to its "listening on" line
	sinkStopTimeout  = 45 * time.Second // from SIGTERM to exit; beyond `loader serve`'s 30 s shutdown wait
	stderrTailLines  = 20
)

// sinkProc is a `loader serve` subprocess.
type sinkProc struct {
	name string // what it is for, in errors and notes
	cmd  *exec.Cmd
	addr string // HOST:PORT it listens on
	tail *lineTail

	exited  chan struct{} // closed once the process has exited and been waited for
	waitErr error         // set before exited is closed
}

// startSink starts `binary serve args...` and returns once it printed "listening on HOST:PORT" on
// stderr. If the process exits first, or ctx ends, or it stays silent for sinkStartTimeout, the
// process is killed and the error quotes the end of its stderr.
func startSink(ctx context.Context, binary, name string, log *slog.Logger, args ...string) (*sinkProc, error) {
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	setDeathSignal(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s serve: %w", name, binary, err)
	}
	s := &sinkProc{name: name, cmd: cmd, tail: &lineTail{max: stderrTailLines}, exited: make(chan struct{})}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		s.scan(stderr, addr, log)
	}()
	go func() {
		<-scanned // Wait closes the pipe: every read must be done first
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	t := time.NewTimer(sinkStartTimeout)
	defer t.Stop()
	select {
	case s.addr = <-addr:
		log.Debug("bench: sink listening", "sink", name, "addr", s.addr, "args", strings.Join(args, " "))
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("%s: %s serve exited before listening (%w)%s", name, binary, s.waitErr, s.tail.quote())
	case <-ctx.Done():
		s.kill()
		return nil, ctx.Err()
	case <-t.C:
		s.kill()
		return nil, fmt.Errorf("%s: %s serve printed no address within %s%s", name, binary, sinkStartTimeout, s.tail.quote())
	}
}

// scan reads the sink's stderr to its end: it sends the address of the first "listening on" line,
// keeps the last lines for errors, and passes every line to the log at debug level.
func (s *sinkProc) scan(r io.Reader, addr chan<- string, log *slog.Logger) {
	sc := bufio.NewScanner(r)
	found := false
	for sc.Scan() {
		line := sc.Text()
		s.tail.add(line)
		log.Debug("bench: sink stderr", "sink", s.name, "line", line)
		if a, ok := strings.CutPrefix(line, "listening on "); ok && !found {
			found = true
			addr <- strings.TrimSpace(a)
		}
	}
	_, _ = io.Copy(io.Discard, r) // a line too long for the scanner: keep draining
}

// endpoint is the sink's URL for flightclient and load.
func (s *sinkProc) endpoint() string { return "grpc://" + s.addr }

// stop ends the sink: SIGTERM (a graceful shutdown: `loader serve` commits what it acknowledged),
// then a kill after sinkStopTimeout. It returns an error when the sink did not exit cleanly.
func (s *sinkProc) stop() error {
	select {
	case <-s.exited:
		return s.exitError()
	default:
	}
	if err := terminate(s.cmd.Process); err != nil {
		s.kill()
		return s.exitError()
	}
	t := time.NewTimer(sinkStopTimeout)
	defer t.Stop()
	select {
	case <-s.exited:
		return s.exitError()
	case <-t.C:
		s.kill()
		return fmt.Errorf("%s: did not stop within %s of SIGTERM; killed%s", s.name, sinkStopTimeout, s.tail.quote())
	}
}

// kill kills the process and waits for it.
func (s *sinkProc) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func (s *sinkProc) exitError() error {
	if s.waitErr == nil {
		return nil
	}
	return fmt.Errorf("%s: exited with %w%s", s.name, s.waitErr, s.tail.quote())
}

// lineTail keeps the last max lines written to it.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == t.max {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, line)
}

// quote renders the lines as the end of an error message ("" when there are none).
func (t *lineTail) quote() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; its stderr ends:\n  " + strings.Join(t.lines, "\n  ")
}

// stopAll stops every sink, joining their errors.
func stopAll(sinks []*sinkProc) error {
	var errs []error
	for _, s := range sinks {
		if s != nil {
			errs = append(errs, s.stop())
		}
	}
	return errors.Join(errs...)
}
