// Package flightclient owns the wire: it sends encoded frames to a Flight target over parallel DoPut
// streams on a pool of gRPC connections, tracks durable acknowledgements, retries transient failures
// with backoff and replays what was not acknowledged on a fresh stream.
//
// # Dialects
//
//   - [Zerobus]: exactly the protocol of Databricks Zerobus Ingest's Arrow Flight endpoint (the
//     project's reference/zerobus-arrow-flight.md, sections 1, 2 and 6). Each DoPut carries the
//     x-databricks-zerobus-table-name and authorization headers; its first FlightData is the IPC
//     schema message with empty app_metadata; the client waits for READY
//     ({"ack_up_to_offset":-1,"ack_up_to_records":0}) before sending data frames numbered
//     {"offset_id":N} from 0 on every DoPut; a frame is complete when the cumulative
//     ack_up_to_records reaches its last row; close_stream_duration_ms makes the stream rotate.
//   - [Flight]: the first FlightData carries a PATH descriptor [catalog, schema, table] with the schema.
//     Frames carry offset_id metadata too. Acks are read as Zerobus ack JSON when the server sends
//     them (a READY is tolerated); a server that sends none acknowledges a call's frames when the call
//     ends OK, so calls are bounded (see [WithCallBytes]) to give resume points.
//   - [FlightSQL]: each call is a DoPut whose descriptor is a CMD holding a CommandStatementIngest
//     (append to an existing table, or create it with [WithCreateTable]); the PutResult's
//     DoPutUpdateResult acknowledges all of the call's frames at once. Calls are bounded by bytes and
//     closed early when no frame arrives for a short while ([WithIdleFlush]), so acknowledgements
//     (and the caller's memory budget) never stall.
//
// Each dialect is one type, chosen once in New, in two halves: the DoPut protocol (descriptor,
// headers, READY, frame metadata, what a PutResult means, when a call's frames count as acknowledged)
// and the table operations outside the DoPut ([Client.Describe], [Client.Count], [Client.Create]).
// Zerobus and Flight use the embedded sink's actions for those (a real Zerobus endpoint answers
// Unimplemented: it cannot describe, count or create). Flight SQL uses standard Flight SQL only, so it
// works with servers that are not ours: GetTables (include_schema) to describe, matching the table by
// exact name and accepting servers without catalogs or schemas (SQLite); SELECT count(*) FROM the
// table (CommandStatementQuery), named as GetTables reported it, to count, unless the server's SqlInfo
// says it runs no SQL; an ingest call of no rows with TABLE_NOT_EXIST_OPTION_CREATE to create. What a
// server does not implement comes back as an [*UnsupportedError] saying why (errors.Is
// [ErrUnsupported]); a table it does not have as [ErrTableNotFound].
//
// In the dialects that acknowledge at the end of a call, a call also ends when the stream's
// unacknowledged bytes reach the stream cap, so a call carries at most min(WithCallBytes,
// WithStreamCap) bytes (plus one frame).
//
// # Streams, acknowledgements and replay
//
// [Client.Load] runs one goroutine per stream. A stream opens its DoPut when its first frame arrives,
// then pulls frames from the shared channel while its unacknowledged bytes are below the per-stream
// cap ([WithStreamCap]), so a slow stream takes fewer frames and a slow target stops all of them. Each
// DoPut has its own receiver goroutine that parses acknowledgements and reports completed frames in
// order; Send is only ever called by the stream goroutine.
//
// On a transient failure (zerobus.Retryable: Unavailable, Internal, a broken connection, an ack that
// did not come within [WithAckTimeout], no READY within [WithReadyTimeout]...) the stream backs off
// exponentially with jitter ([WithRetry]), opens a new DoPut and replays the frames that were not
// acknowledged, in order, with offsets from 0 again. A frame that the last acknowledgement covered only
// in part is decoded, sliced and re-encoded so that only its unacknowledged rows are sent again; the
// acked callback still receives the original frame, once, when all its rows are durable. Delivery is
// at least once: a target may have stored rows it never acknowledged.
//
// Fatal errors stop every stream: a schema mismatch (the error carries the gRPC status, so
// zerobus.AsSchemaError recovers the causes), authentication, a missing table, a protocol violation
// (an acknowledgement of more rows than were sent, an answer that is not an ack) or retries exhausted.
//
// # Frames and memory
//
// A frame's bytes go to the socket without being copied: the DoPut codec references the body as it is.
// Frames must therefore not be modified once they were sent on the channel, for as long as Load runs
// (the partitioner never modifies a frame). A partly acknowledged frame that must be re-sliced is
// decoded and re-encoded into new frames; the original is left untouched and is still the one
// reported.
//
// # Protocol details
//
// A repeated READY after setup is ignored (it acknowledges nothing). ack_up_to_offset is not used to
// complete frames, only ack_up_to_records, as in the SDKs. An ack of more records than were sent on the
// DoPut, an answer that is not ack JSON, or a first answer that is not READY is a protocol violation
// (an error wrapping zerobus.ErrProtocol) and stops the load: replaying into a server whose count we
// cannot trust could lose rows. A Flight SQL DoPutUpdateResult whose record count is neither -1
// (unknown) nor the number of rows the call sent is treated the same way.
//
// # Cancellation and leaks
//
// When ctx ends, Load cancels every call and returns ctx's error promptly. Every goroutine Load starts
// has ended when it returns, and acked is never called after that. Frames acknowledged before the end
// were reported. Nothing reads the frames channel after Load returns: the producer must stop on its
// own (typically by cancelling its context when Load fails).
//
// # Connections
//
// [New] parses the endpoint and creates the pool of gRPC connections with grpc.NewClient, which does
// no I/O: connections are made on first use. Streams are assigned round-robin over the connections;
// several connections avoid the single-HTTP/2-connection bottleneck. Message size limits are set from
// the frame limit plus headroom. TLS uses the system roots unless [WithTLSConfig] is given.
//
// # Authentication, TLS and proxies
//
// [WithTableTokens] takes a [TokenSource] that gives each call a token for its table (Zerobus tokens
// are table-scoped); it is asked on every DoPut opened, reconnections included, so a source that
// refreshes before expiry keeps long loads running. A DoPut refused as Unauthenticated invalidates the
// table's token and is tried once more. A server certificate that fails verification stops the load
// with a [*TLSError] instead of being retried. [WithDialer] connects through a dialer that gets the
// endpoint's host name unresolved, such as an HTTP CONNECT proxy's. [Client.Probe] opens a schema-only
// DoPut to check that a table takes a schema.
package flightclient
