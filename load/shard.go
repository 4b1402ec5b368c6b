package load

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/readers"
)

// Shard is one worker's share of a load split across N workers that do not talk to each other: each
// loads the files (or units) assigned to its index, and keeps its own manifest in a subdirectory
// named by ShardName, so a re-run of one shard resumes that shard only.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
	// IndexFrom and CountFrom say where the index and the count came from: "flag", or the name of
	// the environment variable that set them (JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX, ...).
	IndexFrom string `json:"index_from"`
	CountFrom string `json:"count_from"`
	// Assignment is how files are given to shards: "hash" (a stable hash of each file's relative
	// path) or "plan" (a plan balanced by bytes, see PlanShards).
	Assignment string `json:"assignment,omitempty"`
}

// Name returns the shard's manifest subdirectory, "shard-K-of-N".
func (s Shard) Name() string { return ShardName(s.Index, s.Count) }

// The shard environment variables of the schedulers, in the order they are looked at.
const (
	EnvK8sIndex       = "JOB_COMPLETION_INDEX"      // Kubernetes Indexed Job
	EnvBatchIndex     = "AWS_BATCH_JOB_ARRAY_INDEX" // AWS Batch array job
	EnvBatchSize      = "AWS_BATCH_JOB_ARRAY_SIZE"
	EnvCloudRunIndex  = "CLOUD_RUN_TASK_INDEX" // Cloud Run Jobs
	EnvCloudRunCount  = "CLOUD_RUN_TASK_COUNT"
	EnvLoaderShardCnt = "LOADER_SHARD_COUNT" // the count where the scheduler does not give one (Kubernetes)
)

// ShardEnv lists every environment variable ResolveShard reads.
var ShardEnv = []string{EnvK8sIndex, EnvBatchIndex, EnvBatchSize, EnvCloudRunIndex, EnvCloudRunCount, EnvLoaderShardCnt}

// ShardError is a shard index or count that is missing, malformed or out of range.
type ShardError struct {
	Reason string
}

func (e *ShardError) Error() string { return "shard: " + e.Reason }

// Unwrap makes a ShardError an ErrConfig.
func (e *ShardError) Unwrap() error { return ErrConfig }

// ResolveShard works out this worker's shard. index and count are the values given explicitly
// (negative when not given); lookup reads the environment (os.LookupEnv). The index comes from
// index, else JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX or CLOUD_RUN_TASK_INDEX; the count
// from count, else LOADER_SHARD_COUNT, else the count of the scheduler that gave the index
// (AWS_BATCH_JOB_ARRAY_SIZE, CLOUD_RUN_TASK_COUNT). It returns nil when neither an index nor a count
// is set anywhere: the load is not sharded. An index without a count (Kubernetes does not inject
// one), a count without an index, or an index outside [0, count) is a *ShardError.
func ResolveShard(index, count int, lookup func(string) (string, bool)) (*Shard, error) {
	s := &Shard{Index: index, Count: count}
	if index >= 0 {
		s.IndexFrom = "flag"
	}
	if count >= 0 {
		s.CountFrom = "flag"
	}
	countEnv := ""
	if s.IndexFrom == "" {
		for _, pair := range [][2]string{{EnvK8sIndex, ""}, {EnvBatchIndex, EnvBatchSize}, {EnvCloudRunIndex, EnvCloudRunCount}} {
			v, ok := lookup(pair[0])
			if !ok || v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, &ShardError{Reason: fmt.Sprintf("%s=%q is not a whole number", pair[0], v)}
			}
			s.Index, s.IndexFrom, countEnv = n, pair[0], pair[1]
			break
		}
	}
	if s.CountFrom == "" {
		for _, name := range []string{EnvLoaderShardCnt, countEnv} {
			if name == "" {
				continue
			}
			v, ok := lookup(name)
			if !ok || v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, &ShardError{Reason: fmt.Sprintf("%s=%q is not a whole number", name, v)}
			}
			s.Count, s.CountFrom = n, name
			break
		}
	}
	switch {
	case s.IndexFrom == "" && s.CountFrom == "":
		return nil, nil
	case s.CountFrom == "":
		return nil, &ShardError{Reason: fmt.Sprintf("shard index %d (from %s) but no shard count: the scheduler does not say how many shards there are, so it must be given (or set %s)", s.Index, s.IndexFrom, EnvLoaderShardCnt)}
	case s.IndexFrom == "":
		return nil, &ShardError{Reason: fmt.Sprintf("shard count %d (from %s) but no shard index: none of %s, %s or %s is set", s.Count, s.CountFrom, EnvK8sIndex, EnvBatchIndex, EnvCloudRunIndex)}
	case s.Count < 1:
		return nil, &ShardError{Reason: fmt.Sprintf("shard count %d (from %s): want at least 1", s.Count, s.CountFrom)}
	case s.Index < 0 || s.Index >= s.Count:
		return nil, &ShardError{Reason: fmt.Sprintf("shard index %d (from %s) is outside 0..%d for %d shards (from %s)", s.Index, s.IndexFrom, s.Count-1, s.Count, s.CountFrom)}
	}
	return s, nil
}

// ShardName returns the manifest subdirectory of shard k of n, "shard-K-of-N".
func ShardName(k, n int) string { return fmt.Sprintf("shard-%d-of-%d", k, n) }

var shardNameRE = regexp.MustCompile(`^shard-(\d+)-of-(\d+)$`)

// ParseShardName parses a name made by ShardName.
func ParseShardName(name string) (k, n int, ok bool) {
	m := shardNameRE.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	k, err1 := strconv.Atoi(m[1])
	n, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || n < 1 || k >= n {
		return 0, 0, false
	}
	return k, n, true
}

