package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/load"
)

func (a *app) planCommand() *cobra.Command {
	var target targetFlags
	var input inputFlags
	var asJSON bool
	var shards int
	cmd := &cobra.Command{
		Use:   "plan --table NAME [--endpoint URL | --warehouse DIR] SOURCE...",
		Short: "Show what a load would do, without sending anything",
		Long: `A dry run of ` + "`loader load`" + `: find the files, open them, learn the table's columns, and plan every
distinct source schema. It lists the files with their units, rows and bytes, and for each schema the
casts, the columns filled with nulls, the columns rescued and every problem. No data is sent.
It exits 1 when any file would fail to load.`,
		Example: `  loader plan --table main.default.events data/
  loader plan --table main.default.events --json --csv-no-header --columns id,name exports/
  loader plan --shards 16 --json data/ > plan.json`,
		RunE: func(cmd *cobra.Command, sources []string) error {
			if len(sources) == 0 {
				return usagef("give at least one SOURCE (file, directory or glob)")
			}
			if cmd.Flags().Changed("shards") {
				return a.planShards(cmd.Context(), input, sources, shards, asJSON)
			}
			cfg := load.Config{Sources: sources, Logger: a.logger}
			for _, apply := range []func(*load.Config) error{target.apply, input.apply} {
				if err := apply(&cfg); err != nil {
					return err
				}
			}
			defer withObjects(&cfg, input)()
			rep, err := load.Plan(cmd.Context(), cfg)
			err = withHint(err)
			if rep == nil {
				return err
			}
			if asJSON {
				if jerr := json.NewEncoder(a.stdout).Encode(rep); jerr != nil {
					return jerr
				}
				return err
			}
			if perr := a.printPlan(cmd.Context(), rep); perr != nil {
				return perr
			}
			return err
		},
	}
	target.register(cmd.Flags())
	input.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as one JSON object")
	cmd.Flags().IntVar(&shards, "shards", 0, "instead, deal the files out to N shards balanced by bytes (big files split by units); with --json, the plan `loader load --plan` reads (no --table needed)")
	return cmd
}

func (a *app) printPlan(_ context.Context, r *load.PlanReport) error {
	w := a.stdout
	from := map[string]string{"target": "the target's description", "given": "--table-schema", "first file": "the first file"}[r.TableFrom]
	if from == "" {
		from = r.TableFrom
	}
	fmt.Fprintf(w, "table %s (columns from %s)\n  %s\n\n", r.Table, from, r.Columns)
	rows := humanize.Comma(r.Rows)
	if r.RowsUnknownFiles > 0 {
		rows += fmt.Sprintf(" + the rows of %d files counted only when read", r.RowsUnknownFiles)
	}
	fmt.Fprintf(w, "%d files, %d units, %s rows, %s\n", len(r.Files), r.Units, rows, humanBytes(r.Bytes))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, f := range r.Files {
		frows := "?"
		if f.Rows >= 0 {
			frows = humanize.Comma(f.Rows)
		}
		state := fmt.Sprintf("schema %d", f.Schema+1)
		if f.Error != "" {
			state = "FAILS"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d units\t%s rows\t%s\t%s\n", f.Path, f.Format, f.Units, frows, humanBytes(f.Bytes), state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, s := range r.Schemas {
		fmt.Fprintf(w, "\nschema %d of %d, %d files: %s\n", i+1, len(r.Schemas), len(s.Files), clip(strings.Join(s.Files, ", "), 200))
		if len(s.Problems) > 0 {
			fmt.Fprintf(w, "  cannot load (%d problems):\n", len(s.Problems))
			for _, p := range s.Problems {
				fmt.Fprintf(w, "    %s\n", p)
			}
			continue
		}
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, st := range s.Steps {
			fmt.Fprintf(tw, "  %s\t%s\n", st.Column, st.Action)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var failing []load.PlanFile
	for _, f := range r.Files {
		if f.Error != "" && f.Schema < 0 {
			failing = append(failing, f)
		}
	}
	if len(failing) > 0 {
		fmt.Fprintln(w, "\nfiles that cannot be opened:")
		for _, f := range failing {
			fmt.Fprintf(w, "  %s\n", f.Error)
		}
	}
	if r.FailingFiles > 0 {
		fmt.Fprintf(w, "\n%d of %d files would fail\n", r.FailingFiles, len(r.Files))
	} else {
		fmt.Fprintf(w, "\nevery file can be loaded\n")
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
