package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/loaderproject/loader/load"
)

// planShards prints the shard plan of `loader plan --shards N`.
func (a *app) planShards(ctx context.Context, input inputFlags, sources []string, n int, asJSON bool) error {
	if n < 1 {
		return usagef("--shards must be at least 1")
	}
	cfg := load.Config{Sources: sources, Logger: a.logger}
	if err := input.apply(&cfg); err != nil {
		return err
	}
	defer withObjects(&cfg, input)()
	plan, err := load.PlanShards(ctx, cfg, n)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(plan)
	}
	fmt.Fprintf(a.stdout, "%d files, %s, in %d shards (fair share %s)\n", plan.Files, humanBytes(plan.Bytes), n, humanBytes(plan.Bytes/int64(n)))
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	for _, as := range plan.Assignments {
		split := 0
		for _, f := range as.Files {
			if len(f.Units) > 0 {
				split++
			}
		}
		fmt.Fprintf(tw, "  %s\t%d files\t%d split by units\t%s\n", load.ShardName(as.Shard, n), len(as.Files), split, humanBytes(as.Bytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "write it with --json, and load each shard with `loader load --plan plan.json --shard-index K`")
	return nil
}
