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
	stallAt    int64 // stall the connection whose bytes toward the client reach it; 0: never
	cuts       int
	stalls     int
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

// StallBackAfter stalls, once n more bytes have been forwarded toward the clients, the connection
// that carries them (once): from then on it swallows what the target sends and delivers nothing,
// while staying open, as a hung server or a dead path does. It ends when the client gives up.
func (p *Proxy) StallBackAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallAt = p.downstream.Load() + n
}

// Stalls returns how many connections were stalled.
func (p *Proxy) Stalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalls
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
		gone := make(chan struct{}) // closed when the client's side ends
		go p.pipe(up, c, true, gone)
		go p.pipe(c, up, false, gone)
	}
}

// pipe copies from src to dst until either fails, then closes both. A stalled connection's pipe
// toward the client delivers nothing more and, when the target ends its side, waits for the client
// to end its own (gone), as a hung server would.
func (p *Proxy) pipe(dst, src net.Conn, toTarget bool, gone chan struct{}) {
	defer p.wg.Done()
	if toTarget {
		defer close(gone)
	}
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
	stalled := false
	for {
		n, err := src.Read(buf)
		if n > 0 && !stalled {
			// A cut due with these bytes drops them: they never reach the other side.
			if p.count(toTarget, int64(n)) {
				return
			}
			if !toTarget {
				n, stalled = p.stall(n)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if stalled {
				<-gone
				return
			}
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

// stall reports, for the last n bytes counted toward a client, how many of them to deliver and
// whether their connection stalls after them.
func (p *Proxy) stall(n int) (int, bool) {
	total := p.downstream.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stallAt == 0 || total < p.stallAt {
		return n, false
	}
	keep := max(0, int64(n)-(total-p.stallAt))
	p.stallAt = 0
	p.stalls++
	return int(keep), true
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
