package flightclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/tableschema"
)

// Count returns the table's committed row count, first asking the target to commit what it has
// acknowledged. It returns ErrUnsupported when the target cannot count.
//
// It uses the embedded sink's flush action (internal/sinkapi.ActionFlush); any other target answers
// Unimplemented (or, for arrow-go Flight SQL servers, InvalidArgument), which is ErrUnsupported.
func (c *Client) Count(ctx context.Context, table tableschema.TableName) (int64, error) {
	var res sinkapi.CountResult
	if err := c.action(ctx, table, sinkapi.ActionFlush, &res); err != nil {
		return 0, fmt.Errorf("flightclient: count %s: %w", table, err)
	}
	return res.Committed, nil
}

// RowCounts is what a target reports about a table's rows.
type RowCounts struct {
	Committed    int64 // rows visible in the table
	Acknowledged int64 // rows acknowledged (durable) but not yet committed to the table
}

// Counts returns the table's committed and acknowledged-but-uncommitted row counts without asking
// the target to commit first (internal/sinkapi.ActionCount). It returns ErrUnsupported when the target
// cannot count.
func (c *Client) Counts(ctx context.Context, table tableschema.TableName) (RowCounts, error) {
	var res sinkapi.CountResult
	if err := c.action(ctx, table, sinkapi.ActionCount, &res); err != nil {
		return RowCounts{}, fmt.Errorf("flightclient: count %s: %w", table, err)
	}
	return RowCounts{Committed: res.Committed, Acknowledged: res.Acknowledged}, nil
}

// TableInfo describes a target table.
type TableInfo struct {
	ID     string // a stable identity of the table, "" if the target has none
	Schema *tableschema.Schema
}

// Describe returns the table's schema (and identity, where the target has one). It returns
// ErrUnsupported when the target cannot describe tables.
//
// It uses the embedded sink's describe action; a Flight SQL target that does not know the action is
// asked with GetTables (include_schema), and its Arrow schema is mapped with tableschema.FromArrow.
// A table the target does not have is an error wrapping a NotFound status.
func (c *Client) Describe(ctx context.Context, table tableschema.TableName) (TableInfo, error) {
	var res sinkapi.TableInfo
	err := c.action(ctx, table, sinkapi.ActionDescribe, &res)
	switch {
	case errors.Is(err, ErrUnsupported) && c.dialect == FlightSQL:
		info, err := c.describeSQL(ctx, table)
		if err != nil {
			return TableInfo{}, fmt.Errorf("flightclient: describe %s: %w", table, err)
		}
		return info, nil
	case err != nil:
		return TableInfo{}, fmt.Errorf("flightclient: describe %s: %w", table, err)
	}
	var schema *tableschema.Schema
	switch {
	case res.Columns != "":
		schema, err = tableschema.ParseColumns(res.Columns)
	case res.DeltaSchema != "":
		schema, err = tableschema.ParseDeltaSchema(res.DeltaSchema)
	default:
		err = errors.New("the answer holds no columns")
	}
	if err != nil {
		return TableInfo{}, fmt.Errorf("flightclient: describe %s: %w", table, err)
	}
	return TableInfo{ID: res.ID, Schema: schema}, nil
}

// rpcContext gives ctx a deadline when it has none, and the call's metadata.
func (c *Client) rpcContext(ctx context.Context, table tableschema.TableName) (context.Context, context.CancelFunc, error) {
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, c.cfg.rpcTimeout)
	}
	octx, err := c.outgoing(ctx, table)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return octx, cancel, nil
}

// action runs a sinkapi action whose body is the table name and decodes its first result as JSON.
func (c *Client) action(ctx context.Context, table tableschema.TableName, typ string, out any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	octx, cancel, err := c.rpcContext(ctx, table)
	if err != nil {
		return err
	}
	defer cancel()
	stream, err := flight.NewFlightServiceClient(c.raw[0]).DoAction(octx, &flight.Action{Type: typ, Body: []byte(table.String())})
	if err != nil {
		return c.actionUnsupported(err)
	}
	res, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("action %s returned no result", typ)
		}
		return c.actionUnsupported(err)
	}
	if err := json.Unmarshal(res.GetBody(), out); err != nil {
		return fmt.Errorf("action %s: result is not the expected JSON: %w", typ, err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return unsupported(err)
		}
	}
}

