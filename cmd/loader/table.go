package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

func (a *app) tableCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Create, describe, list and count tables",
		Long:  "Manage the Delta tables of a warehouse (the embedded sink's storage) and count rows on any endpoint.",
	}
	cmd.AddCommand(a.tableCreateCommand(), a.tableDescribeCommand(), a.tableListCommand(), a.tableCountCommand(), a.tableDDLCommand())
	return cmd
}

func tableNameArg(args []string) (tableschema.TableName, error) {
	if len(args) != 1 {
		return tableschema.TableName{}, usagef("want exactly one table name, catalog.schema.table")
	}
	name, err := tableschema.ParseTableName(args[0])
	if err != nil {
		return name, usageError{err}
	}
	return name, nil
}

func (a *app) tableCreateCommand() *cobra.Command {
	var dir, columns, like string
	cmd := &cobra.Command{
		Use:   `create NAME --warehouse DIR (--columns "id BIGINT NOT NULL, name STRING, ..." | --like FILE)`,
		Short: "Create a Delta table",
		Long: `Create the Delta table NAME (catalog.schema.table) at DIR/catalog/schema/table.

The columns are either given in Databricks SQL with --columns, using TINYINT, SMALLINT, INT, BIGINT,
FLOAT, DOUBLE, BOOLEAN, STRING, BINARY, DATE, TIMESTAMP, TIMESTAMP_NTZ, DECIMAL(p,s), ARRAY<t>,
MAP<k,v>, STRUCT<a: t, ...> and NOT NULL, or derived with --like from a Parquet, CSV or Arrow IPC
file using the canonical Arrow-to-Delta mapping (the README's "Types" section lists it).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := tableNameArg(args)
			if err != nil {
				return err
			}
			if (columns == "") == (like == "") {
				return usagef("give exactly one of --columns and --like")
			}
			var schema *tableschema.Schema
			if columns != "" {
				if schema, err = tableschema.ParseColumns(columns); err != nil {
					return usageError{err}
				}
			} else if schema, err = schemaLike(cmd.Context(), like); err != nil {
				return err
			}
			wh, err := warehouse.Open(dir)
			if err != nil {
				return err
			}
			tbl, err := wh.CreateTable(cmd.Context(), name, schema)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "created %s at %s\n", name, tbl.Dir())
			return printColumns(a.stdout, schema)
		},
	}
	cmd.Flags().StringVar(&dir, "warehouse", "warehouse", "warehouse directory")
	cmd.Flags().StringVar(&columns, "columns", "", `column list in Databricks SQL, e.g. "id BIGINT NOT NULL, name STRING"`)
	cmd.Flags().StringVar(&like, "like", "", "derive the columns from this Parquet, CSV or Arrow IPC file")
	return cmd
}

// schemaLike derives a table schema from a file with the canonical mapping.
func schemaLike(ctx context.Context, path string) (*tableschema.Schema, error) {
	objects, closeObjects := objectStore(nil, path)
	defer closeObjects()
	files, err := readers.Discover(ctx, []string{path}, readers.WithObjectStore(objects))
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		return nil, usagef("--like %s: want one file, found %d", path, len(files))
	}
	src, err := readers.Open(ctx, files[0])
	if err != nil {
		return nil, err
	}
	defer src.Close()
	schema, err := tableschema.FromArrow(src.Schema())
	if err != nil {
		return nil, fmt.Errorf("--like %s: %w", path, err)
	}
	return schema, nil
}

func printColumns(w interface{ Write([]byte) (int, error) }, s *tableschema.Schema) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, f := range s.Fields {
		null := ""
		if !f.Nullable {
			null = "NOT NULL"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Name, f.Type.SQL(), null)
	}
	return tw.Flush()
}

func (a *app) tableDescribeCommand() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe NAME --warehouse DIR",
		Short: "Show a table's columns, location, version and row count",
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := tableNameArg(args)
			if err != nil {
				return err
			}
			tbl, err := openTable(cmd.Context(), dir, name)
			if err != nil {
				return err
			}
			snap, err := tbl.Snapshot(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(map[string]any{
					"table": name.String(), "location": tbl.Dir(), "id": snap.ID, "version": snap.Version,
					"rows": snap.NumRecords, "files": len(snap.Files), "columns": snap.Schema.SQL(),
					"delta_schema": json.RawMessage(snap.Schema.DeltaJSON()),
				})
			}
			fmt.Fprintf(a.stdout, "table     %s\nlocation  %s\nid        %s\nversion   %d\nfiles     %d\nrows      %d\ncolumns\n",
				name, tbl.Dir(), snap.ID, snap.Version, len(snap.Files), snap.NumRecords)
			return printColumns(a.stdout, snap.Schema)
		},
	}
	cmd.Flags().StringVar(&dir, "warehouse", "warehouse", "warehouse directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func openTable(ctx context.Context, dir string, name tableschema.TableName) (*warehouse.Table, error) {
	wh, err := warehouse.Open(dir)
	if err != nil {
		return nil, err
	}
	return wh.Table(ctx, name)
}

func (a *app) tableListCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "list --warehouse DIR",
		Short: "List the tables of a warehouse, one per line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wh, err := warehouse.Open(dir)
			if err != nil {
				return err
			}
			names, err := wh.List(cmd.Context())
			if err != nil {
				return err
			}
			for _, n := range names {
				fmt.Fprintln(a.stdout, n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "warehouse", "warehouse", "warehouse directory")
	return cmd
}

func (a *app) tableCountCommand() *cobra.Command {
	var dir, endpoint, token, protocol string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "count NAME (--warehouse DIR | --endpoint URL)",
		Short: "Print a table's committed row count",
		Long: `Print the committed row count of NAME as a bare integer on the last line of stdout.

With --warehouse the table is read on disk; with --endpoint the count comes from a running sink over
Flight (grpc://host:port, grpc+tls://host:port or https://host). --json prints one object with the
committed rows and the rows acknowledged but not yet committed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := tableNameArg(args)
			if err != nil {
				return err
			}
			if endpoint != "" && cmd.Flags().Changed("warehouse") {
				return usagef("give one of --warehouse and --endpoint")
			}
			var committed, pending int64
			if endpoint != "" {
				committed, pending, err = countRemote(cmd.Context(), endpoint, protocol, token, name)
			} else {
				committed, pending, err = countLocal(cmd.Context(), dir, name)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(map[string]any{
					"table": name.String(), "committed": committed, "acknowledged": pending,
				})
			}
			_, err = fmt.Fprintln(a.stdout, committed)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "warehouse", "warehouse", "warehouse directory")
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "count on a running sink at this URL instead")
	cmd.Flags().StringVar(&token, "token", os.Getenv("LOADER_TOKEN"), "bearer token for --endpoint (default $LOADER_TOKEN)")
	cmd.Flags().StringVar(&protocol, "protocol", string(flightclient.Zerobus), "dialect of --endpoint")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"table","committed","acknowledged"}: acknowledged counts rows durable but not yet committed`)
	return cmd
}

func countLocal(ctx context.Context, dir string, name tableschema.TableName) (committed, pending int64, err error) {
	tbl, err := openTable(ctx, dir, name)
	if err != nil {
		return 0, 0, err
	}
	if committed, _, err = tbl.Count(ctx); err != nil {
		return 0, 0, err
	}
	pending, err = sink.PendingRows(ctx, tbl)
	return committed, pending, err
}

func countRemote(ctx context.Context, endpoint, protocol, token string, name tableschema.TableName) (committed, pending int64, err error) {
	opts := []flightclient.Option{flightclient.WithUserAgent(userAgent())}
	if token != "" {
		opts = append(opts, flightclient.WithToken(token))
	}
	dialect, err := flightclient.ParseDialect(strings.ToLower(protocol))
	if err != nil {
		return 0, 0, usageError{err}
	}
	c, err := flightclient.New(endpoint, dialect, opts...)
	if err != nil {
		return 0, 0, usageError{err}
	}
	defer c.Close()
	res, err := c.Counts(ctx, name)
	if errors.Is(err, flightclient.ErrUnsupported) {
		return 0, 0, fmt.Errorf("%s cannot count rows of %s: %w", endpoint, name, err)
	}
	return res.Committed, res.Acknowledged, err
}
