package load

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/loaderproject/loader/readers"
)

// ShardPlanVersion is the version of the shard plan format PlanShards writes and ReadShardPlan reads.
const ShardPlanVersion = 1

// ShardPlan deals the files of a load out to N shards, balanced by bytes: a file larger than a
// shard's fair share (total bytes / N) is split by units (Parquet row groups, IPC batches, CSV byte
// ranges), so that no shard holds a big file alone. Its JSON form is what `loader plan --shards N
// --json` writes and `loader load --plan` reads.
type ShardPlan struct {
	Version int      `json:"version"`
	Shards  int      `json:"shards"`
	Sources []string `json:"sources"`
	Files   int      `json:"files"`
	Bytes   int64    `json:"bytes"`
	// Assignments has one entry per shard, in index order.
	Assignments []ShardAssignment `json:"assignments"`
}

// ShardAssignment is the work of one shard.
type ShardAssignment struct {
	Shard int           `json:"shard"`
	Bytes int64         `json:"bytes"`
	Files []PlannedFile `json:"files"`
}

// PlannedFile is a file, or some units of it, given to a shard.
type PlannedFile struct {
	// Rel identifies the file: its path relative to its source root (FileKey).
	Rel  string `json:"rel"`
	Size int64  `json:"size"`
	// Units lists the units the shard loads; empty means the whole file.
	Units []int `json:"units,omitempty"`
	Bytes int64 `json:"bytes"`
}

// ShardPlanError is a shard plan that does not fit the files found: a file missing, changed, or
// not in the plan, or a plan of another version or shard count.
type ShardPlanError struct {
	File   string // the file's key, when the problem is one file
	Reason string
}

func (e *ShardPlanError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("shard plan: %s: %s", e.File, e.Reason)
	}
	return "shard plan: " + e.Reason
}

// Unwrap makes a ShardPlanError an ErrConfig.
func (e *ShardPlanError) Unwrap() error { return ErrConfig }

// PlanShards discovers cfg.Sources (with cfg's filters) and deals the files out to n shards,
// balanced by bytes. Only files larger than the fair share are opened, to list their units; CSV
// units depend on the CSV options, so a load must use the options the plan was made with. Two
// files with the same FileKey (the same relative path under two sources) are refused: the plan
// could not tell them apart.
func PlanShards(ctx context.Context, cfg Config, n int) (*ShardPlan, error) {
	if n < 1 {
		return nil, &ShardError{Reason: fmt.Sprintf("%d shards: want at least 1", n)}
	}
	if err := cfg.applyDefaults(false); err != nil {
		return nil, err
	}
	files, err := discover(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	var total int64
	for _, f := range files {
		k := FileKey(f)
		if other, dup := seen[k]; dup {
			return nil, &ShardPlanError{File: k, Reason: fmt.Sprintf("both %s and %s have this relative path; give the sources so that relative paths differ", other, f.Path)}
		}
		seen[k] = f.Path
		total += f.Size
	}
	fair := total / int64(n)
	type item struct {
		file  int
		units []int
		bytes int64
	}
	var items []item
	for i, f := range files {
		if f.Size <= fair || n == 1 {
			items = append(items, item{file: i, bytes: f.Size})
			continue
		}
		src, err := readers.Open(ctx, f, readers.WithCSV(cfg.CSV), readers.WithLogger(cfg.Logger))
		if err != nil {
			return nil, err
		}
		units := src.Units()
		src.Close()
		if len(units) <= 1 {
			items = append(items, item{file: i, bytes: f.Size})
			continue
		}
		for _, u := range units {
			items = append(items, item{file: i, units: []int{u.Index}, bytes: max(u.Bytes, 1)})
		}
	}
	// Largest first, each to the least loaded shard (lowest index on ties): deterministic, and
	// within 4/3 of the best balance.
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(b.bytes, a.bytes) })
	plan := &ShardPlan{Version: ShardPlanVersion, Shards: n, Sources: cfg.Sources, Files: len(files), Bytes: total,
		Assignments: make([]ShardAssignment, n)}
	byShard := make([]map[int]*PlannedFile, n)
	for k := range plan.Assignments {
		plan.Assignments[k].Shard = k
		byShard[k] = map[int]*PlannedFile{}
	}
	for _, it := range items {
		k := 0
		for j := 1; j < n; j++ {
			if plan.Assignments[j].Bytes < plan.Assignments[k].Bytes {
				k = j
			}
		}
		plan.Assignments[k].Bytes += it.bytes
		pf := byShard[k][it.file]
		if pf == nil {
			pf = &PlannedFile{Rel: FileKey(files[it.file]), Size: files[it.file].Size}
			byShard[k][it.file] = pf
		}
		pf.Units = append(pf.Units, it.units...)
		pf.Bytes += it.bytes
	}
	for k := range plan.Assignments {
		for i := range files { // discovery order
			if pf := byShard[k][i]; pf != nil {
				slices.Sort(pf.Units)
				plan.Assignments[k].Files = append(plan.Assignments[k].Files, *pf)
			}
		}
	}
	return plan, nil
}

