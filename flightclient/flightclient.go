// Package flightclient owns the wire: it sends encoded frames to a Flight target over parallel DoPut
// streams on a pool of gRPC connections, tracks durable acknowledgements, retries transient failures
// with backoff and replays what was not acknowledged on a fresh stream.
//
// API CONTRACT (written before the implementation; the implementer fills in the bodies and may add
// to it, but must not change these signatures without updating every caller).
//
// Dialects:
//   - zerobus: exactly the reference's protocol (schema frame with empty app_metadata, wait for READY,
//     {"offset_id":N} per frame from 0 on every DoPut, completion by ack_up_to_records, rotation on
//     close_stream_duration_ms, replay of the unacknowledged suffix on a new DoPut).
//   - flight: a PATH descriptor [catalog, schema, table]; acks from PutResult app_metadata when the
//     server sends the Zerobus ack JSON, else at the end of each bounded call.
//   - flightsql: CommandStatementIngest (append) in bounded calls; each completed call acknowledges
//     all its frames and is a resume point.
package flightclient

import (
	"context"
	"errors"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
)

// Dialect is a target protocol.
type Dialect string

// The dialects.
const (
	Zerobus   Dialect = "zerobus"
	Flight    Dialect = "flight"
	FlightSQL Dialect = "flightsql"
)

// ErrUnsupported means the target does not offer an optional capability (counting rows, describing a
// table, flushing), typically because it answered Unimplemented.
var ErrUnsupported = errors.New("not supported by the target")

// Option configures a Client.
type Option func(*config)

type config struct{}

// WithConnections sets the number of gRPC connections streams are spread over. Default 1; clamped to
// at least 1.
func WithConnections(n int) Option { panic("flightclient: not implemented") }

// WithToken sends "authorization: Bearer <token>" on every call.
func WithToken(token string) Option { panic("flightclient: not implemented") }

// WithMaxFrameBytes tells the client the largest frame it will send, so gRPC message limits are set to
// fit. Default partitioner.DefaultMaxFrameBytes.
func WithMaxFrameBytes(n int) Option { panic("flightclient: not implemented") }

// WithStreamCap bounds the unacknowledged bytes one stream may hold. Default 32 MiB.
func WithStreamCap(n int64) Option { panic("flightclient: not implemented") }

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { panic("flightclient: not implemented") }

// Client is a connection pool to one Flight endpoint. It is safe for concurrent use.
type Client struct{}

// New parses endpoint (grpc://host:port plaintext; grpc+tls://host:port or https://host[:port] with
// TLS, port 443 by default) and prepares the connection pool. It does no I/O.
func New(endpoint string, dialect Dialect, opts ...Option) (*Client, error) {
	panic("flightclient: not implemented")
}

// Close closes the connections.
func (c *Client) Close() error { panic("flightclient: not implemented") }

// Stats counts what a Load did.
type Stats struct {
	Streams   int
	Frames    int64
	Bytes     int64
	Retries   int64 // DoPuts reopened after a transient failure
	Rotations int64 // DoPuts reopened because the server asked
}

// Load sends every frame received on frames to the table over `streams` parallel DoPuts and returns
// once frames is closed and every frame has been acknowledged, or on the first fatal error (after
// stopping every stream). schemaMessage is the IPC schema message of the frames (see
// partitioner.Encoder.SchemaMessage) and enc decodes a frame when a partial acknowledgement forces a
// re-slice. acked is called exactly once per frame, after the target made all of its rows durable; it
// may be called from several goroutines at once.
func (c *Client) Load(ctx context.Context, table tableschema.TableName, schema *arrow.Schema, enc *partitioner.Encoder,
	streams int, frames <-chan *partitioner.Frame, acked func(*partitioner.Frame)) (Stats, error) {
	panic("flightclient: not implemented")
}

// Count returns the table's committed row count, first asking the target to commit what it has
// acknowledged. It returns ErrUnsupported when the target cannot count.
func (c *Client) Count(ctx context.Context, table tableschema.TableName) (int64, error) {
	panic("flightclient: not implemented")
}

// TableInfo describes a target table.
type TableInfo struct {
	ID     string // a stable identity of the table, "" if the target has none
	Schema *tableschema.Schema
}

// Describe returns the table's schema (and identity, where the target has one). It returns
// ErrUnsupported when the target cannot describe tables.
func (c *Client) Describe(ctx context.Context, table tableschema.TableName) (TableInfo, error) {
	panic("flightclient: not implemented")
}
