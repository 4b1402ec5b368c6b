package load_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/manifest"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolveShard(t *testing.T) {
	for _, c := range []struct {
		name         string
		index, count int
		env          []string
		want         *load.Shard
		wantErr      bool
	}{
		{name: "unsharded", index: -1, count: -1},
		{name: "flags", index: 2, count: 3, want: &load.Shard{Index: 2, Count: 3, IndexFrom: "flag", CountFrom: "flag"}},
		{name: "kubernetes", index: -1, count: 3, env: []string{"JOB_COMPLETION_INDEX", "1"},
			want: &load.Shard{Index: 1, Count: 3, IndexFrom: "JOB_COMPLETION_INDEX", CountFrom: "flag"}},
		{name: "kubernetes count from env", index: -1, count: -1, env: []string{"JOB_COMPLETION_INDEX", "0", "LOADER_SHARD_COUNT", "4"},
			want: &load.Shard{Index: 0, Count: 4, IndexFrom: "JOB_COMPLETION_INDEX", CountFrom: "LOADER_SHARD_COUNT"}},
		{name: "aws batch", index: -1, count: -1, env: []string{"AWS_BATCH_JOB_ARRAY_INDEX", "7", "AWS_BATCH_JOB_ARRAY_SIZE", "8"},
			want: &load.Shard{Index: 7, Count: 8, IndexFrom: "AWS_BATCH_JOB_ARRAY_INDEX", CountFrom: "AWS_BATCH_JOB_ARRAY_SIZE"}},
		{name: "cloud run", index: -1, count: -1, env: []string{"CLOUD_RUN_TASK_INDEX", "2", "CLOUD_RUN_TASK_COUNT", "5"},
			want: &load.Shard{Index: 2, Count: 5, IndexFrom: "CLOUD_RUN_TASK_INDEX", CountFrom: "CLOUD_RUN_TASK_COUNT"}},
		{name: "flag beats env", index: 0, count: 2, env: []string{"JOB_COMPLETION_INDEX", "1", "LOADER_SHARD_COUNT", "9"},
			want: &load.Shard{Index: 0, Count: 2, IndexFrom: "flag", CountFrom: "flag"}},
		{name: "kubernetes without count", index: -1, count: -1, env: []string{"JOB_COMPLETION_INDEX", "1"}, wantErr: true},
		{name: "count without index", index: -1, count: 3, wantErr: true},
		{name: "index out of range", index: 3, count: 3, wantErr: true},
		{name: "malformed env", index: -1, count: 3, env: []string{"JOB_COMPLETION_INDEX", "one"}, wantErr: true},
		{name: "zero count", index: 0, count: 0, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := load.ResolveShard(c.index, c.count, env(c.env...))
			if c.wantErr {
				var se *load.ShardError
				if !errors.As(err, &se) || !errors.Is(err, load.ErrConfig) {
					t.Fatalf("ResolveShard = %+v, %v; want a *ShardError", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
				t.Fatalf("ResolveShard = %+v; want %+v", got, c.want)
			}
		})
	}
}

func TestShardNames(t *testing.T) {
	for k := range 3 {
		name := load.ShardName(k, 3)
		if gk, gn, ok := load.ParseShardName(name); !ok || gk != k || gn != 3 {
			t.Errorf("ParseShardName(%q) = %d, %d, %v", name, gk, gn, ok)
		}
	}
	for _, bad := range []string{"shard-3-of-3", "shard-0-of-0", "shard-a-of-2", "shard-1-of-2x", "x"} {
		if _, _, ok := load.ParseShardName(bad); ok {
			t.Errorf("ParseShardName(%q) ok; want refused", bad)
		}
	}
}

func TestHashShardIsFNV1aAndSpreads(t *testing.T) {
	// FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the FNV reference): the assignment is this on every machine.
	if got, want := load.HashShard("a", 1000), int(uint64(0xaf63dc4c8601ec8c)%1000); got != want {
		t.Fatalf("HashShard(a) = %d; want %d", got, want)
	}
	counts := make([]int, 4)
	for i := range 400 {
		counts[load.HashShard(fmt.Sprintf("year=2024/part-%05d.parquet", i), 4)]++
	}
	for k, n := range counts {
		if n < 50 {
			t.Errorf("shard %d got %d of 400 files; the hash does not spread: %v", k, n, counts)
		}
	}
}