// ReadShardPlan decodes a plan written by PlanShards and checks its version and shape.
func ReadShardPlan(r io.Reader) (*ShardPlan, error) {
	var p ShardPlan
	dec := json.NewDecoder(r)
	if err := dec.Decode(&p); err != nil {
		return nil, &ShardPlanError{Reason: fmt.Sprintf("not a shard plan: %v", err)}
	}
	switch {
	case p.Version != ShardPlanVersion:
		return nil, &ShardPlanError{Reason: fmt.Sprintf("version %d, this loader reads version %d", p.Version, ShardPlanVersion)}
	case p.Shards < 1 || len(p.Assignments) != p.Shards:
		return nil, &ShardPlanError{Reason: fmt.Sprintf("%d shards but %d assignments", p.Shards, len(p.Assignments))}
	}
	return &p, nil
}

// Selector returns the Selector of shard k of the plan. Its Files fails with a *ShardPlanError
// when the files found are not the files planned: a file of the plan missing or of another size,
// or a file found that no shard of the plan has (make a new plan, or use hash assignment, for
// listings that grow).
func (p *ShardPlan) Selector(k int) (Selector, error) {
	if k < 0 || k >= p.Shards {
		return nil, &ShardError{Reason: fmt.Sprintf("shard index %d is outside the plan's 0..%d", k, p.Shards-1)}
	}
	return &planSelector{plan: p, index: k}, nil
}

type planSelector struct {
	plan  *ShardPlan
	index int
	units map[string]map[int]bool // file key → units of this shard; nil map: the whole file
}

func (s *planSelector) Files(all []readers.File) ([]readers.File, error) {
	planned := map[string]int64{}
	for _, a := range s.plan.Assignments {
		for _, f := range a.Files {
			planned[f.Rel] = f.Size
		}
	}
	mine := map[string]map[int]bool{}
	for _, f := range s.plan.Assignments[s.index].Files {
		var units map[int]bool
		if len(f.Units) > 0 {
			units = map[int]bool{}
			for _, u := range f.Units {
				units[u] = true
			}
		}
		mine[f.Rel] = units
	}
	found := map[string]bool{}
	var out []readers.File
	var errs []error
	for _, f := range all {
		k := FileKey(f)
		size, ok := planned[k]
		switch {
		case !ok:
			errs = append(errs, &ShardPlanError{File: k, Reason: "found, but not in the plan (the listing changed since the plan was made)"})
			continue
		case size != f.Size:
			errs = append(errs, &ShardPlanError{File: k, Reason: fmt.Sprintf("%d bytes, the plan says %d (the file changed since the plan was made)", f.Size, size)})
			continue
		}
		found[k] = true
		if _, ok := mine[k]; ok {
			out = append(out, f)
		}
	}
	var missing []string
	for k := range planned {
		if !found[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	for _, k := range missing {
		errs = append(errs, &ShardPlanError{File: k, Reason: "in the plan, but not found"})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.units = mine
	return out, nil
}

func (s *planSelector) Unit(f readers.File, u int) bool {
	units := s.units[FileKey(f)]
	return units == nil || units[u]
}
