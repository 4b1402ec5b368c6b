package netproxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/netproxy"
	"github.com/loaderproject/loader/internal/proxytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        map[string]string
		addr       string
		grpc, http string // the proxies chosen, "" for direct
	}{
		{"HTTPS_PROXY for both", map[string]string{"HTTPS_PROXY": "http://p:3128"}, "ws.zerobus.test:443", "p:3128", "p:3128"},
		{"lower case", map[string]string{"https_proxy": "http://p:3128"}, "ws.zerobus.test:443", "p:3128", "p:3128"},
		{"grpc_proxy for gRPC only", map[string]string{"HTTPS_PROXY": "http://p:3128", "grpc_proxy": "http://g:8080"}, "ws.zerobus.test:443", "g:8080", "p:3128"},
		{"NO_PROXY", map[string]string{"HTTPS_PROXY": "http://p:3128", "NO_PROXY": ".zerobus.test"}, "ws.zerobus.test:443", "", ""},
		{"loopback is never proxied", map[string]string{"HTTPS_PROXY": "http://p:3128"}, "127.0.0.1:443", "", ""},
		{"no proxy set", map[string]string{}, "ws.zerobus.test:443", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := netproxy.FromEnv(env(tc.env))
			g, err := c.GRPCProxy(tc.addr)
			if err != nil || host(g) != tc.grpc {
				t.Errorf("gRPC proxy %v, %v; want %q", g, err, tc.grpc)
			}
			h, err := c.HTTPProxy()(&http.Request{URL: &url.URL{Scheme: "https", Host: tc.addr}})
			if err != nil || host(h) != tc.http {
				t.Errorf("HTTP proxy %v, %v; want %q", h, err, tc.http)
			}
		})
	}
}

func host(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Host
}

// TestDialThroughProxy tunnels to an echo server through a real CONNECT proxy, by a name only the
// proxy resolves.
func TestDialThroughProxy(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := lis.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(c, c)
		c.Close()
	}()
	p, err := proxytest.Start(func(string) string { return lis.Addr().String() })
	if err != nil {
		t.Fatal(err)
	}
	c := netproxy.FromEnv(env(map[string]string{"grpc_proxy": p.URL}))
	conn, err := c.Dial(context.Background(), "echo.test:443")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Errorf("echo %q, %v", buf, err)
	}
	conn.Close()
	<-done
	lis.Close()
	if got := p.Targets(); len(got) != 1 || got[0] != "echo.test:443" {
		t.Errorf("tunnels %v; want one to echo.test:443", got)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}

	// A proxy that refuses.
	refusing, err := proxytest.Start(func(string) string { return "127.0.0.1:1" })
	if err != nil {
		t.Fatal(err)
	}
	defer refusing.Close()
	u, _ := url.Parse(refusing.URL)
	_, err = netproxy.DialConnect(context.Background(), u, "x.test:443")
	var ce *netproxy.ConnectError
	if !errors.As(err, &ce) || ce.Target != "x.test:443" {
		t.Errorf("%v; want a *ConnectError for x.test:443", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := netproxy.DialConnect(ctx, u, "x.test:443"); err == nil {
		t.Error("a cancelled context dialled")
	}
}
