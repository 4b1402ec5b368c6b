// Package load runs the loader's main job: files in, rows durably in a table, nothing loaded twice by a
// re-run. It wires the pipeline of DESIGN.md together:
//
//	readers → schemamatch → partitioner → flightclient ⇒ target
//	                                ▲            │
//	                                └─ manifest ◄┘
//
// Units of every file (Parquet row groups, IPC batches, CSV byte ranges) are decoded by a bounded pool of
// workers; each batch is cast to the table's canonical schema by the plan of its source schema, cut
// into frames, and handed to the Flight client after the frame's bytes are taken from the in-flight
// budget. The client's acknowledgements record row ranges in the manifest and return the bytes. A
// slow target therefore stops the decoders instead of growing memory.
//
// Run never prints. Progress is published through a *Progress the caller may poll.
package load

import (
	"errors"
	"fmt"
	"github.com/loaderproject/loader/objstore"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
)

// Errors callers map to exit codes with errors.Is.
var (
	// ErrPartial means some files failed (and were skipped by the error policy) while others loaded.
	ErrPartial = errors.New("some files failed")
	// ErrVerify means the table's row growth does not match the rows acknowledged.
	ErrVerify = errors.New("verification failed")
	// ErrConfig is the base of errors in the configuration.
	ErrConfig = errors.New("invalid load configuration")
	// ErrStalled means a file's decoder made no progress for Config.StallTimeout; the file fails
	// under the error policy like any bad file.
	ErrStalled = errors.New("decoder stalled")
)

// OnError is the policy for a file that cannot be read or matched.
type OnError string

// The policies.
const (
	// OnErrorFail stops the whole load at the first bad file.
	OnErrorFail OnError = "fail"
	// OnErrorSkipFile skips the bad file, loads the rest and reports it; Run returns ErrPartial.
	OnErrorSkipFile OnError = "skip-file"
	// OnErrorQuarantine writes bad CSV rows (file, line, reason, fields) and failed files to NDJSON
	// files in QuarantineDir and goes on; Run returns ErrPartial when a file failed.
	OnErrorQuarantine OnError = "quarantine"
)

// Config describes one load. Zero values mean "default"; see applyDefaults.
type Config struct {
	Sources []string
	// Objects reads the sources that are object-store URLs (s3://, gs://, azblob://); nil when
	// every source is local. The caller owns it (and closes it); Summary counts its requests.
	Objects *objstore.Store
	Table   tableschema.TableName

	// Target is where the rows go (the embedded sink, see package embedded). When nil, Run makes the
	// remote target Endpoint names (NewRemote), in Protocol, with Token and UserAgent.
	Target    Target
	Endpoint  string
	Protocol  flightclient.Dialect
	Token     string
	UserAgent string
	// ClientOptions are added to the remote target's client options (per-table OAuth tokens, TLS
	// roots, a proxy dialer); they apply after Token and UserAgent.
	ClientOptions []flightclient.Option
	// CreateTable creates the table when the target does not have it, with TableSchema's columns or
	// the first file's canonical schema, where the target can create tables (the embedded sink,
	// Flight SQL). Where the target cannot say whether the table exists, it is asked to create it if
	// it does not.
	CreateTable bool
	// TableSchema declares the table's columns. It overrides what the target describes (a warning is
	// logged when the two differ), and is what is assumed for targets that cannot describe their
	// tables (Zerobus); without it, those take the first file's canonical schema.
	TableSchema *tableschema.Schema

	Streams          int
	Connections      int
	Decoders         int
	MaxFrameBytes    int
	MaxInflightBytes int64
	// Compression is the IPC body compression of frames (LZ4 or ZSTD, which Zerobus and the sink
	// accept). Default none: it pays only when the network, not the client's CPU, is the limit.
	Compression partitioner.Compression
	// MaxPageBytes bounds the uncompressed size of one Parquet page (readers.WithMaxPageBytes);
	// 0 keeps the readers' default of 1 GiB.
	MaxPageBytes int64
	// Limit loads only the first Limit rows (in file order) when positive.
	Limit int64

	// Include and Exclude filter the files found beneath directories and globs.
	Include, Exclude []string
	// Format, when set, is the format of every file found, whatever its name (see readers.WithFormat):
	// for exports whose files have no extension. Zero tells each file's format by its name and bytes.
	Format readers.Format
	// CSV is the dialect of CSV sources (OnBadRow is set by the load under OnErrorQuarantine).
	CSV readers.CSVOptions
	// SchemaMode, CaseInsensitive, RescueColumn and BinaryAsString configure schema reconciliation.
	SchemaMode      schemamatch.Mode
	CaseInsensitive bool
	RescueColumn    string
	BinaryAsString  bool

	// Force ignores the manifest and loads everything again.
	Force bool
	// ManifestDir holds the manifests. Default: the target's own place (the embedded sink keeps them
	// in its warehouse), else $XDG_STATE_HOME/loader/manifests.
	ManifestDir string
	// ManifestLockTimeout applies to a manifest in object storage (ManifestDir an s3://, gs:// or
	// azblob:// URL): how long a run watches a lock that shows no heartbeat before it takes it over
	// (its holder was killed). Default 30 s.
	ManifestLockTimeout time.Duration
	OnError             OnError
	// Shard, when set, makes this load one shard of several: its manifest lives in the shard's
	// subdirectory of ManifestDir (Shard.Name), and a manifest of another shard count for the same
	// table is refused (*ShardCountError) unless Force. Select picks the shard's files.
	Shard *Shard
	// Select, when set, picks the files and units this load takes from those discovered
	// (HashSelector, ShardPlan.Selector).
	Select Selector
	// QuarantineDir receives the dead-letter files of OnErrorQuarantine, in a subdirectory per run.
	// Default ./quarantine.
	QuarantineDir string
	// StallTimeout stops a unit whose decoder makes no progress for this long (time spent waiting
	// for the target does not count). Default 5 minutes.
	StallTimeout time.Duration
	// AckTimeout is how long a stream waits for the acknowledgement of its oldest unacknowledged
	// frame before it reconnects and sends the rest again. Default 60 s, as the Zerobus SDKs.
	AckTimeout time.Duration
	// Retries is how many consecutive transient failures a stream survives (0: default 4; negative:
	// none); RetryBackoff is the first backoff, doubled each attempt up to 30 s, with jitter
	// (default 2 s).
	Retries      int
	RetryBackoff time.Duration

	// Allocator allocates the pipeline's Arrow buffers (decoded batches, their casts, the encoder's
	// scratch); tests pass a checked allocator to catch leaks. Default: a pool of Go memory of the
	// run's own (internal/bufpool, zeroed like Go's), which hands the buffers each batch releases to
	// the next instead of asking Go for new ones: the pipeline frees every buffer it is done with
	// and uses none after.
	Allocator memory.Allocator
	Logger    *slog.Logger
	Progress  *Progress
	// StreamOptions are added to the options of the streams' Flight client, whatever the target
	// (flightclient.WithEvents, for metrics).
	StreamOptions []flightclient.Option
}

