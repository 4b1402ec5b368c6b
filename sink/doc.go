// Package sink is the embedded target: a real Arrow Flight server with Databricks Zerobus Ingest
// semantics that writes Delta tables through package warehouse.
//
// The server speaks three dialects on one gRPC port:
//   - Zerobus: DoPut with the x-databricks-zerobus-table-name header, exactly as the project's
//     reference/zerobus-arrow-flight.md describes (schema frame, READY, offset_id frames, cumulative
//     JSON acks after durability).
//   - Plain Flight: DoPut whose first FlightData has a PATH descriptor [catalog, schema, table]; same
//     validation and ack JSON, READY after the schema, and offset_id optional (sequential when given).
//   - Flight SQL: CommandStatementIngest (bulk ingest) with TableDefinitionOptions, GetSqlInfo
//     advertising bulk ingestion. Other Flight SQL commands answer Unimplemented.
//
// Reading back: DoGet with a ticket whose bytes are a table name streams the committed rows in the
// canonical schema; GetFlightInfo and GetSchema with a PATH descriptor describe the table; ListFlights
// lists every table; the actions in internal/sinkapi count, flush, describe and set faults.
//
// # Setup order of a Zerobus DoPut
//
// auth (Unauthenticated) → the table-name header (InvalidArgument when missing) → the table exists
// (NotFound) → the schema frame (an IPC Schema message with empty app_metadata and no body, else
// InvalidArgument) → zerobus.ValidateSchema (InvalidArgument with the SCHEMA_VALIDATION_FAILED
// ErrorInfo) → READY. Data frames must be IPC RecordBatch messages numbered by offset_id from 0;
// anything else ends the call with InvalidArgument naming the offset. Frames over
// zerobus.MaxMessageBytes are refused by gRPC (ResourceExhausted).
//
// # Durability
//
// A data frame is acknowledged only after it is in the table's write-ahead log (package
// sink/internal/wal, under <table>/_sink/wal) and fsync'd; the log batches the appends of every stream
// into one write and one fsync (group commit). Each log record is self-contained: the stream's IPC
// schema message and the frame's RecordBatch message exactly as received (LZ4 or ZSTD bodies stay
// compressed), plus the row count. A committer per table turns durable records into one Delta commit
// per commit interval, carrying the Delta txn action {appId: "loader-sink-wal", version: last sequence
// number}; after the commit it deletes fully committed log segments. On start, Serve commits every
// record above the table's txn version, so a crash between a Delta commit and the segment cleanup
// does not commit rows twice, and a crash before the commit loses nothing acknowledged. Records that
// no longer fit the table (its schema was replaced after they were acknowledged) are moved to
// <table>/_sink/rejected as Arrow IPC streams and logged as errors, as Zerobus moves such rows to
// _zerobus/table_rejected_parquets. Each table's log is locked with flock: a second sink over the same
// warehouse fails to start (or to open that table) with a clear error instead of sharing the log.
// Flight SQL ingest does not use the log: the call commits before it returns its row count, or, when
// the command carries a transaction id (BeginTransaction), stages its rows until EndTransaction
// commits them in one Delta commit or drops them. A transaction takes one ingest call; transactions
// still open at Shutdown are rolled back.
//
// # Acks
//
// Acks are cumulative {"ack_up_to_offset":K,"ack_up_to_records":R} and are sent by one goroutine per
// stream (gRPC allows one sender), which coalesces acks that become durable together. After the
// client half-closes, the remaining acks follow and the call ends OK. On Shutdown, a stream stops
// reading, acknowledges what is durable, and ends with Unavailable so the client reconnects later.
//
// # Auth and faults
//
// With tokens configured (WithTokens), every RPC needs "authorization: Bearer <token>", else
// Unauthenticated. Faults (WithFaults, SetFaults, or the sinkapi.ActionFaults action) inject stream
// drops, ack delays, silent calls, rotation requests and Unavailable calls deterministically, for
// clients' recovery tests; they are off by default. The action is served only with WithTestFaults
// (loader serve --test-faults); otherwise it answers PermissionDenied, so no client can inject faults
// into a production sink.
//
// # Memory
//
// Each stream keeps at most 64 MiB of received frames waiting for the log; the log's queue is
// bounded too, so a slow disk throttles clients through gRPC flow control. Decoding one frame may
// allocate at most 256 MiB (in Flight SQL ingest: what the call's decoder holds at once, dictionaries
// included); a compressed frame that claims more is refused, in every dialect. The committer streams
// log records through a warehouse Writer one at a time and commits at most 256 MiB of log per Delta
// commit.
//
// # Concurrency
//
// A Server is safe for concurrent use. New does no I/O; Serve recovers and serves; Shutdown ends it.
// Everything the server starts ends before Shutdown returns.
//
// # Standing in for a Databricks workspace
//
// With [WithOAuth] (and optionally [WithTLS]) the server splits its one listener by content type:
// gRPC (HTTP/2 with content-type application/grpc) goes to Flight, everything else to an HTTP server
// with the OIDC token endpoint (POST /oidc/v1/token: client credentials, Basic auth,
// authorization_details checked against the warehouse) and the SQL Statement Execution API
// (SELECT count(*) [, max(col)] FROM a table, over committed rows only). Flight then accepts only
// the tokens it issued (HS256, signed with a key made at start), a Zerobus DoPut only for a table its
// token grants (PermissionDenied with error 4024 otherwise), and refuses the sink's own actions on
// Zerobus calls, as the service has none.
//
// # Exactly-once by unit id
//
// The sinkapi.ActionUnitIDs action ("loader.unit-ids") tells a loader the sink stores each unit range
// once (WithUnitIDs(false) turns it off). The loader then tags every data frame's app_metadata with
// {"unit":"<id>","from":F,"to":T} next to its offset_id: the frame holds rows [F, T) of the source
// unit <id> (file version, unit index and manifest epoch). The sink keeps, per table, the ranges of
// every unit it holds; a frame's rows already held, or on their way into the log from another
// stream, are not stored again, and the frame is acknowledged once the records holding them are
// durable. The rest of the frame is logged with its unit id and kept ranges in the record's meta
// section (the same record as its rows), and the Delta commit that takes the record adds, in the
// same commit as the rows, one txn action per merged range: appId "loader-unit:<id>@<F>", version
// <T>. After a restart the ranges come back from the table's txn actions and the uncommitted log
// records, so a loader or sink killed at any moment, then run again, leaves each row once.
package sink
