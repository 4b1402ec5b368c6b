// Package delta reads and writes the transaction log of a Delta table on a local file system: the
// JSON actions of the Delta protocol (PROTOCOL.md of delta-io/delta), the 20-digit version file
// names, atomic creation of the next version (a hard link from a fsync'd temporary file, which fails
// if the version exists) and the replay of a log into table state.
//
// It knows nothing about Arrow or Parquet; package warehouse builds tables on top of it. Values are
// plain data and carry no locks: callers serialise access to a State themselves.
//
// Checkpoints are not supported: a log with a _last_checkpoint file is refused with
// ErrCheckpointUnsupported rather than replayed partially.
package delta
