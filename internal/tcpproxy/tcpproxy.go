package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards connections from its loopback address to a target. Create it with New and end it
// with Close.
type Proxy struct {
	ln     net.Listener
	target string

	mu         sync.Mutex
	conns      map[net.Conn]struct{}
	closed     bool
	cutAt      int64 // cut when upstream reaches it; 0: never
	cutBack    int64 // cut when downstream reaches it; 0: never
	cuts       int
	wg         sync.WaitGroup
	upstream   atomic.Int64 // bytes forwarded toward the target
	downstream atomic.Int64 // bytes forwarded toward the clients
}

// New listens on 127.0.0.1 (a free port) and forwards each connection to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Forwarded returns the bytes read from clients toward the target so far (those dropped by a cut
// included).
func (p *Proxy) Forwarded() int64 { return p.upstream.Load() }

// Returned returns the bytes read from the target toward clients so far (those dropped by a cut
// included).
func (p *Proxy) Returned() int64 { return p.downstream.Load() }

// Cuts returns how many times connections were cut.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// CutAfter cuts every connection once n more bytes have been forwarded toward the target (once).
func (p *Proxy) CutAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAt = p.upstream.Load() + n
}

// CutBackAfter cuts every connection once n more bytes have been forwarded toward the clients
// (once): a cut in the middle of a response, such as a download's body.
func (p *Proxy) CutBackAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutBack = p.downstream.Load() + n
}

// Cut closes every open connection, both sides, now, and returns how many there were. New
// connections are accepted as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cutLocked()
}

func (p *Proxy) cutLocked() int {
	n := len(p.conns)
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.cuts++
	return n
}

// Close stops accepting, cuts every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.cutLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(up, c, true)
		go p.pipe(c, up, false)
	}
}

// pipe copies from src to dst until either fails, then closes both.
func (p *Proxy) pipe(dst, src net.Conn, toTarget bool) {
	defer p.wg.Done()
	halfClosed := false
	defer func() {
		if halfClosed {
			return // the other direction closes both when it ends
		}
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// A cut due with these bytes drops them: they never reach the other side.
			if p.count(toTarget, int64(n)) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			// Half-close toward dst, as TCP does, and let the other direction finish.
			if tc, ok := dst.(*net.TCPConn); ok && tc.CloseWrite() == nil {
				halfClosed = true
			}
			return
		}
	}
}

// count counts bytes read for the target (toTarget) or for a client, and reports whether they
// triggered a cut.
func (p *Proxy) count(toTarget bool, n int64) bool {
	counter, at := &p.downstream, &p.cutBack
	if toTarget {
		counter, at = &p.upstream, &p.cutAt
	}
	total := counter.Add(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	if *at > 0 && total >= *at {
		*at = 0
		p.cutLocked()
		return true
	}
	return false
}
