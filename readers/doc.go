// Package readers turns Parquet, CSV and Arrow IPC (file and stream) files into Arrow record batches.
//
// Work is split into units so that several files and units decode at once and a load can resume at
// unit granularity: a Parquet row group, a run of an IPC file's record batches, a byte range of an
// uncompressed CSV file, a whole compressed CSV file or IPC stream. Reading a unit twice yields the
// same rows in the same order, on every Open of the same file, so a resume can skip rows it already
// delivered. Memory is bounded by bytes: batches are sized to WithBatchBytes, never by a row count
// the file controls.
//
// # Finding files
//
// Discover expands files, directories and globs (with ** through
// github.com/bmatcuk/doublestar/v4) into a deterministic list: sources in the order given, each in
// lexical path order, without duplicates. Below a source, names starting with "." or "_" (_SUCCESS,
// _delta_log, .git) and *.crc files are skipped, as are files whose format cannot be told. The
// format comes from the extension and the magic bytes (PAR1 or PARE for Parquet, ARROW1 for an IPC
// file, 0xFFFFFFFF for an IPC stream, or a legacy length prefix; gzip and zstd magic for compressed
// CSV); magic bytes win over the extension. WithInclude and WithExclude filter with globs, and
// key=value directories between a source and a file are recorded as File.Partitions.
//
// # Object stores
//
// With WithObjectStore, sources may be s3://, gs:// and azblob:// URLs (a prefix, one object or a
// glob), found as local files are (the same skipping, filters, partitions and lexical order) by a
// paged listing; DiscoverFunc hands each file over as its page arrives. An object whose name says no
// format has its first 8 bytes read at discovery (16 at a time, in order); one whose name may hide
// another format (an IPC file name, .parquet, .csv) is checked by Open with the request Open makes
// first anyway, so magic bytes win over names for objects too (a stream's name is taken as given). Such a File's Path is its
// URL, and it carries its ETag and its objstore.Store, through which Open reads that version of it
// only (a rewritten object fails with objstore.ErrChanged). A Parquet object's footer comes with one
// suffix-range request and each row group's column chunks with merged, parallel ranged GETs, held
// in WithPrefetchBudget; an Arrow IPC file's units are prefetched alike (a unit's record batches in
// one GET). Told which units will be read (ReadAheader), these sources fetch the next unit while
// the current ones decode, with bytes the budget lends at once. CSV and IPC streams are read in
// order with read-ahead, and an object CSV is one unit.
//
// # Formats
//
// Parquet is read with arrow-go's parquet/file and pqarrow: one unit per row group, read in batches
// whose row count comes from the row group's uncompressed bytes per row, so a batch is about
// WithBatchBytes. Columns of a batch decode in parallel for wide files (WithParquetParallelism).
// Types come through as pqarrow gives them (decimals of every width, float16, unsigned integers,
// legacy lists, maps, structs): schemamatch casts them. Flat INT96 columns are the exception: they
// are read as timestamp[us, UTC] with Spark's arithmetic, so Spark's timestamps outside 1677-2262
// load (pqarrow refuses them as nanoseconds). Encrypted files fail with ErrEncrypted.
//
// An IPC file's unit is a run of consecutive record batches of about WithBatchBytes on disk; an IPC
// stream is one unit read in order. Dictionary-encoded columns are passed through (schemamatch
// unpacks them). Decoded batches are validated (offsets, buffer sizes, dictionary indices) so a
// corrupt file fails here, and batches larger than WithBatchBytes are handed out as zero-copy slices.
//
// Run-end encoded, string_view, binary_view, list_view and large_list_view columns (which only IPC
// files carry) are decoded, at any depth, to their plain types: the values' type, large_utf8,
// large_binary, list, large_list. Schema says so as every batch does: they are encodings of the same
// values, so nothing downstream (schemamatch, tableschema.FromArrow, the rescue column) needs to
// know them. Decoding runs a batch at a time, in slices of about WithBatchBytes decoded, with
// arrow-go's take and cast kernels.
//
// CSV is parsed by this package's RFC 4180 tokenizer into typed Arrow builders (see CSVOptions for
// the dialect: delimiter, quote, escape, comments, header or names, null markers, timestamp and date
// layouts, ragged rows, a BOM, CRLF, gzip and zstd). With WithTable, each column is parsed by header
// name straight into the table's canonical type (DECIMAL text is validated and normalised to the
// column's scale; ARRAY, MAP and STRUCT fields are JSON), and columns the table lacks are text.
// Without a table, as for a table created from the file, types are inferred from the first rows
// (InferRows): BIGINT, DOUBLE, BOOLEAN, DATE, TIMESTAMP (every value with a zone) or TIMESTAMP_NTZ,
// else STRING, each the narrowest type every sampled value parses as, null texts and empty fields
// aside; the rows then parse into those types as into a table's. A row that does not parse is a
// *RowError naming the file, line and column, never the value; with CSVOptions.OnBadRow such rows
// are handed to the caller (for a dead-letter file) and skipped.
//
// An uncompressed CSV file is cut into units by byte range, so that one big file decodes on every
// decoder: up to 16 units of equal nominal size, kept between 16 and 64 MiB (a file under 32 MiB
// is one unit, a 160 MiB file 10 units of 16 MiB, a 1 GiB file 16 of 64 MiB, a 10 GiB file 160 of
// 64 MiB). Smaller files are left whole because loads of many files keep every decoder busy with
// whole files, and a split costs a scan (below) of about half the text. The count depends on
// the file's size alone, never on the decoders or the machine, so a resume maps a unit index to the
// same rows. A unit starts at the first record boundary at or after its nominal start, that is a
// line start outside any quoted field, by the tokenizer's own rules (quotes, escapes, comments,
// blank lines, CRLF; the header stays in unit 0), so no record straddles two units, and the rows of
// the units in order are the rows of the file, with the file's line numbers in errors and bad
// rows. The boundary is found by the decoder of the unit before, which stops there, or, when that
// has not got there yet, by a quote-aware scan of the text before it that builds no fields
// (gigabytes a second); where both find it they must agree, or the unit fails. The scan cannot get
// past a syntax error (the tokenizer stops at one, so nothing defines the records after it): units
// after one fail with the same error. A unit whose start is far into the file (a resume of its last
// units) hands fn an empty batch every 32 MiB scanned, so callers watching for progress see some.
// Compressed CSV (gzip, zstd) and a dialect whose escape is a line end are one unit: a compressed
// text cannot be entered in the middle.
//
// arrow-go's arrow/csv is not used: its errors quote row values, do not name the row, and it has no
// escape character, ragged rows or per-row recovery, all of which loading real files needs.
//
// # Hive partitions
//
// With WithPartitionColumns (the default), a file's partition values are appended to every batch as
// columns after the file's own, typed by the table's column of that name (text otherwise);
// __HIVE_DEFAULT_PARTITION__ is a null. A file column of the same name wins.
//
// # Errors and bad files
//
// Every error of Open and ReadUnit is, or wraps, a *FileError naming the file and, when reading, the
// unit, so callers find them with errors.As; the errors of the caller's own callbacks (ReadUnit's fn,
// CSVOptions.OnBadRow) come back as they are. A file that cannot be decoded fails with an error
// wrapping ErrCorrupt: decoder errors, recovered decoder panics, and allocations over
// WithMaxAllocation (a corrupt length must not ask for terabytes; the Go runtime cannot recover from
// that). Every decode step runs under the context: when it is cancelled or its deadline passes,
// ReadUnit returns at once even if a decoder is stuck, and the stuck step's buffers are released when
// it ends. IPC message flatbuffers are bounds-checked before arrow-go parses them, and stream
// message sizes are capped by the file size: arrow-go v18.8.0 trusts vector lengths and ignores its
// own stream size limits, and the allocations that follow are fatal, not panics. Nothing leaks on
// error paths beyond what arrow-go itself leaks (some of its decoders and
// error paths leave buffers to the garbage collector; the tests check the loader adds none).
//
// Valid files arrow-go v18.8.0 cannot read, and which therefore fail with ErrCorrupt: Hadoop-LZ4
// Parquet, an empty compressed V2 data page, MAP columns whose keys are not required (Presto), an
// unknown logical type. Parquet page checksums, which arrow-go does not check, are verified here
// (WithVerifyChecksums) before a row group decodes, and page sizes are checked against
// WithMaxPageBytes: a valid file whose page is over it fails with a *PageTooLargeError, not
// ErrCorrupt, and reads with a larger limit (a page within the limit may need buffers over
// WithMaxAllocation, which its row group then gets).
//
// # Concurrency and memory
//
// A Source may be shared: ReadUnit calls for the same or different units run concurrently, each with
// its own decoders over the shared file handle and footer. Batches come from WithAllocator's
// allocator; ReadUnit releases each batch after fn returns, so fn must Retain what it keeps. Close
// the Source when done; ReadUnit calls must have returned by then.
package readers
