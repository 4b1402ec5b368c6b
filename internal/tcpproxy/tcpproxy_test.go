package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/tcpproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves lines back until the listener closes.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, msg string) error {
	t.Helper()
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != msg+"\n" {
		t.Errorf("echo = %q; want %q", got, msg)
	}
	return nil
}

// proxied starts a proxy in front of an echo server and returns it with a connection through it
// that has made one round trip ("hello"). Both end with the test.
func proxied(t *testing.T) (*tcpproxy.Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := tcpproxy.New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	if err := roundTrip(t, c, r, "hello"); err != nil {
		t.Fatal(err)
	}
	return p, c, r
}

func TestForwardCutAndReconnect(t *testing.T) {
	p, c, r := proxied(t)
	if p.Forwarded() != 6 {
		t.Errorf("forwarded %d bytes; want 6", p.Forwarded())
	}
	p.CutAfter(3)
	if err := roundTrip(t, c, r, "cut here"); err == nil {
		t.Error("round trip after CutAfter succeeded; want the connection cut")
	}
	if p.Cuts() != 1 {
		t.Errorf("Cuts = %d; want 1", p.Cuts())
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := roundTrip(t, c2, bufio.NewReader(c2), "again"); err != nil {
		t.Errorf("new connection after the cut: %v", err)
	}
	if n := p.Cut(); n != 2 {
		t.Errorf("Cut closed %d connections; want 2 (both sides of one)", n)
	}
}

func TestCutBackAfter(t *testing.T) {
	p, c, r := proxied(t)
	if p.Returned() != 6 {
		t.Errorf("returned %d bytes; want 6", p.Returned())
	}
	// The request reaches the echo server; its answer is cut on the way back.
	p.CutBackAfter(3)
	if err := roundTrip(t, c, r, "cut on the way back"); err == nil {
		t.Error("round trip after CutBackAfter succeeded; want the connection cut")
	}
	if p.Cuts() != 1 || p.Forwarded() != 6+20 {
		t.Errorf("Cuts = %d, forwarded %d; want 1 cut after 26 bytes went up", p.Cuts(), p.Forwarded())
	}
}

func TestStallBackAfter(t *testing.T) {
	p, c, r := proxied(t)
	// 3 bytes of the echo arrive, then nothing, and the connection stays open.
	p.StallBackAfter(3)
	if _, err := c.Write([]byte("stalled\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	got := make([]byte, 100)
	n, err := io.ReadAtLeast(r, got, len("stalled\n"))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || string(got[:n]) != "sta" {
		t.Errorf("read from a stalled connection: %q, %v; want \"sta\", then a timeout", got[:n], err)
	}
	if p.Stalls() != 1 || p.Cuts() != 0 {
		t.Errorf("%d stalls, %d cuts; want 1 stall and no cut", p.Stalls(), p.Cuts())
	}
}
