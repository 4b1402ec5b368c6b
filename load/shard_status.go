package load

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/readers"
)

// ErrShardsNotDone means a shard status found shards with work left (or running, or failing).
var ErrShardsNotDone = errors.New("not every shard is done")

// The states of a shard in a ShardsReport.
const (
	ShardDone       = "done"        // every unit of its share is acknowledged
	ShardPending    = "pending"     // its manifest has work left, and no loader holds it
	ShardRunning    = "running"     // a loader holds its manifest now
	ShardNotStarted = "not started" // it has no manifest yet
	ShardFailed     = "failed"      // files of its share cannot be opened
)

// ShardStatus is one shard's progress, from its manifest.
type ShardStatus struct {
	Shard int    `json:"shard"`
	State string `json:"state"`
	// Manifest is the shard's manifest file.
	Manifest string `json:"manifest"`
	Files    int    `json:"files"`
	Units    int    `json:"units"`
	// UnitsDone are acknowledged in full; UnitsPending are not (started or not). Units of a
	// running shard are not read (its loader holds the manifest) and count as pending.
	UnitsDone    int `json:"units_done"`
	UnitsPending int `json:"units_pending"`
	// FailedFiles lists the files of the share that cannot be opened, with the reason.
	FailedFiles []FileFailure `json:"failed_files,omitempty"`
	// Rows are the rows the manifest records as acknowledged; Bytes the source bytes of the units
	// done, of BytesTotal in the share.
	Rows       int64 `json:"rows"`
	Bytes      int64 `json:"bytes"`
	BytesTotal int64 `json:"bytes_total"`
}

// ShardsReport merges the manifests of every shard of a load.
type ShardsReport struct {
	Table  string        `json:"table"`
	Count  int           `json:"shards"`
	Done   int           `json:"done"`
	Shards []ShardStatus `json:"shard_status"`
	Rows   int64         `json:"rows"`
	Bytes  int64         `json:"bytes"`
}

// StatusShards reports the progress of every shard of the load cfg describes: cfg.Sources, table and
// target as for Run (the target is asked for the table's identity, nothing is sent), cfg.ManifestDir,
// and count shards, each choosing its share with selectorFor(k) (HashSelector, or a ShardPlan's). It
// reads each shard's manifest without changing it, except when no loader holds it: then it is opened
// (and so locked) for the time of the read. It returns the report with ErrShardsNotDone when any
// shard is not done.
func StatusShards(ctx context.Context, cfg Config, count int, selectorFor func(k int) (Selector, error)) (*ShardsReport, error) {
	if err := cfg.applyDefaults(true); err != nil {
		return nil, err
	}
	if count < 1 {
		return nil, &ShardError{Reason: fmt.Sprintf("%d shards: want at least 1", count)}
	}
	all, tgt, tbl, err := dryRunSetup(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer tgt.Close(context.WithoutCancel(ctx))
	base := manifestDir(&cfg, tgt)
	p := &pipeline{cfg: &cfg, table: tbl, plans: map[string]*planResult{}}
	rep := &ShardsReport{Table: cfg.Table.String(), Count: count}
	for k := range count {
		sel, err := selectorFor(k)
		if err != nil {
			return nil, err
		}
		st, err := p.shardStatus(ctx, sel, base, manifestKey(tgt, tbl), k, count, all)
		if err != nil {
			return nil, err
		}
		if st.State == ShardDone {
			rep.Done++
		}
		rep.Rows += st.Rows
		rep.Bytes += st.Bytes
		rep.Shards = append(rep.Shards, st)
	}
	if rep.Done < count {
		return rep, fmt.Errorf("%w: %d of %d shards are done", ErrShardsNotDone, rep.Done, count)
	}
	return rep, nil
}

func (p *pipeline) shardStatus(ctx context.Context, sel Selector, base, key string, k, n int, all []readers.File) (ShardStatus, error) {
	c := *p.cfg
	c.Shard, c.Force = &Shard{Index: k, Count: n}, true
	dir, err := shardManifestDir(ctx, &c, base, key, c.Table.String())
	if err != nil {
		return ShardStatus{}, err
	}
	m, closeManifest, path, err := peekManifest(ctx, &c, dir, key)
	st := ShardStatus{Shard: k, Manifest: path}
	switch {
	case err == nil:
		defer func() { _ = closeManifest() }()
	case errors.Is(err, manifest.ErrLocked):
		st.State = ShardRunning
	case errors.Is(err, os.ErrNotExist):
		st.State = ShardNotStarted
	default:
		return ShardStatus{}, err
	}
	files, err := sel.Files(all)
	if err != nil {
		return ShardStatus{}, err
	}
	st.Files = len(files)
	p.eachOpened(ctx, files, func(f readers.File, src readers.Source, err error) {
		if err != nil {
			st.FailedFiles = append(st.FailedFiles, FileFailure{Path: f.Path, Error: err.Error(), err: err})
			return
		}
		id := fileID(f, fingerprint(src.Schema()))
		id.Layout = layout(src.Units()) // as the load records it
		for _, u := range src.Units() {
			if !sel.Unit(f, u.Index) {
				continue
			}
			st.Units++
			st.BytesTotal += u.Bytes
			if m == nil {
				st.UnitsPending++
				continue
			}
			for _, r := range m.Acked(id, u.Index) {
				st.Rows += r.To - r.From
			}
			if m.UnitDone(id, u.Index) {
				st.UnitsDone++
				st.Bytes += u.Bytes
			} else {
				st.UnitsPending++
			}
		}
		src.Close()
	})
	switch {
	case st.State == ShardNotStarted && st.Units == 0 && len(st.FailedFiles) == 0:
		st.State = ShardDone // an empty share
	case st.State != "":
	case len(st.FailedFiles) > 0:
		st.State = ShardFailed
	case st.UnitsPending > 0:
		st.State = ShardPending
	default:
		st.State = ShardDone
	}
	return st, nil
}
