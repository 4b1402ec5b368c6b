package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/loaderproject/loader/load"
)

// shardFlags make a load one shard of several: --shard-index/--shard-count (or the scheduler's
// environment) and --plan.
type shardFlags struct {
	index, count int
	plan         string
}

func (f *shardFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&f.index, "shard-index", -1, "this worker's shard, 0..N-1 (default: $"+load.EnvK8sIndex+", $"+load.EnvBatchIndex+" or $"+load.EnvCloudRunIndex+")")
	fl.IntVar(&f.count, "shard-count", -1, "the number of shards N (default: $"+load.EnvLoaderShardCnt+", $"+load.EnvBatchSize+" or $"+load.EnvCloudRunCount+")")
	fl.StringVar(&f.plan, "plan", "", "a shard plan from `loader plan --shards N --json`: load the files and units it gives this shard, instead of assigning whole files by a hash of their path")
}

// apply resolves the shard from the flags and the environment and sets cfg.Shard and cfg.Select.
func (f *shardFlags) apply(cfg *load.Config) error {
	if f.plan == "" {
		shard, err := load.ResolveShard(f.index, f.count, os.LookupEnv)
		if err != nil {
			return usageError{err}
		}
		if shard != nil {
			shard.Assignment = "hash"
			cfg.Shard, cfg.Select = shard, load.HashSelector{Index: shard.Index, Count: shard.Count}
		}
		return nil
	}
	file, err := os.Open(f.plan)
	if err != nil {
		return usagef("--plan: %w", err)
	}
	defer file.Close()
	plan, err := load.ReadShardPlan(file)
	if err != nil {
		return usagef("--plan %s: %w", f.plan, err)
	}
	count, countFromPlan := f.count, false
	if count < 0 && !anySet(load.EnvLoaderShardCnt, load.EnvBatchSize, load.EnvCloudRunCount) {
		count, countFromPlan = plan.Shards, true // the plan knows how many shards it has
	}
	shard, err := load.ResolveShard(f.index, count, os.LookupEnv)
	if err != nil {
		return usageError{err}
	}
	if shard != nil && countFromPlan {
		shard.CountFrom = "plan"
	}
	if shard == nil || shard.IndexFrom == "" {
		return usagef("--plan needs the shard index: give --shard-index or run where the scheduler sets it ($%s, $%s, $%s)", load.EnvK8sIndex, load.EnvBatchIndex, load.EnvCloudRunIndex)
	}
	if shard.Count != plan.Shards {
		return usagef("--plan %s has %d shards but the shard count is %d (from %s)", f.plan, plan.Shards, shard.Count, shard.CountFrom)
	}
	sel, err := plan.Selector(shard.Index)
	if err != nil {
		return usageError{err}
	}
	if len(cfg.Sources) == 0 {
		cfg.Sources = plan.Sources
	}
	shard.Assignment = "plan"
	cfg.Shard, cfg.Select = shard, sel
	return nil
}

func anySet(names ...string) bool {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok && v != "" {
			return true
		}
	}
	return false
}

// describeShard says which shard a load was and where that came from.
func describeShard(s *load.Shard) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("shard %d of %d (index from %s, count from %s, %s assignment)", s.Index, s.Count, s.IndexFrom, s.CountFrom, s.Assignment)
}
