// Package proctest runs a server program for a test: it starts the command, waits until a line of
// its output says it is ready, keeps draining its output so it never blocks, and kills it when the
// test ends.
package proctest

import (
	"bufio"
	"bytes"
	"net"
	"os/exec"
	"testing"
	"time"
)

// Start starts cmd with its stdout and stderr merged, and returns what ready made of the first
// output line it accepted. The test fails, with the output so far, when the program exits before
// such a line or prints none within a minute. The program is killed, and waited for, when the test
// ends.
func Start(t testing.TB, name string, cmd *exec.Cmd, ready func(line string) (string, bool)) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	got := make(chan string, 1)
	var log bytes.Buffer // written until ready, read after got says so
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if said {
				continue // keep draining, so the program never blocks on its output
			}
			log.WriteString(sc.Text() + "\n")
			if v, ok := ready(sc.Text()); ok {
				said = true
				got <- v
			}
		}
		if !said {
			close(got)
		}
		_ = cmd.Wait()
	}()
	select {
	case v, ok := <-got:
		if !ok {
			t.Fatalf("%s exited before it was ready:\n%s", name, log.String())
		}
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s was not ready within a minute", name)
	}
	return ""
}

// FreePort returns a loopback port that was free a moment ago, for a server that takes its port on
// the command line.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
