package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/tableschema"
)

func (a *app) tableDDLCommand() *cobra.Command {
	var like, name, principal string
	cmd := &cobra.Command{
		Use:   "ddl --like FILE --name NAME [--principal ID]",
		Short: "Print the Databricks SQL that creates a table for a file, and the grants Zerobus needs",
		Long: `Print ready-to-paste Databricks SQL: a CREATE TABLE for FILE's columns in their canonical types
(the README's "Types" section), and the GRANT statements the service principal needs to write to it
through Zerobus: USE CATALOG, USE SCHEMA, and MODIFY and SELECT directly on the table (ALL PRIVILEGES
is not enough). Zerobus never creates tables, so run this in a SQL editor or notebook before the first
load. --principal is the service principal's application id (a UUID); without it the statements
name <service-principal-application-id>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if like == "" || name == "" {
				return usagef("--like and --name are required")
			}
			table, err := tableschema.ParseTableName(name)
			if err != nil {
				return usagef("--name: %w", err)
			}
			schema, err := schemaLike(cmd.Context(), like)
			if err != nil {
				return err
			}
			return writeDDL(a.stdout, table, schema, like, principal)
		},
	}
	cmd.Flags().StringVar(&like, "like", "", "Parquet, CSV or Arrow IPC file whose columns the table takes")
	cmd.Flags().StringVar(&name, "name", "", "the table, catalog.schema.table")
	cmd.Flags().StringVar(&principal, "principal", "", "application id of the service principal to grant")
	return cmd
}

// plainIdent is a name that needs no quoting in Databricks SQL.
var plainIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// quoteIdent quotes a name with backticks (doubling any inside).
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func qualified(t tableschema.TableName) string {
	return quoteIdent(t.Catalog) + "." + quoteIdent(t.Schema) + "." + quoteIdent(t.Table)
}

// writeDDL prints CREATE TABLE and the GRANTs.
func writeDDL(w io.Writer, t tableschema.TableName, s *tableschema.Schema, from, principal string) error {
	if principal == "" {
		principal = "<service-principal-application-id>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- The table, with the columns of %s in their canonical types.\n", from)
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n", qualified(t))
	for i, f := range s.Fields {
		name := f.Name
		if !plainIdent.MatchString(name) {
			name = quoteIdent(name)
		}
		fmt.Fprintf(&b, "  %s %s", name, f.Type.SQL())
		if !f.Nullable {
			b.WriteString(" NOT NULL")
		}
		if i < len(s.Fields)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(") USING DELTA;\n\n")
	b.WriteString("-- What the service principal needs to write through Zerobus: MODIFY and SELECT directly on the\n")
	b.WriteString("-- table (ALL PRIVILEGES is not enough), and the right to use its catalog and schema.\n")
	p := quoteIdent(principal)
	fmt.Fprintf(&b, "GRANT USE CATALOG ON CATALOG %s TO %s;\n", quoteIdent(t.Catalog), p)
	fmt.Fprintf(&b, "GRANT USE SCHEMA ON SCHEMA %s.%s TO %s;\n", quoteIdent(t.Catalog), quoteIdent(t.Schema), p)
	fmt.Fprintf(&b, "GRANT MODIFY, SELECT ON TABLE %s TO %s;\n", qualified(t), p)
	_, err := io.WriteString(w, b.String())
	return err
}
