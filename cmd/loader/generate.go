package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/internal/demodata"
)

func (a *app) generateCommand() *cobra.Command {
	var out, format string
	var opts demodata.Options
	cmd := &cobra.Command{
		Use:   "generate --out DIR [--rows N] [--files K] [--row-group-rows R] [--format parquet|csv|ipc] [--seed S]",
		Short: "Write a deterministic demo dataset of Parquet, CSV or Arrow IPC files",
		Long: `Write a realistic dataset of product events as Parquet (default), CSV or Arrow IPC files: 17
columns of mixed types (ids, strings with nulls, timestamps, dates, decimals, doubles, floats,
booleans, a list, a struct, binary). The same flags always write the same bytes, so runs and
benchmarks are comparable, and every format holds the same rows. CSV holds lists and structs as
JSON; load it into a table created with the Parquet files' columns (loader table create --like).
With --canonical the columns are written in the types the wire carries, as a tool writing for
Zerobus would, so a load of them casts nothing (DECIMAL text is still checked).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out is required")
			}
			f, err := demodata.ParseFormat(format)
			if err != nil {
				return usagef("--format: %w", err)
			}
			opts.Format = f
			res, err := demodata.Generate(cmd.Context(), out, opts)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "wrote %d rows in %d files to %s\n", res.Rows, len(res.Files), out)
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write the part-NNNNN files into")
	cmd.Flags().StringVar(&format, "format", string(demodata.Parquet), "file format: parquet, csv or ipc (Arrow IPC file)")
	cmd.Flags().Int64Var(&opts.Rows, "rows", 1_000_000, "total rows")
	cmd.Flags().IntVar(&opts.Files, "files", 8, "number of files")
	cmd.Flags().Int64Var(&opts.RowGroupRows, "row-group-rows", 25_000, "rows per Parquet row group or Arrow IPC record batch")
	cmd.Flags().Uint64Var(&opts.Seed, "seed", 0, "random seed")
	cmd.Flags().BoolVar(&opts.Canonical, "canonical", false, "write the columns in the canonical Arrow types frames carry (large strings, microsecond timestamps, DECIMAL as text), so loading them needs no cast (Parquet and IPC)")
	return cmd
}
