// Package bench measures the loader's throughput: how fast load.Run moves a dataset into a target
// over a sweep of stream and connection counts, against the ceilings that bound it and the rivals a
// user could run instead, all in one run on one machine. `loader bench` is its command line.
//
// # What is measured
//
// Every measurement runs Config.Repeat times; a configuration's figures are the minimum, median
// and maximum over its runs. Repeats are interleaved: each pass runs the decode ceiling, every
// loader configuration and the rivals (and their throttled runs) once, so a slow minute of a noisy
// machine spreads over all of them instead of sinking one. The transport and sink ceilings, which
// take the best loader configuration's streams, follow, alternating. Each run's figures are logged
// at info level (--log-level info).
//
//   - loader (end to end): load.Run, in this process, for each stream and connection count, into the
//     discard sink (or the remote Load.Endpoint), with Force and a fresh manifest directory so every
//     run reads, casts, encodes and sends the whole dataset.
//     The garbage collector is set as `loader load` sets it (internal/gctune) for each such run.
//   - decode ceiling: load.Decode over the same files and decoders: the load's own read, match and
//     cast, with the batches thrown away. No load can beat what it can decode.
//   - transport ceiling: frames encoded ahead of time (by load.Decode and the load's encoder; at most
//     256 MiB of them, sent again and again up to the dataset's framed size), sent by the loader's
//     own Flight client (flightclient.Client.Load) to the discard sink, at the streams and
//     connections of the best loader configuration. What the wire and the sink's validation allow.
//   - sink ceiling: the same frames into a durable sink (write-ahead log with fsync, then Delta):
//     the ingest rate of a real sink on this machine. The sink commits between runs, untimed.
//   - adbc: the ADBC Go Flight SQL driver's bulk ingest (append), one statement per file, reading
//     each file with pqarrow (or arrow-go's IPC readers) into an array.RecordReader: one stream.
//     Flight SQL ingest takes the file's own types and the sink casts them, so this client casts
//     nothing.
//   - handwritten: a plain arrow-go loop: per file, one flight.Writer on a Flight DoPut with a PATH
//     descriptor [catalog, schema, table], the batches cast to the table's canonical types with
//     arrow-go's compute (the sink's plain Flight dialect, like Zerobus, takes exactly those), the
//     PutResults drained. One stream.
//   - throttled (Config.Throttle): the stream sweep and both rivals again, against a sink that
//     limits every DoPut to Throttle.Rate bytes per second and holds every acknowledgement
//     Throttle.Latency, like a remote service. A throttled loader at N streams is compared with
//     min(N × rate, the unthrottled e2e figure). Each throttled loader run loads the dataset as
//     many times as it takes to last Throttle.Run at that expected rate (hard links of its files),
//     so that the streams' start and the slowest stream's end weigh as little as in a long load.
//
// The rivals batch their reads like the loader's frames (MaxFrameBytes of framed data per batch)
// and read Parquet and Arrow IPC; CSV datasets skip them with a note (arrow-go's csv.Reader reads
// no JSON lists or structs). Against a remote endpoint only the loader sweep and the decode ceiling
// run: the others need the benchmark's own sinks, and their figures are null.
//
// # How
//
// MB/s always has the same numerator: the dataset's size as the loader frames it (Arrow IPC bytes
// acknowledged, the Bytes of the first loader run's summary), in MB of 10^6 bytes, divided by the
// run's wall time. MB/s ratios are therefore ratios of times. The rivals put other bytes on the wire
// (ADBC the files' own types, which can be smaller than the table's); their MB/s still says how long
// they take to move the same rows. Rows/s divides the rows each run read or sent. CPU seconds per GB is this process's user+system CPU time over the run (getrusage
// RUSAGE_SELF: every goroutine of the client, none of the sinks, which are other processes) per GB
// of that same size. Sink CPU seconds per GB (results.csv's sink_cpu_s_per_gb) is the same for the
// local sink processes, read from /proc/PID/stat before and after the run (Linux only; empty for the
// decode ceiling and remote targets). Peak RSS is this process's VmHWM after the run; before it the heap is
// collected and returned to the OS and the kernel's counter is reset (writing 5 to
// /proc/self/clear_refs), so it is the run's own peak. Both are Linux (and, for CPU, Unix) figures;
// elsewhere they are unknown (null).
//
// # Sinks
//
// The local sinks are `loader serve` subprocesses of Config.Binary on 127.0.0.1 with a free port,
// each over its own temporary warehouse in which the table is first made with `loader table
// create`: a discard sink (--discard: validated and acknowledged, not stored), a durable one and,
// with a throttle, a throttled discard sink (--stream-rate-limit, --fault-ack-delay). All start
// before the first measurement, so a binary that lacks a flag fails at once, and all are stopped
// (SIGTERM, then a kill) before Run returns, on error and cancellation too; on Linux the kernel also
// kills them should this process die.
//
// # Output
//
// A Report holds every run. WriteFiles writes results.csv (one row per configuration, with gocsv),
// summary.json (Summary: the contract scripts read; every key always present, null when skipped),
// and the chart of median MB/s against streams as throughput.svg and throughput.png (gonum/plot).
// WriteTable renders the results as text. Run itself prints nothing: it reports each run through
// Config.Progress and, before writing into a remote table, Config.Writing.
//
// Run is not safe to call concurrently with itself in one process: its CPU and RSS figures are the
// process's.
package bench
