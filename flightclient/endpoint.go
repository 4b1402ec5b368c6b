package flightclient

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Endpoint is a parsed target address.
type Endpoint struct {
	Host    string // host name or IP, without brackets
	Port    int
	TLS     bool
	Address string // host:port as gRPC dials it
}

// ParseEndpoint reads grpc://host:port (plaintext, port required), grpc+tls://host[:port] or
// https://host[:port] (TLS, port 443 by default). A bare host[:port] is read as https://, as the
// Zerobus SDKs do. Paths, queries, fragments and user info are refused.
func ParseEndpoint(s string) (Endpoint, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return Endpoint{}, fmt.Errorf("empty endpoint; want grpc://host:port, grpc+tls://host:port or https://host")
	}
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %q: %w", s, err)
	}
	var ep Endpoint
	switch strings.ToLower(u.Scheme) {
	case "grpc", "grpc+tcp":
	case "grpc+tls", "https":
		ep.TLS = true
	default:
		return Endpoint{}, fmt.Errorf("endpoint %q: scheme %q, want grpc://, grpc+tls:// or https://", s, u.Scheme)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Endpoint{}, fmt.Errorf("endpoint %q: want only a scheme, a host and a port", s)
	}
	ep.Host = u.Hostname()
	if ep.Host == "" {
		return Endpoint{}, fmt.Errorf("endpoint %q: no host", s)
	}
	switch port := u.Port(); {
	case port != "":
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Endpoint{}, fmt.Errorf("endpoint %q: port %q, want 1 to 65535", s, port)
		}
		ep.Port = n
	case ep.TLS:
		ep.Port = 443
	default:
		return Endpoint{}, fmt.Errorf("endpoint %q: plaintext grpc:// needs a port", s)
	}
	ep.Address = net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
	return ep, nil
}