// unsupported maps Unimplemented to ErrUnsupported, keeping the status in the chain.
func unsupported(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return err
}

// actionUnsupported is unsupported for the answer to a custom action: Flight SQL servers built on
// arrow-go's flightsql package answer actions they do not know with InvalidArgument ("the defined
// request is invalid"), so in that dialect InvalidArgument means unsupported too.
func (c *Client) actionUnsupported(err error) error {
	if c.dialect == FlightSQL && status.Code(err) == codes.InvalidArgument {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return unsupported(err)
}

// describeSQL asks a Flight SQL server for the table with GetTables.
func (c *Client) describeSQL(ctx context.Context, table tableschema.TableName) (TableInfo, error) {
	octx, cancel, err := c.rpcContext(ctx, table)
	if err != nil {
		return TableInfo{}, err
	}
	defer cancel()
	cl := &flightsql.Client{Client: flight.NewClientFromConn(c.raw[0], nil), Alloc: memory.DefaultAllocator}
	info, err := cl.GetTables(octx, &flightsql.GetTablesOpts{
		Catalog:                &table.Catalog,
		DbSchemaFilterPattern:  &table.Schema,
		TableNameFilterPattern: &table.Table,
		IncludeSchema:          true,
	})
	if err != nil {
		return TableInfo{}, fmt.Errorf("GetTables: %w", unsupported(err))
	}
	for _, ep := range info.GetEndpoint() {
		found, err := c.scanTables(octx, cl, ep.GetTicket(), table)
		if err != nil {
			return TableInfo{}, err
		}
		if found != nil {
			return *found, nil
		}
	}
	return TableInfo{}, status.Errorf(codes.NotFound, "the target has no table %s", table)
}

// scanTables reads one GetTables endpoint and returns the table's description if it is there.
func (c *Client) scanTables(ctx context.Context, cl *flightsql.Client, ticket *flight.Ticket, table tableschema.TableName) (*TableInfo, error) {
	rdr, err := cl.DoGet(ctx, ticket)
	if err != nil {
		return nil, fmt.Errorf("GetTables: %w", err)
	}
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		column := func(name string) arrow.Array {
			if is := rec.Schema().FieldIndices(name); len(is) == 1 {
				return rec.Column(is[0])
			}
			return nil
		}
		// text reads a string column; an absent column or a null matches anything.
		text := func(a arrow.Array, row int) (string, bool) {
			s, ok := a.(*array.String)
			if !ok || s.IsNull(row) {
				return "", false
			}
			return s.Value(row), true
		}
		cats, schs, tbls := column("catalog_name"), column("db_schema_name"), column("table_name")
		schemas, ok := column("table_schema").(*array.Binary)
		if tbls == nil || !ok {
			return nil, errors.New("GetTables: the answer lacks table_name or a binary table_schema")
		}
		for row := range int(rec.NumRows()) {
			if v, _ := text(tbls, row); v != table.Table {
				continue
			}
			if v, ok := text(cats, row); ok && v != table.Catalog {
				continue
			}
			if v, ok := text(schs, row); ok && v != table.Schema {
				continue
			}
			as, err := flight.DeserializeSchema(schemas.Value(row), memory.DefaultAllocator)
			if err != nil {
				return nil, fmt.Errorf("GetTables: table_schema of %s: %w", table, err)
			}
			ts, err := tableschema.FromArrow(as)
			if err != nil {
				return nil, fmt.Errorf("GetTables: %w", err)
			}
			return &TableInfo{Schema: ts}, nil
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, fmt.Errorf("GetTables: %w", err)
	}
	return nil, nil
}