// writeFiles writes n Parquet files of rows each under dir (in subdirectories, so relative paths
// matter) and returns the ids.
func writeFiles(t *testing.T, dir string, n int, rows, rowGroup int64) []int64 {
	t.Helper()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("sub%d", i%2), fmt.Sprintf("f%02d.parquet", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fixture.WriteParquet(p, int64(i)*rows, rows, rowGroup); err != nil {
			t.Fatal(err)
		}
	}
	return fixture.IDs(0, int64(n)*rows)
}

func TestShardsLoadEveryRowOnceWithOwnManifests(t *testing.T) {
	dir, _ := newWarehouse(t, fixture.TableColumns)
	data := t.TempDir()
	ids := writeFiles(t, data, 9, 40, 20)
	manifests := t.TempDir()
	var total int64
	for k := range 3 {
		cfg := baseConfig(t, memory.DefaultAllocator, data)
		cfg.Target, cfg.ManifestDir = embeddedAt(dir), manifests
		cfg.Shard = &load.Shard{Index: k, Count: 3}
		cfg.Select = load.HashSelector{Index: k, Count: 3}
		sum := run(t, cfg)
		if sum.Shard == nil || sum.Shard.Index != k {
			t.Errorf("shard %d summary says shard %+v", k, sum.Shard)
		}
		total += sum.Rows
		// A re-run of the shard finds its own manifest: nothing to do.
		if again := run(t, cfg); again.Rows != 0 {
			t.Errorf("shard %d re-run loaded %d rows; want 0", k, again.Rows)
		}
	}
	if total != int64(len(ids)) {
		t.Errorf("shards loaded %d rows in all; want %d", total, len(ids))
	}
	if got := len(scan(t, dir)); got != len(ids) {
		t.Errorf("table holds %d rows; want %d", got, len(ids))
	}
	dirs, err := load.ShardDirs(manifests)
	if err != nil || len(dirs) != 3 {
		t.Fatalf("ShardDirs = %v, %v; want 3 shard directories", dirs, err)
	}

	// Another shard count is refused while these manifests exist, unless forced.
	cfg := baseConfig(t, memory.DefaultAllocator, data)
	cfg.Target, cfg.ManifestDir = embeddedAt(dir), manifests
	cfg.Shard = &load.Shard{Index: 0, Count: 2}
	cfg.Select = load.HashSelector{Index: 0, Count: 2}
	_, err = load.Run(t.Context(), cfg)
	var sce *load.ShardCountError
	if !errors.As(err, &sce) || sce.Found != 3 || sce.Want != 2 || !errors.Is(err, load.ErrConfig) {
		t.Fatalf("Run with 2 shards over manifests of 3 = %v; want a *ShardCountError (3 → 2)", err)
	}
	// So is a sharded load after an unsharded one of the same table, unless forced.
	dir2, _ := newWarehouse(t, fixture.TableColumns)
	cfg = baseConfig(t, memory.DefaultAllocator, data)
	cfg.Target = embeddedAt(dir2)
	run(t, cfg)
	cfg.Shard = &load.Shard{Index: 0, Count: 3}
	cfg.Select = load.HashSelector{Index: 0, Count: 3}
	if _, err = load.Run(t.Context(), cfg); !errors.As(err, &sce) || sce.Found != 0 {
		t.Fatalf("sharded Run after an unsharded one = %v; want a *ShardCountError naming the unsharded manifest", err)
	}
	cfg.Force = true
	run(t, cfg)
}

func TestShardManifestLockRefusesASecondRun(t *testing.T) {
	dir, _ := newWarehouse(t, fixture.TableColumns)
	data := t.TempDir()
	writeFiles(t, data, 2, 10, 10)
	manifests := t.TempDir()
	tgt := embeddedAt(dir)
	cfg := baseConfig(t, memory.DefaultAllocator, data)
	cfg.Target, cfg.ManifestDir = tgt, manifests
	cfg.Shard = &load.Shard{Index: 1, Count: 2}
	cfg.Select = load.HashSelector{Index: 1, Count: 2}
	run(t, cfg) // makes the manifest, so its path is known
	m, err := manifest.Open(onlyManifest(t, filepath.Join(manifests, "shard-1-of-2")))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := load.Run(t.Context(), cfg); !errors.Is(err, manifest.ErrLocked) {
		t.Fatalf("Run of a shard whose manifest is held = %v; want manifest.ErrLocked", err)
	}
}

