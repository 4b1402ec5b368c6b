// Package warehouse keeps Delta tables on local disk: a directory per table at
// DIR/catalog/schema/table holding Parquet data files and a _delta_log of JSON commits that follow the
// Delta protocol. It is the storage of the embedded sink, and a small local lakehouse on its own.
//
// # Storage mapping
//
// Batches handed to a Writer use the table's canonical Arrow schema (tableschema.Schema.Arrow), or a
// subset of it that passes zerobus.ValidateSchema (omitted nullable columns are written as nulls). In
// Parquet:
//
//	STRING, DECIMAL text    UTF8 BYTE_ARRAY / real Parquet DECIMAL (INT32 for p <= 9, INT64 for
//	                        p <= 18, FIXED_LEN_BYTE_ARRAY above, as Spark writes them)
//	BINARY                  BYTE_ARRAY
//	TINYINT .. BIGINT       INT32 (INT(8), INT(16)) / INT64
//	FLOAT, DOUBLE, BOOLEAN  FLOAT, DOUBLE, BOOLEAN
//	DATE                    INT32 DATE
//	TIMESTAMP               INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true)
//	TIMESTAMP_NTZ           INT64 TIMESTAMP(MICROS, isAdjustedToUTC=false)
//	ARRAY, MAP, STRUCT      the standard nested LIST, MAP and group layouts
//
// The canonical decimal text ("19.99", "-0.5", "+7") is parsed exactly by tableschema.ParseDecimal
// in its plain syntax: an optional sign, digits and an optional fraction. Text that is not a number,
// needs rounding to fit the scale, or has more integer digits than precision-scale allows is refused
// with an error wrapping ErrBadValue and the *tableschema.DecimalError that says why; it names the
// column and row but never the value. Each file also stores its Arrow schema, and a Scan returns
// the canonical Arrow schema again, decimals as text with exactly scale fractional digits.
//
// Every data commit adds one "add" action per Parquet file, with statistics (numRecords, minValues,
// maxValues, nullCount; see Writer.Commit), an optional "txn" action and a "commitInfo" action.
//
// # Durability and concurrency
//
// Commit fsyncs every data file, the table directory, the commit JSON and the _delta_log directory
// before it returns. The next version file is created atomically (a hard link from a fsync'd temporary
// file, which fails if the version exists); on conflict the committer re-reads the log and retries at
// the next version, up to WithCommitAttempts times. Commits through one *Warehouse to one table are
// also serialised in memory, so the retry path is only taken against other processes (or other
// *Warehouse values on the same directory). CreateTable fsyncs every directory it creates.
//
// A Warehouse, its Tables and Snapshot reads are safe for concurrent use; a Writer belongs to one
// goroutine. A Table caches the replayed log and reads only the versions that are new on later calls,
// so Count and Snapshot are cheap to call often.
//
// Every Writer ends with Commit or Abort (Abort after Commit does nothing, so `defer w.Abort()` is
// the idiom). Data files of a Writer that never got there (a crash) stay in the table directory but
// are never referenced by the log, so readers ignore them; nothing removes them yet.
//
// Limitations: tables are unpartitioned; the log is never checkpointed, and a table whose log holds a
// checkpoint (a _last_checkpoint file) is refused with an error rather than read partially.
//
// # Memory
//
// Batches passed to Writer.Write stay owned by the caller. Batches passed to the Scan callback are
// released when the callback returns; it retains them to keep them longer. Arrow memory comes from
// the allocator given by WithAllocator (default memory.DefaultAllocator).
package warehouse