// ShardDir is a shard's manifest subdirectory found under a manifest directory.
type ShardDir struct {
	Path         string
	Index, Count int
}

// ShardDirs lists the shard subdirectories of a manifest directory, sorted by count then index. A
// missing directory has none.
func ShardDirs(base string) ([]ShardDir, error) {
	ents, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ShardDir
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if k, n, ok := ParseShardName(e.Name()); ok {
			out = append(out, ShardDir{Path: filepath.Join(base, e.Name()), Index: k, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b ShardDir) int {
		if a.Count != b.Count {
			return a.Count - b.Count
		}
		return a.Index - b.Index
	})
	return out, nil
}

// ShardCountError refuses a sharded load whose shard count differs from the one of manifests already
// in the manifest directory: the files would be dealt out differently, and rows another shard count
// loaded would be loaded again. Found is the other count (0 for an unsharded load's manifest).
type ShardCountError struct {
	Dir         string // the manifest directory
	Table       string
	Found, Want int
}

func (e *ShardCountError) Error() string {
	old := fmt.Sprintf("manifests of %d shards", e.Found)
	if e.Found == 0 {
		old = "the manifest of an unsharded load"
	}
	return fmt.Sprintf("%s holds %s of table %s, and this load has %d shards: files would be dealt out differently and rows already loaded would be loaded again; "+
		"keep the shard count, or force a fresh load", e.Dir, old, e.Table, e.Want)
}

// Unwrap makes a ShardCountError an ErrConfig.
func (e *ShardCountError) Unwrap() error { return ErrConfig }

// shardManifestDir returns the directory of the load's manifest: base, or the shard's subdirectory
// of it when the load is sharded (base may be an object-store URL). A sharded load refuses
// (*ShardCountError) when the same table has a manifest of another shard count, or an unsharded one,
// unless cfg.Force.
func shardManifestDir(ctx context.Context, cfg *Config, base, key, table string) (string, error) {
	if cfg.Shard == nil {
		return base, nil
	}
	if !cfg.Force {
		name := filepath.Base(manifest.Path(base, key, table))
		found, err := otherShardCount(ctx, cfg, base, name)
		if err != nil {
			return "", fmt.Errorf("manifest directory %s: %w", base, err)
		}
		if found >= 0 {
			return "", &ShardCountError{Dir: base, Table: table, Found: found, Want: cfg.Shard.Count}
		}
	}
	return joinManifestDir(base, cfg.Shard.Name()), nil
}

// otherShardCount looks in base for a manifest called name of another shard count than cfg's: it
// returns that count, 0 for an unsharded load's, or -1 when there is none.
func otherShardCount(ctx context.Context, cfg *Config, base, name string) (int, error) {
	if objstore.IsURL(base) {
		return otherShardCountObjects(ctx, cfg, base, name)
	}
	if exists(filepath.Join(base, name)) {
		return 0, nil
	}
	dirs, err := ShardDirs(base)
	if err != nil {
		return -1, err
	}
	for _, d := range dirs {
		if d.Count != cfg.Shard.Count && exists(filepath.Join(d.Path, name)) {
			return d.Count, nil
		}
	}
	return -1, nil
}

// joinManifestDir is filepath.Join for a local directory, and joins with "/" for an object-store URL.
func joinManifestDir(base, name string) string {
	if objstore.IsURL(base) {
		return strings.TrimSuffix(base, "/") + "/" + name
	}
	return filepath.Join(base, name)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Selector chooses the part of the discovered files a load takes: a shard's share. Files is called
// once with every file found, in discovery order; Unit is then asked about each unit of each chosen
// file, from the decoding goroutines, and must be safe for concurrent use.
type Selector interface {
	Files(all []readers.File) ([]readers.File, error)
	Unit(f readers.File, unit int) bool
}

// FileSelector is a Selector that decides about each file on its own, so a listing can stream into
// the load instead of being collected first (an object-store prefix of a million objects). Takes
// must agree with Files.
type FileSelector interface {
	Selector
	Takes(f readers.File) bool
}

// FileKey is a file's identity for shard assignment: its path relative to its source root (the
// path itself where discovery did not give one).
func FileKey(f readers.File) string {
	if f.Rel != "" {
		return f.Rel
	}
	return filepath.ToSlash(f.Path)
}

// HashShard returns the shard of n a file key belongs to: FNV-1a (64 bits) of the key, modulo n.
// It is the same on every machine and for every Go version.
func HashShard(key string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(h.Sum64() % uint64(n))
}

// HashSelector assigns whole files to shards by HashShard of their FileKey: nothing to plan, and a
// listing that grows keeps every earlier file on its shard.
type HashSelector struct {
	Index, Count int
}

// Files keeps the files of shard Index.
func (h HashSelector) Files(all []readers.File) ([]readers.File, error) {
	var out []readers.File
	for _, f := range all {
		if h.Takes(f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Takes reports whether f is shard Index's.
func (h HashSelector) Takes(f readers.File) bool {
	return HashShard(FileKey(f), h.Count) == h.Index
}

// Unit takes every unit of a chosen file.
func (HashSelector) Unit(readers.File, int) bool { return true }

// shardNotVerified is why a shard of several does not check the table's growth against its rows.
const shardNotVerified = "a shard of several: the other shards load the same table at the same time, so its growth is not this shard's alone"

// selectShard applies cfg.Select to the discovered files.
func selectShard(cfg *Config, files []readers.File) ([]readers.File, error) {
	if cfg.Select == nil {
		return files, nil
	}
	return cfg.Select.Files(files)
}

// unitSelected reports whether the load takes unit u of f.
func unitSelected(cfg *Config, f readers.File, u int) bool {
	return cfg.Select == nil || cfg.Select.Unit(f, u)
}
