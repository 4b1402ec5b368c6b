// Package readers turns Parquet, CSV and Arrow IPC (file and stream) files into Arrow record batches.
//
// Work is split into units so that several files and units decode at once and a load can resume at
// unit granularity: a Parquet row group, a run of an IPC file's record batches, a whole CSV or IPC
// stream file. Reading a unit twice yields the same rows in the same order, so a resume can skip rows
// it already delivered. Memory is bounded by bytes: batches are sized to WithBatchBytes, never by a
// row count the file controls.
package readers
