package load

import (
	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/readers"
)

// This file holds what the pipeline does differently for object-store sources: the file identity
// in the manifest, the prefetch budget and the request counts of the summary.

// fileID is a file's identity in the manifest. A local file is its path, size and mtime; an object
// is its URL (bucket and key), size and ETag (or GCS generation), not its modification time, so an
// object rewritten with other bytes loads as a new file and one copied unchanged does not. Both
// carry the schema fingerprint.
func fileID(f readers.File, schema string) manifest.FileID {
	if f.Store != nil {
		return manifest.FileID{Path: f.Path, Size: f.Size, ETag: f.ETag, Schema: schema}
	}
	return manifest.FileID{Path: f.Path, Size: f.Size, ModTimeNano: f.ModTime.UnixNano(), Schema: schema}
}

// prefetchBudget counts object bytes fetched ahead of decoding (a Parquet row group's column
// chunks, an Arrow IPC unit's batches) in the in-flight budget. Each decoder's prefetch counts at
// most its share of half the budget, and units are fetched before a decoder asks for them (see
// readAhead), up to one per decoder for each file, only while the budget is at most a quarter held,
// so that prefetches never hold the bytes the frames they decode need: the fetches ahead use bytes
// that nothing else is asking for.
func prefetchBudget(p *pipeline) readers.Option {
	if p.budget == nil {
		return readers.WithPrefetchBudget(nil, 0, readers.AheadLimits{})
	}
	share := max(1, p.budget.Max()/int64(2*max(p.cfg.Decoders, 1)))
	return readers.WithPrefetchBudget(p.budget, share, readers.AheadLimits{Units: max(p.cfg.Decoders, 1), Bytes: p.budget.Max() / 4})
}

// readAhead tells src which of its units this run reads, in order (those of other shards and those
// a manifest has as loaded left out), so an object-store source fetches the next while the decoders
// work on the current ones, and never fetches a unit nobody reads.
func readAhead(src readers.Source, todo []readers.Unit) {
	ra, ok := src.(readers.ReadAheader)
	if !ok {
		return
	}
	units := make([]int, len(todo))
	for i, u := range todo {
		units[i] = u.Index
	}
	ra.ReadAhead(units)
}

// objectCounts is a Store's counts at one moment.
type objectCounts struct{ requests, bytes, retries int64 }

func objectStats(cfg *Config) objectCounts {
	if cfg.Objects == nil {
		return objectCounts{}
	}
	r, b := cfg.Objects.Stats()
	return objectCounts{r, b, cfg.Objects.Retries()}
}

// objectSummary records in sum the requests, bytes and retries of the run since start.
func objectSummary(sum *Summary, cfg *Config, start objectCounts) {
	if sum == nil || cfg.Objects == nil {
		return
	}
	now := objectStats(cfg)
	sum.ObjectRequests = now.requests - start.requests
	sum.ObjectBytes = now.bytes - start.bytes
	sum.ObjectRetries = now.retries - start.retries
}
