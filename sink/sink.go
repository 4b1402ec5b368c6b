// Package sink is the embedded target: a real Arrow Flight server with Databricks Zerobus Ingest
// semantics that writes Delta tables through package warehouse.
//
// API CONTRACT (written before the implementation; the implementer fills in the bodies and may add
// to it, but must not change these signatures without updating every caller).
//
// The server speaks three dialects on one gRPC port:
//   - Zerobus: DoPut with the x-databricks-zerobus-table-name header, exactly as the reference
//     describes (schema frame, READY, offset_id frames, cumulative JSON acks after durability).
//   - Plain Flight: DoPut whose first FlightData has a PATH descriptor [catalog, schema, table]; same
//     validation and ack JSON.
//   - Flight SQL: CommandStatementIngest (bulk ingest) with TableDefinitionOptions, GetSqlInfo
//     advertising bulk ingestion.
//
// Reading back: DoGet with a ticket whose bytes are a table name streams the committed rows in the
// canonical schema; GetFlightInfo with a PATH descriptor describes the table; the actions in
// internal/sinkapi count, flush, describe and set faults.
//
// Durability: a data frame is acknowledged only after it is in the table's write-ahead log and
// fsync'd (group commit). A committer turns the log into Delta commits every commit interval; the
// commit records the last log sequence number as a Delta txn action, so recovery after a crash
// commits each acknowledged row exactly once.
package sink

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// Server is the embedded sink. Create it with New, run it with Serve, stop it with Shutdown.
type Server struct{}

// Option configures a Server.
type Option func(*config)

type config struct{}

// WithTokens limits access to callers presenting one of these bearer tokens ("authorization: Bearer
// T"). With none, every caller is accepted.
func WithTokens(tokens ...string) Option { panic("sink: not implemented") }

// WithCommitInterval sets how often acknowledged rows are committed to Delta. Default 1s; values
// below 10ms are raised to 10ms.
func WithCommitInterval(d time.Duration) Option { panic("sink: not implemented") }

// WithDiscard makes the server validate and acknowledge data without storing it, for client
// benchmarks. The server logs a warning when it starts in this mode.
func WithDiscard(discard bool) Option { panic("sink: not implemented") }

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { panic("sink: not implemented") }

// WithFaults installs a fault set from the start.
func WithFaults(f Faults) Option { panic("sink: not implemented") }

// Faults are test hooks; the zero value injects nothing. They apply to Zerobus and plain Flight DoPuts.
type Faults struct {
	// DropAfterFrames ends each DoPut with Unavailable after it has received this many data frames,
	// without acknowledging the frames not yet acknowledged. 0 disables.
	DropAfterFrames int `json:"drop_after_frames,omitempty"`
	// DropCalls limits DropAfterFrames to the next this-many DoPuts (0: every DoPut).
	DropCalls int `json:"drop_calls,omitempty"`
	// AckDelay holds every ack back this long.
	AckDelay time.Duration `json:"ack_delay,omitempty"`
	// RotateAfterFrames sends close_stream_duration_ms (RotateGrace) with the ack that follows this
	// many data frames on each DoPut. 0 disables.
	RotateAfterFrames int           `json:"rotate_after_frames,omitempty"`
	RotateGrace       time.Duration `json:"rotate_grace,omitempty"`
	// UnavailableCalls refuses the next this-many DoPut calls with Unavailable before reading them.
	UnavailableCalls int `json:"unavailable_calls,omitempty"`
}

// New returns a server over the warehouse. It does no I/O.
func New(wh *warehouse.Warehouse, opts ...Option) *Server { panic("sink: not implemented") }

// Serve recovers every table's write-ahead log (committing acknowledged rows not yet in Delta), then
// serves Arrow Flight on lis until Shutdown. It returns nil after a Shutdown.
func (s *Server) Serve(lis net.Listener) error { panic("sink: not implemented") }

// Ready is closed once Serve has finished recovery and accepts calls.
func (s *Server) Ready() <-chan struct{} { panic("sink: not implemented") }

// Shutdown stops accepting calls, lets in-flight calls end cleanly, commits every acknowledged row and
// closes the logs. If ctx ends first, remaining calls are cut off; acknowledged rows stay durable in
// the log either way.
func (s *Server) Shutdown(ctx context.Context) error { panic("sink: not implemented") }

// SetFaults replaces the fault set.
func (s *Server) SetFaults(f Faults) { panic("sink: not implemented") }

// Flush commits every acknowledged row of the table to Delta now.
func (s *Server) Flush(ctx context.Context, name tableschema.TableName) error {
	panic("sink: not implemented")
}

// PendingRows returns how many rows of the table are durable in its write-ahead log but not yet
// committed, reading the log on disk without taking it over (for `loader table count --json` while no
// server, or another server, runs).
func PendingRows(ctx context.Context, t *warehouse.Table) (int64, error) {
	panic("sink: not implemented")
}