func onlyManifest(t *testing.T, dir string) string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(got) != 1 {
		t.Fatalf("manifests in %s: %v, %v; want one", dir, got, err)
	}
	return got[0]
}

func TestPlanShardsSplitsABigFileByRowGroups(t *testing.T) {
	dir, _ := newWarehouse(t, fixture.TableColumns)
	data := t.TempDir()
	// One big file of 8 row groups and three small ones: the big one is more than a fair share.
	if err := fixture.WriteParquet(filepath.Join(data, "big.parquet"), 0, 800, 100); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := fixture.WriteParquet(filepath.Join(data, fmt.Sprintf("small%d.parquet", i)), 800+int64(i)*60, 60, 60); err != nil {
			t.Fatal(err)
		}
	}
	cfg := baseConfig(t, memory.DefaultAllocator, data)
	plan, err := load.PlanShards(t.Context(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(plan); err != nil {
		t.Fatal(err)
	}
	plan, err = load.ReadShardPlan(&buf)
	if err != nil {
		t.Fatal(err)
	}
	holders, units := 0, 0
	for _, a := range plan.Assignments {
		for _, f := range a.Files {
			if f.Rel == "big.parquet" {
				holders++
				units += len(f.Units)
				if len(f.Units) == 0 {
					t.Errorf("shard %d holds big.parquet whole; want it split by row groups", a.Shard)
				}
			}
		}
	}
	if holders < 2 || units != 8 {
		t.Fatalf("big.parquet is in %d shards with %d row groups in all; want it split over several, 8 row groups", holders, units)
	}
	var max, min int64 = 0, plan.Bytes
	for _, a := range plan.Assignments {
		max, min = maxInt(max, a.Bytes), minInt(min, a.Bytes)
	}
	if max > 2*min {
		t.Errorf("shard bytes range from %d to %d; want balanced", min, max)
	}

	var total int64
	manifests := t.TempDir()
	for k := range 3 {
		c := cfg
		c.Target, c.ManifestDir = embeddedAt(dir), manifests
		c.Shard = &load.Shard{Index: k, Count: 3}
		if c.Select, err = plan.Selector(k); err != nil {
			t.Fatal(err)
		}
		total += run(t, c).Rows
	}
	if total != 980 {
		t.Errorf("plan shards loaded %d rows; want 980", total)
	}
	checkTable(t, dir, fixture.IDs(0, 980), fixture.Expected)

	// A file that changed since the plan is refused, naming it.
	if err := fixture.WriteParquet(filepath.Join(data, "small1.parquet"), 0, 50, 50); err != nil {
		t.Fatal(err)
	}
	c := cfg
	c.Target = embeddedAt(dir)
	c.Select, _ = plan.Selector(0)
	_, err = load.Run(t.Context(), c)
	var pe *load.ShardPlanError
	if !errors.As(err, &pe) || pe.File != "small1.parquet" {
		t.Fatalf("Run with a changed file = %v; want a *ShardPlanError naming small1.parquet", err)
	}
}

func maxInt(a, b int64) int64 { return max(a, b) }
func minInt(a, b int64) int64 { return min(a, b) }

func TestAnEmptyShardLoadsNothingAndSucceeds(t *testing.T) {
	dir, _ := newWarehouse(t, fixture.TableColumns)
	data := t.TempDir()
	writeFiles(t, data, 1, 10, 10)
	key := "sub0/f00.parquet"
	k := (load.HashShard(key, 5) + 1) % 5 // a shard the only file is not in
	cfg := baseConfig(t, memory.DefaultAllocator, data)
	cfg.Target = embeddedAt(dir)
	cfg.Shard = &load.Shard{Index: k, Count: 5}
	cfg.Select = load.HashSelector{Index: k, Count: 5}
	sum := run(t, cfg)
	if sum.Files != 0 || sum.Rows != 0 || sum.NotVerified == "" {
		t.Errorf("empty shard summary = %+v; want no files, no rows, not verified", sum)
	}
	if got := len(scan(t, dir)); got != 0 {
		t.Errorf("table holds %d rows after an empty shard; want 0", got)
	}
}
