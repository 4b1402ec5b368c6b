package flightclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
)

// TokenSource gives each call a bearer token for its table (Zerobus tokens are scoped to one table).
// Token is called for every DoPut opened, reconnections included, and every action, from several
// goroutines at once; it should return a cached token while it is fresh. Invalidate drops the cached
// token of a table after the server refused it as Unauthenticated.
type TokenSource interface {
	Token(ctx context.Context, table tableschema.TableName) (string, error)
	Invalidate(table tableschema.TableName)
}

// WithTableTokens takes each call's bearer token from ts. An error from ts fails the load: the
// source is expected to have retried what can be retried. When a DoPut is refused as
// Unauthenticated, the stream invalidates the table's token and tries once more with a new one
// before it fails. It replaces WithToken and WithTokenSource.
func WithTableTokens(ts TokenSource) Option {
	return func(c *config) {
		c.tokens = ts
		c.token = nil
	}
}

// Dialer opens the TCP connection to a gRPC endpoint (host:port, not resolved): directly or through a
// proxy.
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// WithDialer connects through d (an HTTP CONNECT proxy dialer, see internal/netproxy). The endpoint's
// host name is handed to d unresolved, so a proxy can resolve it. Default: gRPC's own dialing.
func WithDialer(d Dialer) Option {
	return func(c *config) { c.dialer = d }
}

// TLSError is a server certificate that failed verification: a connection to this endpoint cannot
// succeed until the certificate is trusted (a root CA added) or the host name fixed, so the load
// stops instead of retrying.
type TLSError struct {
	Endpoint string
	Err      error
}

func (e *TLSError) Error() string {
	return fmt.Sprintf("TLS handshake with %s failed: the server certificate was not verified: %v", e.Endpoint, e.Err)
}

// Unwrap returns the verification error.
func (e *TLSError) Unwrap() error { return e.Err }

// isVerifyError reports whether a handshake error is a certificate that failed verification.
func isVerifyError(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// verifyingCreds records the first certificate verification failure of a client's handshakes.
type verifyingCreds struct {
	credentials.TransportCredentials
	endpoint string
	failed   *atomic.Pointer[TLSError]
}

func (v *verifyingCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := v.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil && isVerifyError(err) {
		v.failed.CompareAndSwap(nil, &TLSError{Endpoint: v.endpoint, Err: err})
	}
	return c, info, err
}

func (v *verifyingCreds) Clone() credentials.TransportCredentials {
	return &verifyingCreds{TransportCredentials: v.TransportCredentials.Clone(), endpoint: v.endpoint, failed: v.failed}
}

// tlsFailure returns the certificate verification failure seen on the client's connections, if any.
func (c *Client) tlsFailure() error {
	if e := c.tlsErr.Load(); e != nil {
		return e
	}
	return nil
}

// isUnauthenticated reports whether err is the server's Unauthenticated.
func isUnauthenticated(err error) bool {
	return status.Code(err) == codes.Unauthenticated
}

// Probe opens one DoPut into table with enc's schema frame and, in the Zerobus dialect, waits for
// READY, then ends the call without sending data: it proves that the endpoint answers, the token is
// accepted for the table, and the table takes the schema. The error is the server's (a schema error
// is a *zerobus.SchemaError through zerobus.AsSchemaError), or a *TLSError.
func (c *Client) Probe(ctx context.Context, table tableschema.TableName, enc *partitioner.Encoder) error {
	first, err := c.proto.schemaFrame(table, enc.SchemaMessage())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.readyTimeout)
	defer cancel()
	octx, err := c.outgoing(ctx, table)
	if err != nil {
		return err
	}
	ps, err := flight.NewFlightServiceClient(c.raw[0]).DoPut(octx, grpc.WaitForReady(false))
	if err != nil {
		return c.probeErr(err)
	}
	if err := ps.Send(first); err != nil && !errors.Is(err, io.EOF) {
		return c.probeErr(err)
	}
	if !c.proto.awaitsReady() {
		if err := ps.CloseSend(); err != nil {
			return c.probeErr(err)
		}
		for {
			if _, err := ps.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return c.probeErr(err)
			}
		}
	}
	res, err := ps.Recv()
	if err != nil {
		return c.probeErr(err)
	}
	a, err := c.proto.parse(res, false)
	if err != nil {
		return err
	}
	if a.kind != answerReady {
		return errors.New("the server's first answer was not READY")
	}
	_ = ps.CloseSend()
	return nil
}

func (c *Client) probeErr(err error) error {
	if tf := c.tlsFailure(); tf != nil {
		return tf
	}
	return err
}
