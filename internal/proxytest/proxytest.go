// Package proxytest is a small HTTP CONNECT proxy on loopback for tests: it tunnels to whatever
// CONNECT names (after an optional rewrite of the host, so tests can use names that only the proxy
// resolves) and records each tunnel's target.
package proxytest

import (
	"io"
	"net"
	"net/http"
	"sync"
)

// Proxy is a running CONNECT proxy. Close stops it and its tunnels.
type Proxy struct {
	// URL is http://127.0.0.1:PORT.
	URL string
	srv *http.Server
	lis net.Listener
	// route maps the requested host:port to the address dialled.
	route func(hostport string) string

	mu      sync.Mutex
	targets []string
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// Start starts a proxy on 127.0.0.1. route, when not nil, rewrites each CONNECT target before it is
// dialled (e.g. "ws1.zerobus.test:443" to "127.0.0.1:PORT").
func Start(route func(hostport string) string) (*Proxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + lis.Addr().String(), lis: lis, route: route, conns: map[net.Conn]struct{}{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.handle)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(lis)
	}()
	return p, nil
}

// Targets returns the CONNECT targets seen so far (as requested, before routing), in order.
func (p *Proxy) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func (p *Proxy) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	target := r.Host
	p.mu.Lock()
	p.targets = append(p.targets, target)
	p.mu.Unlock()
	dial := target
	if p.route != nil {
		dial = p.route(target)
	}
	up, err := net.Dial("tcp", dial)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	p.mu.Lock()
	p.conns[up], p.conns[down] = struct{}{}, struct{}{}
	p.mu.Unlock()
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		if n := buf.Reader.Buffered(); n > 0 {
			b, _ := buf.Peek(n)
			_, _ = up.Write(b)
		}
		_, _ = io.Copy(up, down)
		closeWrite(up)
	}()
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
	}()
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	c.Close()
}

// Close stops the proxy and cuts every tunnel.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