// The defaults, for callers (the CLI's flags) to show; applyDefaults applies them.
const (
	DefaultProtocol         = flightclient.Zerobus // the main target (issue 3)
	DefaultStreams          = 4                    // enough to hide one stream's ack latency; more rarely helps on one machine
	DefaultMaxInflightBytes = 256 << 20            // issue 3's default memory bound
	DefaultStallTimeout     = 5 * time.Minute      // far beyond any healthy unit's decode time, short of forever
	DefaultQuarantineDir    = "quarantine"
)

// applyDefaults checks the configuration and fills in the defaults; needTarget says a target is
// required (Run and Plan; Decode sends nothing).
func (c *Config) applyDefaults(needTarget bool) error {
	if len(c.Sources) == 0 {
		return errors.Join(ErrConfig, errors.New("no sources given"))
	}
	if needTarget && c.Target == nil && c.Endpoint == "" {
		return errors.Join(ErrConfig, errors.New("no target: give an endpoint or a Target"))
	}
	if c.Protocol == "" {
		c.Protocol = DefaultProtocol
	}
	if _, err := flightclient.ParseDialect(string(c.Protocol)); err != nil {
		return errors.Join(ErrConfig, err)
	}
	if c.Streams <= 0 {
		c.Streams = DefaultStreams
	}
	if c.Connections <= 0 {
		c.Connections = min(c.Streams, 8) // one HTTP/2 connection per stream, up to a point: one connection is a bottleneck
	}
	if c.Decoders <= 0 {
		c.Decoders = runtime.GOMAXPROCS(0) // one decoder per core keeps the CPUs busy without oversubscribing
	}
	if c.Limit > 0 {
		c.Decoders = 1 // "the first N rows" must be the same rows on every run
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = partitioner.DefaultMaxFrameBytes
	}
	if c.MaxInflightBytes <= 0 {
		c.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if c.OnError == "" {
		c.OnError = OnErrorFail
	}
	switch c.OnError {
	case OnErrorFail, OnErrorSkipFile, OnErrorQuarantine:
	default:
		return errors.Join(ErrConfig, fmt.Errorf("error policy %q, want fail, skip-file or quarantine", c.OnError))
	}
	if c.QuarantineDir == "" {
		c.QuarantineDir = DefaultQuarantineDir
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if err := c.CSV.Check(); err != nil {
		return errors.Join(ErrConfig, err)
	}
	if c.Allocator == nil {
		c.Allocator = bufpool.New() // this run's; see Allocator
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Progress == nil {
		c.Progress = &Progress{}
	}
	return nil
}

// Summary is the outcome of a load; its JSON form is the contract of `loader load --json`: the keys
// files, rows, bytes, seconds, rows_per_second, bytes_per_second, streams, retries, skipped_units and
// verified_rows are agreed and must not change; the others may grow.
type Summary struct {
	Files          int     `json:"files"`
	Rows           int64   `json:"rows"`
	Bytes          int64   `json:"bytes"`
	Seconds        float64 `json:"seconds"`
	RowsPerSecond  float64 `json:"rows_per_second"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	Streams        int     `json:"streams"`
	Retries        int64   `json:"retries"`
	SkippedUnits   int64   `json:"skipped_units"`
	// PossiblyDuplicatedRows counts rows this run sent again while an earlier send's fate was
	// unknown (after a crash of an earlier run, a fault, an ack timeout or a rotation): the target
	// may hold them twice. Always 0 against a target that stores each unit range once (the embedded
	// sink); then Deduplicated is true. The manifest lists the ranges by file (loader status).
	PossiblyDuplicatedRows int64 `json:"possibly_duplicated_rows"`
	Deduplicated           bool  `json:"deduplicated"`
	// VerifiedRows is the table's row growth during the load, nil when it was not verified; then
	// NotVerified says why ("the load failed", or why the target cannot count).
	VerifiedRows *int64 `json:"verified_rows"`
	NotVerified  string `json:"not_verified,omitempty"`
	// VisibleAfterSeconds is how long after the last acknowledgement the rows became visible to
	// queries, when a Counter verified the load (VerifyVisible); VerifyWarning says why the count
	// differs from the rows acknowledged (not yet visible, or possible duplicates).
	VisibleAfterSeconds *float64 `json:"visible_after_seconds,omitempty"`
	VerifyWarning       string   `json:"verify_warning,omitempty"`

	// Every row read is loaded, quarantined or refused (or, after an interrupt, unsent):
	// RowsRead = Rows + RowsQuarantined + RowsRefused. Rows skipped as already loaded are not read.
	RowsRead        int64 `json:"rows_read"`
	RowsQuarantined int64 `json:"rows_quarantined"`
	RowsRefused     int64 `json:"rows_refused"`

	// FailedFiles lists the files skipped by OnErrorSkipFile or OnErrorQuarantine, with their
	// reasons.
	FailedFiles []FileFailure `json:"failed_files,omitempty"`
	// QuarantineDir is where this run's dead-letter files are, when it wrote any.
	QuarantineDir string `json:"quarantine_dir,omitempty"`
	Target        string `json:"target,omitempty"`
	Table         string `json:"table,omitempty"`
	// Shard is the shard this load was, and where its index and count came from; nil when the
	// load was not sharded.
	Shard *Shard `json:"shard,omitempty"`
	// Error is why the load failed (or, with failed files, was partial); empty on success.
	Error string `json:"error,omitempty"`

	// ObjectRequests and ObjectBytes count the object-store requests made (list pages, GETs,
	// HEADs; the SDK's retries not counted) and the object bytes read by this run; 0 without
	// object-store sources. ObjectBytes / Bytes is the read amplification.
	ObjectRequests int64 `json:"object_requests,omitempty"`
	ObjectBytes    int64 `json:"object_bytes,omitempty"`
	// ObjectRetries counts the GETs sent again for the rest of a range whose response broke off
	// (a reset or closed connection) or stalled, included in ObjectRequests.
	ObjectRetries int64 `json:"object_retries,omitempty"`
}

// FileFailure is a file that could not be loaded.
type FileFailure struct {
	Path  string `json:"path"`
	Error string `json:"error"`
	// RowsLoaded counts the file's rows that were loaded before it failed (units that completed
	// earlier, or frames already acknowledged).
	RowsLoaded int64 `json:"rows_loaded"`

	err error
}

// Err returns the failure as an error, for errors.Is and errors.As.
func (f FileFailure) Err() error { return f.err }

// Progress holds live counters of a running load. All fields are safe to read at any time.
type Progress struct {
	FilesTotal   atomic.Int64 // files found so far: it grows while Listed is false
	Listed       atomic.Bool  // discovery has ended: FilesTotal and SourceBytes are final
	FilesDone    atomic.Int64
	SourceBytes  atomic.Int64 // on-disk bytes of every unit to load
	SourceDone   atomic.Int64 // on-disk bytes of units fully read
	RowsRead     atomic.Int64 // rows decoded (and bad rows quarantined)
	Quarantined  atomic.Int64 // bad rows written to the dead-letter folder
	Rows         atomic.Int64 // rows acknowledged
	Bytes        atomic.Int64 // frame bytes acknowledged
	SkippedUnits atomic.Int64
	FilesFailed  atomic.Int64 // files that failed (skipped under the error policy, or stopping the load)
	InFlight     atomic.Int64 // frame bytes sent and not yet acknowledged
	// InFlightPeak is the most frame bytes ever sent but not yet acknowledged at once; it stays within
	// MaxInflightBytes (plus one frame, when a single frame exceeds the budget).
	InFlightPeak atomic.Int64
	started      atomic.Int64 // unix nanos
}

// Started returns when the data phase began, or the zero time before it.
func (p *Progress) Started() time.Time {
	if n := p.started.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}
