package flightclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
)

// sqlTables are the table operations of the Flight SQL dialect, in standard Flight SQL only, so that
// they work against any server: GetTables to describe, SELECT count(*) to count, an ingest of no rows
// to create. Servers differ in what they implement; every step degrades to an *UnsupportedError
// rather than failing the load.
type sqlTables struct {
	mu sync.Mutex
	// names holds, per table it described, the parts the server reported (catalog and schema left
	// out where the server has none), which a query must use to find the table.
	names map[tableschema.TableName][]string
	// runsSQL is the server's FLIGHT_SQL_SERVER_SQL, nil until asked or when the server did not say.
	runsSQL  *bool
	infoDone bool
}

// sqlClient is an arrow-go Flight SQL client over the client's first connection.
func (c *Client) sqlClient() *flightsql.Client {
	return &flightsql.Client{Client: flight.NewClientFromConn(c.raw[0], nil), Alloc: memory.DefaultAllocator}
}

// tableRow is one GetTables row that names the table.
type tableRow struct {
	parts  []string // as the server names it
	exact  bool     // catalog and schema are the ones asked for
	schema []byte   // table_schema, an IPC schema
}

func (t *sqlTables) describe(ctx context.Context, c *Client, table tableschema.TableName) (TableInfo, error) {
	octx, cancel, err := c.rpcContext(ctx, table)
	if err != nil {
		return TableInfo{}, err
	}
	defer cancel()
	cl := c.sqlClient()
	rows, err := getTables(octx, cl, &flightsql.GetTablesOpts{
		Catalog: &table.Catalog, DbSchemaFilterPattern: &table.Schema, TableNameFilterPattern: &table.Table, IncludeSchema: true,
	}, table)
	if err == nil && len(rows) == 0 {
		// Servers without catalogs or schemas answer nothing to those filters (SQLite calls its
		// one catalog "main" and has no schemas): ask by the table's name alone.
		rows, err = getTables(octx, cl, &flightsql.GetTablesOpts{TableNameFilterPattern: &table.Table, IncludeSchema: true}, table)
	}
	if err != nil {
		return TableInfo{}, err
	}
	row, err := pickTable(rows, table)
	if err != nil {
		return TableInfo{}, err
	}
	as, err := flight.DeserializeSchema(row.schema, memory.DefaultAllocator)
	if err != nil {
		return TableInfo{}, fmt.Errorf("GetTables: the table_schema of %s: %w", table, err)
	}
	ts, err := tableschema.FromArrow(as)
	if err != nil {
		return TableInfo{}, fmt.Errorf("GetTables: the server describes %s as %s: %w", table, as, err)
	}
	t.mu.Lock()
	t.names[table] = row.parts
	t.mu.Unlock()
	return TableInfo{Schema: ts}, nil
}

// pickTable chooses the row that is the table: the one in the catalog and schema asked for, else the
// only one whose missing catalog or schema does not contradict them.
func pickTable(rows []tableRow, table tableschema.TableName) (tableRow, error) {
	var loose []tableRow
	for _, r := range rows {
		if r.exact {
			return r, nil
		}
		loose = append(loose, r)
	}
	switch len(loose) {
	case 0:
		return tableRow{}, fmt.Errorf("%w: the target's GetTables lists no table %s", ErrTableNotFound, table)
	case 1:
		return loose[0], nil
	}
	var names []string
	for _, r := range loose {
		names = append(names, strings.Join(r.parts, "."))
	}
	return tableRow{}, fmt.Errorf("GetTables: several tables could be %s: %s", table, strings.Join(names, ", "))
}

