package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/embedded"
	"github.com/loaderproject/loader/load"
)

// statusCommand is `loader status`; this file holds its --shards form.
func (a *app) statusCommand() *cobra.Command {
	var (
		target      targetFlags
		input       inputFlags
		shard       shardFlags
		shards      bool
		asJSON      bool
		manifestDir string
	)
	cmd := &cobra.Command{
		Use:   "status --table NAME [--manifest-dir DIR | --warehouse DIR] [--json] | status --shards --table NAME [--endpoint URL | --warehouse DIR] [--shard-count N | --plan plan.json] [--json] SOURCE...",
		Short: "Show how far a load has got: done, pending, failed and possibly duplicated",
		Long: statusLong + `With --shards: merge the manifests of every shard of a sharded load and show, per shard, its state
(done, pending, running, not started, failed), its units done and pending, the rows its manifest
records as acknowledged, and the source bytes done. Give the sources, table, target and
--manifest-dir as given to ` + "`loader load`" + `, and the shard count (--shard-count or
$LOADER_SHARD_COUNT; found from the manifest directory when only one count is there) or the --plan
the shards ran with. It exits 0 only when every shard is done, else 1.

A running shard's manifest is held by its loader: its units count as pending. Failed files are the
files of a share that cannot be opened now; the manifest does not record load failures.`,
		Example: `  loader status --shards --table main.default.events --endpoint grpc://sink:8815 --shard-count 16 \
    --manifest-dir s3://bucket/manifests data/`,
		RunE: func(cmd *cobra.Command, sources []string) error {
			if !shards {
				if len(sources) > 0 {
					return usagef("SOURCEs are for --shards; without it loader status reads the manifests only")
				}
				wh := ""
				if cmd.Flags().Changed("warehouse") {
					wh = target.warehouse
				}
				return a.statusFiles(cmd.Context(), target.table, manifestDir, wh, asJSON)
			}
			if len(sources) == 0 && shard.plan == "" {
				return usagef("give the load's SOURCEs")
			}
			return a.statusShards(cmd.Context(), target, input, shard, manifestDir, sources, asJSON)
		},
	}
	fl := cmd.Flags()
	target.register(fl)
	input.register(fl)
	fl.IntVar(&shard.count, "shard-count", -1, "the number of shards (default: $"+load.EnvLoaderShardCnt+", else the one count found in the manifest directory)")
	fl.StringVar(&shard.plan, "plan", "", "the shard plan the shards ran with (`loader plan --shards N --json`)")
	fl.BoolVar(&shards, "shards", false, "merge the manifests of every shard")
	fl.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	fl.StringVar(&manifestDir, "manifest-dir", "", "where the load's manifests live (as given to loader load)")
	return cmd
}

func (a *app) statusShards(ctx context.Context, target targetFlags, input inputFlags, sf shardFlags, manifestDir string, sources []string, asJSON bool) error {
	cfg := load.Config{Sources: sources, Logger: a.logger, ManifestDir: manifestDir}
	target.embedded = []embedded.Option{}
	for _, apply := range []func(*load.Config) error{target.apply, input.apply} {
		if err := apply(&cfg); err != nil {
			return err
		}
	}
	var selectorFor func(k int) (load.Selector, error)
	count := sf.count
	if sf.plan != "" {
		f, err := os.Open(sf.plan)
		if err != nil {
			return usagef("--plan: %w", err)
		}
		plan, err := load.ReadShardPlan(f)
		f.Close()
		if err != nil {
			return usagef("--plan %s: %w", sf.plan, err)
		}
		if len(cfg.Sources) == 0 {
			cfg.Sources = plan.Sources
		}
		count, selectorFor = plan.Shards, plan.Selector
	} else {
		if count < 0 {
			if v, ok := os.LookupEnv(load.EnvLoaderShardCnt); ok {
				if _, err := fmt.Sscanf(v, "%d", &count); err != nil {
					return usagef("$%s=%q is not a whole number", load.EnvLoaderShardCnt, v)
				}
			}
		}
		selectorFor = func(k int) (load.Selector, error) { return load.HashSelector{Index: k, Count: count}, nil }
	}
	defer withObjects(&cfg, input)()
	if count < 0 {
		n, err := onlyShardCount(cfg.ManifestDir)
		if err != nil {
			return err
		}
		count = n
	}
	rep, err := load.StatusShards(ctx, cfg, count, selectorFor)
	if rep == nil {
		return withHint(err)
	}
	if asJSON {
		if jerr := json.NewEncoder(a.stdout).Encode(rep); jerr != nil {
			return jerr
		}
		return err
	}
	fmt.Fprintf(a.stdout, "%s: %d of %d shards done, %d rows, %s\n", rep.Table, rep.Done, rep.Count, rep.Rows, humanBytes(rep.Bytes))
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	for _, s := range rep.Shards {
		fmt.Fprintf(tw, "  %s\t%s\t%d files\t%d/%d units done\t%d pending\t%d rows\t%s of %s\n", load.ShardName(s.Shard, rep.Count), s.State,
			s.Files, s.UnitsDone, s.Units, s.UnitsPending, s.Rows, humanBytes(s.Bytes), humanBytes(s.BytesTotal))
		for _, f := range s.FailedFiles {
			fmt.Fprintf(tw, "    failed: %s\n", f.Error)
		}
	}
	if ferr := tw.Flush(); ferr != nil {
		return ferr
	}
	return err
}

// onlyShardCount finds the shard count of the manifests in dir, when there is exactly one.
func onlyShardCount(dir string) (int, error) {
	if dir == "" {
		return 0, usagef("give --shard-count (or --manifest-dir, to find it there)")
	}
	dirs, err := load.ShardDirs(dir)
	if err != nil {
		return 0, err
	}
	counts := map[int]bool{}
	for _, d := range dirs {
		counts[d.Count] = true
	}
	switch len(counts) {
	case 0:
		return 0, errors.New("no shard manifests in " + dir + "; give --shard-count")
	case 1:
		return dirs[0].Count, nil
	}
	return 0, usagef("%s holds manifests of %d different shard counts; give --shard-count", dir, len(counts))
}
