// Package netproxy applies the proxy environment variables the Databricks SDKs honour (HTTPS_PROXY,
// https_proxy, NO_PROXY, no_proxy and, for gRPC, grpc_proxy) to the loader's two kinds of traffic:
// the OAuth token requests (an http.Transport's Proxy) and the gRPC connections (a dialer that
// tunnels through the proxy with HTTP CONNECT). Rules follow golang.org/x/net/http/httpproxy, which
// never proxies localhost or loopback addresses.
package netproxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// Config is the proxy environment, read once.
type Config struct {
	https   *httpproxy.Config // for the token endpoint
	grpc    *httpproxy.Config // for gRPC: grpc_proxy, else the HTTPS proxy
	anyGRPC bool
}

// FromEnv reads the proxy variables with getenv (os.Getenv in production).
func FromEnv(getenv func(string) string) *Config {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				return v
			}
		}
		return ""
	}
	noProxy := first("NO_PROXY", "no_proxy")
	httpsProxy := first("HTTPS_PROXY", "https_proxy")
	grpcProxy := first("grpc_proxy", "GRPC_PROXY")
	if grpcProxy == "" {
		grpcProxy = httpsProxy
	}
	return &Config{
		https:   &httpproxy.Config{HTTPSProxy: httpsProxy, HTTPProxy: first("HTTP_PROXY", "http_proxy"), NoProxy: noProxy},
		grpc:    &httpproxy.Config{HTTPSProxy: grpcProxy, HTTPProxy: grpcProxy, NoProxy: noProxy},
		anyGRPC: grpcProxy != "",
	}
}

// HTTPProxy is an http.Transport Proxy function for the token endpoint and the REST APIs.
func (c *Config) HTTPProxy() func(*http.Request) (*url.URL, error) {
	fn := c.https.ProxyFunc()
	return func(r *http.Request) (*url.URL, error) { return fn(r.URL) }
}

// GRPCProxy returns the proxy for a gRPC connection to addr (host:port), or nil for a direct
// connection.
func (c *Config) GRPCProxy(addr string) (*url.URL, error) {
	if !c.anyGRPC {
		return nil, nil
	}
	return c.grpc.ProxyFunc()(&url.URL{Scheme: "https", Host: addr})
}

// Dial connects to addr, through the gRPC proxy when one applies (an HTTP CONNECT tunnel), else
// directly. It fits grpc.WithContextDialer.
func (c *Config) Dial(ctx context.Context, addr string) (net.Conn, error) {
	proxy, err := c.GRPCProxy(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	if proxy == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	return DialConnect(ctx, proxy, addr)
}

// ConnectError is a proxy that refused a CONNECT.
type ConnectError struct {
	Proxy  string // host:port of the proxy
	Target string
	Status string
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("proxy %s refused CONNECT %s: %s", e.Proxy, e.Target, e.Status)
}

// DialConnect opens a tunnel to addr through the HTTP proxy (http:// URL, user info sent as
// Proxy-Authorization).
func DialConnect(ctx context.Context, proxy *url.URL, addr string) (net.Conn, error) {
	host := proxy.Host
	if proxy.Port() == "" {
		host = net.JoinHostPort(proxy.Hostname(), "80")
		if proxy.Scheme == "https" {
			return nil, fmt.Errorf("proxy %s: https:// proxies are not supported; use http://", proxy.Redacted())
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", host, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: http.Header{}}
	if u := proxy.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("proxy %s: %w", host, err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("proxy %s: %w", host, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		conn.Close()
		return nil, &ConnectError{Proxy: host, Target: addr, Status: strings.TrimSpace(res.Status)}
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn reads what the proxy sent after its answer first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
