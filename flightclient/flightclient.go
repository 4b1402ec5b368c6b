package flightclient

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// Dialect is a target protocol.
type Dialect string

// The dialects.
const (
	Zerobus   Dialect = "zerobus"
	Flight    Dialect = "flight"
	FlightSQL Dialect = "flightsql"
)

// ParseDialect reads a dialect name (as --protocol spells it).
func ParseDialect(s string) (Dialect, error) {
	switch d := Dialect(s); d {
	case Zerobus, Flight, FlightSQL:
		return d, nil
	}
	return "", fmt.Errorf("unknown protocol %q, want zerobus, flight or flightsql", s)
}

// Errors callers test for with errors.Is.
var (
	// ErrUnsupported means the target does not offer an optional capability (counting rows,
	// describing or creating a table), typically because it answered Unimplemented. The error is an
	// *UnsupportedError, which says why.
	ErrUnsupported = errors.New("not supported by the target")
	// ErrTableNotFound means the target has no such table. The error keeps the target's status.
	ErrTableNotFound = errors.New("table not found")
)

// UnsupportedError says which optional capability the target lacks and why. It matches
// ErrUnsupported with errors.Is.
type UnsupportedError struct {
	What string // "count rows", "describe tables", "create tables"
	Why  string // the target's own words, or what the client concluded
	Err  error  // the status behind it, if any
}

func (e *UnsupportedError) Error() string { return "the target cannot " + e.What + ": " + e.Why }

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Unwrap returns the status behind the error.
func (e *UnsupportedError) Unwrap() error { return e.Err }

// Client is a connection pool to one Flight endpoint, speaking one dialect. It is safe for concurrent
// use.
type Client struct {
	dialect Dialect
	proto   protocol // the dialect's DoPut
	tables  tables   // the dialect's table operations
	cfg     config
	conns   []*grpc.ClientConn         // owned; nil for NewFromConn
	raw     []grpc.ClientConnInterface // every connection streams are spread over
	tlsErr  atomic.Pointer[TLSError]   // the first certificate verification failure

	unitID func(partitioner.Span) string // set by EnableUnitIDs when the target accepted unit ids
}

// newClient makes a client without connections: the dialect's two halves and the configuration.
func newClient(dialect Dialect, opts []Option) (*Client, error) {
	if _, err := ParseDialect(string(dialect)); err != nil {
		return nil, fmt.Errorf("flightclient: %w", err)
	}
	cfg := newConfig(opts)
	return &Client{dialect: dialect, proto: protocolFor(dialect, cfg.createTable), tables: tablesFor(dialect), cfg: cfg}, nil
}

// writeBufferBytes is the gRPC write buffer of each connection.
const writeBufferBytes = 1 << 20

// New parses endpoint (grpc://host:port plaintext; grpc+tls://host:port or https://host[:port] with
// TLS, port 443 by default) and prepares the connection pool. It does no I/O.
//
// A bare host[:port] is read as https://, as the Zerobus SDKs do. Paths, queries and user info are
// refused.
func New(endpoint string, dialect Dialect, opts ...Option) (*Client, error) {
	c, err := newClient(dialect, opts)
	if err != nil {
		return nil, err
	}
	ep, err := ParseEndpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("flightclient: %w", err)
	}
	cfg := c.cfg
	creds := insecure.NewCredentials()
	if ep.TLS {
		tc := cfg.tls.Clone()
		if tc.ServerName == "" {
			tc.ServerName = ep.Host
		}
		creds = &verifyingCreds{TransportCredentials: credentials.NewTLS(tc), endpoint: ep.Address, failed: &c.tlsErr}
	}
	target := ep.Address
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent(cfg.userAgent),
		// Frames are megabytes: a 1 MiB write buffer takes up to 32 times fewer writes to the socket
		// than gRPC's 32 KiB. One buffer per connection.
		grpc.WithWriteBufferSize(writeBufferBytes),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallSendMsgSize(cfg.sendLimit()),
			grpc.MaxCallRecvMsgSize(cfg.recvLimit()),
		),
	}
	if cfg.dialer != nil {
		// The dialer gets the host name unresolved (a proxy resolves it).
		target = "passthrough:///" + ep.Address
		dialOpts = append(dialOpts, grpc.WithContextDialer(cfg.dialer), grpc.WithNoProxy())
	}
	dialOpts = append(dialOpts, cfg.dialOpts...)
	for i := range cfg.connections {
		cc, err := grpc.NewClient(target, dialOpts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("flightclient: connection %d to %s: %w", i, ep.Address, err)
		}
		c.conns = append(c.conns, cc)
		c.raw = append(c.raw, cc)
	}
	return c, nil
}

// NewFromConn returns a client that sends every stream over cc, a connection the caller made and
// closes (bufconn in tests, a custom dialer, an interceptor chain). WithConnections, WithTLSConfig and
// WithDialOptions are ignored; message size limits are the caller's to set on cc, as gRPC applies them
// per connection, so they should fit the frame limit.
func NewFromConn(cc grpc.ClientConnInterface, dialect Dialect, opts ...Option) (*Client, error) {
	if cc == nil {
		return nil, errors.New("flightclient: nil connection")
	}
	c, err := newClient(dialect, opts)
	if err != nil {
		return nil, err
	}
	c.raw = []grpc.ClientConnInterface{cc}
	return c, nil
}

// Dialect returns the client's dialect.
func (c *Client) Dialect() Dialect { return c.dialect }

// Close closes the connections (those New made; a NewFromConn connection stays open).
func (c *Client) Close() error {
	var errs []error
	for _, cc := range c.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.conns = nil
	return errors.Join(errs...)
}

// Stats counts what a Load did.
type Stats struct {
	Streams   int
	Frames    int64 // frames acknowledged (as given to acked)
	Bytes     int64 // encoded bytes of the acknowledged frames
	Rows      int64 // rows of the acknowledged frames
	Retries   int64 // DoPuts reopened after a transient failure
	Rotations int64 // DoPuts reopened because the server asked
	Calls     int64 // DoPuts opened
	// ResentRows counts rows sent again on a new DoPut after the call that carried them ended without
	// acknowledging them (a fault, an ack timeout, a rotation whose grace ran out): the target may
	// hold them twice unless it deduplicates by unit id.
	ResentRows int64
	// Transactions counts Flight SQL ingest calls committed as transactions (where the server
	// advertises ingest transactions).
	Transactions int64
}

// outgoing returns ctx with the call's metadata: the bearer token and the dialect's headers (for
// Zerobus, the table's).
func (c *Client) outgoing(ctx context.Context, table tableschema.TableName) (context.Context, error) {
	md := metadata.MD{}
	if c.cfg.tokens != nil {
		tok, err := c.cfg.tokens.Token(ctx, table)
		if err != nil {
			return nil, &fatal{fmt.Errorf("token: %w", err)}
		}
		md.Set(zerobus.HeaderAuthorization, "Bearer "+tok)
	} else if c.cfg.token != nil {
		tok, err := c.cfg.token(ctx)
		if err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
		if tok != "" {
			md.Set(zerobus.HeaderAuthorization, "Bearer "+tok)
		}
	}
	if table.Table != "" {
		c.proto.header(md, table)
	}
	return metadata.NewOutgoingContext(ctx, md), nil
}
