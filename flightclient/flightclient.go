package flightclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
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

// ErrUnsupported means the target does not offer an optional capability (counting rows, describing a
// table, flushing), typically because it answered Unimplemented.
var ErrUnsupported = errors.New("not supported by the target")

// Client is a connection pool to one Flight endpoint. It is safe for concurrent use.
type Client struct {
	dialect Dialect
	target  string // host:port, "" for NewFromConn
	cfg     config
	conns   []*grpc.ClientConn // owned; nil for NewFromConn
	svc     []flight.FlightServiceClient
	raw     []grpc.ClientConnInterface
}

// New parses endpoint (grpc://host:port plaintext; grpc+tls://host:port or https://host[:port] with
// TLS, port 443 by default) and prepares the connection pool. It does no I/O.
//
// A bare host[:port] is read as https://, as the Zerobus SDKs do. Paths, queries and user info are
// refused.
func New(endpoint string, dialect Dialect, opts ...Option) (*Client, error) {
	if _, err := ParseDialect(string(dialect)); err != nil {
		return nil, fmt.Errorf("flightclient: %w", err)
	}
	ep, err := ParseEndpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("flightclient: %w", err)
	}
	cfg := newConfig(opts)
	c := &Client{dialect: dialect, target: ep.Address, cfg: cfg}
	creds := insecure.NewCredentials()
	if ep.TLS {
		tc := cfg.tls.Clone()
		if tc.ServerName == "" {
			tc.ServerName = ep.Host
		}
		creds = credentials.NewTLS(tc)
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("loader"),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallSendMsgSize(cfg.sendLimit()),
			grpc.MaxCallRecvMsgSize(cfg.recvLimit()),
		),
	}
	dialOpts = append(dialOpts, cfg.dialOpts...)
	for i := range cfg.connections {
		cc, err := grpc.NewClient(ep.Address, dialOpts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("flightclient: connection %d to %s: %w", i, ep.Address, err)
		}
		c.conns = append(c.conns, cc)
		c.raw = append(c.raw, cc)
		c.svc = append(c.svc, flight.NewFlightServiceClient(cc))
	}
	return c, nil
}

// NewFromConn returns a client that sends every stream over cc, a connection the caller made and
// closes (bufconn in tests, a custom dialer, an interceptor chain). WithConnections, WithTLSConfig and
// WithDialOptions are ignored; message size limits are the caller's to set on cc, as gRPC applies them
// per connection, so they should fit the frame limit.
func NewFromConn(cc grpc.ClientConnInterface, dialect Dialect, opts ...Option) (*Client, error) {
	if _, err := ParseDialect(string(dialect)); err != nil {
		return nil, fmt.Errorf("flightclient: %w", err)
	}
	if cc == nil {
		return nil, errors.New("flightclient: nil connection")
	}
	cfg := newConfig(opts)
	return &Client{
		dialect: dialect, cfg: cfg,
		raw: []grpc.ClientConnInterface{cc},
		svc: []flight.FlightServiceClient{flight.NewFlightServiceClient(cc)},
	}, nil
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
}

// Load sends every frame received on frames to the table over `streams` parallel DoPuts and returns
// once frames is closed and every frame has been acknowledged, or on the first fatal error (after
// stopping every stream). schemaMessage is the IPC schema message of the frames (see
// partitioner.Encoder.SchemaMessage) and enc decodes a frame when a partial acknowledgement forces a
// re-slice. acked is called exactly once per frame, after the target made all of its rows durable; it
// may be called from several goroutines at once.
//
// The schema message sent is enc.SchemaMessage(); schema must equal enc's schema. acked receives the
// frame exactly as it came from the channel (even when only a re-sliced remainder of it had to be
// sent again), so the caller can record [Span.Row, Span.Row+Rows) and release the frame's Size. Frames
// of one stream are reported in the order that stream took them. When ctx ends, Load returns ctx's
// error.
func (c *Client) Load(ctx context.Context, table tableschema.TableName, schema *arrow.Schema, enc *partitioner.Encoder,
	streams int, frames <-chan *partitioner.Frame, acked func(*partitioner.Frame)) (Stats, error) {
	return c.load(ctx, table, schema, enc, streams, frames, acked)
}

// outgoing returns ctx with the call's metadata: the bearer token and, for Zerobus, the table header.
func (c *Client) outgoing(ctx context.Context, table tableschema.TableName) (context.Context, error) {
	md := metadata.MD{}
	if c.cfg.token != nil {
		tok, err := c.cfg.token(ctx)
		if err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
		if tok != "" {
			md.Set(zerobus.HeaderAuthorization, "Bearer "+tok)
		}
	}
	if c.dialect == Zerobus && table.Table != "" {
		md.Set(zerobus.HeaderTableName, table.String())
	}
	return metadata.NewOutgoingContext(ctx, md), nil
}