// getTables runs GetTables and returns the rows naming the table.
func getTables(ctx context.Context, cl *flightsql.Client, opts *flightsql.GetTablesOpts, table tableschema.TableName) ([]tableRow, error) {
	info, err := cl.GetTables(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("GetTables: %w", unimplemented("describe tables", err))
	}
	var rows []tableRow
	for _, ep := range info.GetEndpoint() {
		got, err := scanTables(ctx, cl, ep.GetTicket(), table)
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

// scanTables reads one GetTables endpoint. A table_name LIKE pattern matches more than the name (an
// underscore is a wildcard), so names are compared exactly here.
func scanTables(ctx context.Context, cl *flightsql.Client, ticket *flight.Ticket, table tableschema.TableName) ([]tableRow, error) {
	rdr, err := cl.DoGet(ctx, ticket)
	if err != nil {
		return nil, fmt.Errorf("GetTables: %w", unimplemented("describe tables", err))
	}
	defer rdr.Release()
	var out []tableRow
	for rdr.Next() {
		rec := rdr.RecordBatch()
		column := func(name string) arrow.Array {
			if is := rec.Schema().FieldIndices(name); len(is) == 1 {
				return rec.Column(is[0])
			}
			return nil
		}
		// text reads a string column; an absent column or a null reads as "".
		text := func(a arrow.Array, row int) string {
			if s, ok := a.(*array.String); ok && s.IsValid(row) {
				return s.Value(row)
			}
			return ""
		}
		cats, schs, tbls := column("catalog_name"), column("db_schema_name"), column("table_name")
		schemas, ok := column("table_schema").(*array.Binary)
		if tbls == nil || !ok {
			return nil, errors.New("GetTables: the answer lacks table_name or a binary table_schema")
		}
		for row := range int(rec.NumRows()) {
			if text(tbls, row) != table.Table {
				continue
			}
			cat, sch := text(cats, row), text(schs, row)
			if (cat != "" && cat != table.Catalog) || (sch != "" && sch != table.Schema) {
				continue
			}
			if schemas.IsNull(row) {
				return nil, fmt.Errorf("GetTables: no table_schema for %s", table)
			}
			r := tableRow{exact: cat == table.Catalog && sch == table.Schema, schema: schemas.Value(row)}
			for _, p := range []string{cat, sch} {
				if p != "" {
					r.parts = append(r.parts, p)
				}
			}
			r.parts = append(r.parts, table.Table)
			out = append(out, r)
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, fmt.Errorf("GetTables: %w", err)
	}
	return out, nil
}

// quoteIdent quotes a SQL identifier with double quotes, as the SQL standard does.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// countQuery is the statement that counts the table's rows, naming it as the server does when it
// described the table.
func (t *sqlTables) countQuery(table tableschema.TableName) string {
	t.mu.Lock()
	parts := t.names[table] // counts filled it
	t.mu.Unlock()
	quoted := make([]string, len(parts))
	for i, p := range parts {
		quoted[i] = quoteIdent(p)
	}
	return "SELECT count(*) FROM " + strings.Join(quoted, ".")
}

func (t *sqlTables) counts(ctx context.Context, c *Client, table tableschema.TableName, _ bool) (RowCounts, error) {
	t.mu.Lock()
	_, described := t.names[table]
	t.mu.Unlock()
	if !described {
		// Learn how the server names the table; a server that cannot say is asked by the full name
		// (remembered, so GetTables is not asked again on the next count).
		if _, err := t.describe(ctx, c, table); err != nil {
			if ctx.Err() != nil {
				return RowCounts{}, ctx.Err()
			}
			t.mu.Lock()
			t.names[table] = table.Parts()
			t.mu.Unlock()
		}
	}
	octx, cancel, err := c.rpcContext(ctx, table)
	if err != nil {
		return RowCounts{}, err
	}
	defer cancel()
	cl := c.sqlClient()
	if !t.answersSQL(octx, cl) {
		return RowCounts{}, &UnsupportedError{What: "count rows", Why: "its SqlInfo says it runs no SQL (FLIGHT_SQL_SERVER_SQL is false)"}
	}
	query := t.countQuery(table)
	info, err := cl.Execute(octx, query)
	if err != nil {
		return RowCounts{}, queryError(query, err)
	}
	var counts []int64
	for _, ep := range info.GetEndpoint() {
		got, err := readIntegers(octx, cl, ep.GetTicket())
		if err != nil {
			return RowCounts{}, queryError(query, err)
		}
		counts = append(counts, got...)
	}
	if len(counts) != 1 {
		return RowCounts{}, fmt.Errorf("%s: want one row, got %d", query, len(counts))
	}
	return RowCounts{Committed: counts[0]}, nil
}

// readIntegers reads the first column of one endpoint's rows as integers.
func readIntegers(ctx context.Context, cl *flightsql.Client, ticket *flight.Ticket) ([]int64, error) {
	rdr, err := cl.DoGet(ctx, ticket)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumCols() < 1 {
			return nil, fmt.Errorf("want one column, got %s", rec.Schema())
		}
		for i := range int(rec.NumRows()) {
			n, err := integerAt(rec.Column(0), i)
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
	}
	return out, rdr.Err()
}

// queryError classifies the failure of the count query: a server that does not run it (Unimplemented,
// or InvalidArgument from a parser that does not take it) cannot count; a missing table is
// ErrTableNotFound; anything else is an error.
func queryError(query string, err error) error {
	switch status.Code(err) {
	case codes.Unimplemented, codes.InvalidArgument:
		return &UnsupportedError{What: "count rows",
			Why: fmt.Sprintf("it did not run %s (%s: %s)", query, status.Code(err), status.Convert(err).Message()), Err: err}
	}
	return fmt.Errorf("%s: %w", query, notFound(err))
}

// integerAt reads row i of an integer column (or a decimal of scale 0, as some databases type
// count(*)) as an int64.
func integerAt(a arrow.Array, i int) (int64, error) {
	if a.IsNull(i) {
		return 0, errors.New("the count is null")
	}
	switch v := a.(type) {
	case *array.Int64:
		return v.Value(i), nil
	case *array.Int32:
		return int64(v.Value(i)), nil
	case *array.Int16:
		return int64(v.Value(i)), nil
	case *array.Int8:
		return int64(v.Value(i)), nil
	case *array.Uint64:
		if v.Value(i) > 1<<63-1 {
			return 0, fmt.Errorf("the count %d does not fit an int64", v.Value(i))
		}
		return int64(v.Value(i)), nil
	case *array.Uint32:
		return int64(v.Value(i)), nil
	case *array.Uint16:
		return int64(v.Value(i)), nil
	case *array.Uint8:
		return int64(v.Value(i)), nil
	case *array.Decimal128:
		if dt := v.DataType().(*arrow.Decimal128Type); dt.Scale == 0 && v.Value(i).FitsInPrecision(18) {
			return int64(v.Value(i).LowBits()), nil
		}
	}
	return 0, fmt.Errorf("the count is of type %s, want an integer", a.DataType())
}

// answersSQL reports whether the server may run SQL queries: false only when its SqlInfo says so.
// It asks once per client; a server without GetSqlInfo counts as one that may.
func (t *sqlTables) answersSQL(ctx context.Context, cl *flightsql.Client) bool {
	t.mu.Lock()
	done, v := t.infoDone, t.runsSQL
	t.mu.Unlock()
	if !done {
		v = sqlInfoBool(ctx, cl, flightsql.SqlInfoFlightSqlServerSql)
		if ctx.Err() != nil {
			return true // the caller's next call reports the context
		}
		t.mu.Lock()
		t.infoDone, t.runsSQL = true, v
		t.mu.Unlock()
	}
	return v == nil || *v
}

// sqlInfoBool reads one boolean SqlInfo; nil when the server does not say (or cannot be asked).
func sqlInfoBool(ctx context.Context, cl *flightsql.Client, id flightsql.SqlInfo) *bool {
	info, err := cl.GetSqlInfo(ctx, []flightsql.SqlInfo{id})
	if err != nil {
		return nil
	}
	for _, ep := range info.GetEndpoint() {
		rdr, err := cl.DoGet(ctx, ep.GetTicket())
		if err != nil {
			return nil
		}
		v := findSqlInfoBool(rdr, id)
		rdr.Release()
		if v != nil {
			return v
		}
	}
	return nil
}

func findSqlInfoBool(rdr *flight.Reader, id flightsql.SqlInfo) *bool {
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumCols() < 2 {
			return nil
		}
		names, ok1 := rec.Column(0).(*array.Uint32)
		vals, ok2 := rec.Column(1).(*array.DenseUnion)
		if !ok1 || !ok2 {
			return nil
		}
		for i := range int(rec.NumRows()) {
			if names.Value(i) != uint32(id) {
				continue
			}
			if b, ok := vals.Field(vals.ChildID(i)).(*array.Boolean); ok {
				v := b.Value(int(vals.ValueOffset(i)))
				return &v
			}
			return nil
		}
	}
	return nil
}

func (t *sqlTables) create(ctx context.Context, c *Client, table tableschema.TableName, schema *arrow.Schema) error {
	desc, err := ingestCommand(table, true)
	if err != nil {
		return err
	}
	enc, err := partitioner.NewEncoder(schema, c.cfg.maxFrameBytes)
	if err != nil {
		return err
	}
	octx, cancel, err := c.rpcContext(ctx, table)
	if err != nil {
		return err
	}
	defer cancel()
	ps, err := flight.NewFlightServiceClient(c.raw[0]).DoPut(octx)
	if err != nil {
		return unimplemented("create tables", err)
	}
	// An io.EOF from Send means the server already ended the call: its status comes from Recv.
	if err := ps.Send(&flight.FlightData{FlightDescriptor: desc, DataHeader: enc.SchemaMessage()}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := ps.CloseSend(); err != nil {
		return err
	}
	for {
		res, err := ps.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return unimplemented("create tables", err)
		}
		var r pb.DoPutUpdateResult
		if err := proto.Unmarshal(res.GetAppMetadata(), &r); err != nil {
			return fmt.Errorf("the answer to an ingest of no rows is not a DoPutUpdateResult: %w", err)
		}
		if n := r.GetRecordCount(); n > 0 {
			return fmt.Errorf("the server reported %d rows ingested by a call that sent none", n)
		}
	}
}
