package sink

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/tableschema"
)

// The Flight SQL catalog commands, so ADBC's GetObjects and GetTableSchema (and SQL tools' browsers)
// can see the warehouse: catalogs, schemas and tables are the three parts of the table names, and
// every table is of type TABLE with its Arrow schema as stored (tableschema.StorageArrow).

const tableType = "TABLE"

func (q *sqlServer) cmdInfo(desc *flight.FlightDescriptor, schema *arrow.Schema) *flight.FlightInfo {
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc,
		TotalRecords:     -1,
		TotalBytes:       -1,
		Schema:           flight.SerializeSchema(schema, q.s.cfg.mem),
	}
}

// GetFlightInfoCatalogs describes the catalog list.
func (q *sqlServer) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return q.cmdInfo(desc, schema_ref.Catalogs), nil
}

// GetFlightInfoSchemas describes the schema list.
func (q *sqlServer) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return q.cmdInfo(desc, schema_ref.DBSchemas), nil
}

// GetFlightInfoTables describes the table list.
func (q *sqlServer) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return q.cmdInfo(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return q.cmdInfo(desc, schema_ref.Tables), nil
}

// GetFlightInfoTableTypes describes the table type list.
func (q *sqlServer) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return q.cmdInfo(desc, schema_ref.TableTypes), nil
}

// likeMatcher compiles a SQL LIKE pattern (% any run, _ one character); nil matches everything.
func likeMatcher(pattern *string) (func(string) bool, error) {
	if pattern == nil {
		return func(string) bool { return true }, nil
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range *pattern {
		switch r {
		case '%':
			b.WriteString(".*")
		case '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "filter pattern %q: %v", *pattern, err)
	}
	return re.MatchString, nil
}

// oneBatch streams rows (one []any per row: a string or []byte per field of schema).
func (q *sqlServer) oneBatch(schema *arrow.Schema, rows [][]any) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(q.s.cfg.mem, schema)
	defer b.Release()
	for _, row := range rows {
		for i, v := range row {
			switch fb := b.Field(i).(type) {
			case *array.StringBuilder:
				fb.Append(v.(string))
			case *array.BinaryBuilder:
				fb.Append(v.([]byte))
			}
		}
	}
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: b.NewRecordBatch()}
	close(ch)
	return schema, ch, nil
}

func (q *sqlServer) tables(ctx context.Context) ([]tableschema.TableName, error) {
	names, err := q.s.wh.List(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list tables: %v", err)
	}
	return names, nil
}

// DoGetCatalogs lists the catalogs.
func (q *sqlServer) DoGetCatalogs(ctx context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	names, err := q.tables(ctx)
	if err != nil {
		return nil, nil, err
	}
	var cats []string
	for _, n := range names {
		cats = append(cats, n.Catalog)
	}
	slices.Sort(cats)
	var rows [][]any
	for _, c := range slices.Compact(cats) {
		rows = append(rows, []any{c})
	}
	return q.oneBatch(schema_ref.Catalogs, rows)
}

// DoGetDBSchemas lists the schemas of a catalog (all when none is given) matching the pattern.
func (q *sqlServer) DoGetDBSchemas(ctx context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	match, err := likeMatcher(cmd.GetDBSchemaFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	names, err := q.tables(ctx)
	if err != nil {
		return nil, nil, err
	}
	seen := map[[2]string]bool{}
	var rows [][]any
	for _, n := range names {
		k := [2]string{n.Catalog, n.Schema}
		if seen[k] || (cmd.GetCatalog() != nil && *cmd.GetCatalog() != n.Catalog) || !match(n.Schema) {
			continue
		}
		seen[k] = true
		rows = append(rows, []any{n.Catalog, n.Schema})
	}
	return q.oneBatch(schema_ref.DBSchemas, rows)
}

// DoGetTables lists the tables matching the command's filters, with their schemas when asked: as
// stored (DECIMAL as decimal128, tableschema.StorageArrow), so a client reads the table's real types.
func (q *sqlServer) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	matchSchema, err := likeMatcher(cmd.GetDBSchemaFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	matchTable, err := likeMatcher(cmd.GetTableNameFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	if types := cmd.GetTableTypes(); len(types) > 0 && !slices.Contains(types, tableType) {
		return q.oneBatch(schema_ref.Tables, nil)
	}
	names, err := q.tables(ctx)
	if err != nil {
		return nil, nil, err
	}
	var rows [][]any
	for _, n := range names {
		if (cmd.GetCatalog() != nil && *cmd.GetCatalog() != n.Catalog) || !matchSchema(n.Schema) || !matchTable(n.Table) {
			continue
		}
		row := []any{n.Catalog, n.Schema, n.Table, tableType}
		if cmd.GetIncludeSchema() {
			t, err := q.s.wh.Table(ctx, n)
			if err != nil {
				continue // dropped while listing
			}
			schema, err := t.Schema(ctx)
			if err != nil {
				return nil, nil, tableStatus(n, err)
			}
			row = append(row, flight.SerializeSchema(schema.StorageArrow(), q.s.cfg.mem))
		}
		rows = append(rows, row)
	}
	if cmd.GetIncludeSchema() {
		return q.oneBatch(schema_ref.TablesWithIncludedSchema, rows)
	}
	return q.oneBatch(schema_ref.Tables, rows)
}

// DoGetTableTypes lists the one table type.
func (q *sqlServer) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return q.oneBatch(schema_ref.TableTypes, [][]any{{tableType}})
}
