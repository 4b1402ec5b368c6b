package flightclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/tableschema"
)

// tables is what differs between the dialects outside the DoPut: how a table is described, counted
// and created. New chooses one with the protocol.
type tables interface {
	// describe returns the table's schema (and identity, where the target has one).
	describe(ctx context.Context, c *Client, table tableschema.TableName) (TableInfo, error)
	// counts returns the table's row counts; flush first asks the target to commit what it has
	// acknowledged, where that means anything.
	counts(ctx context.Context, c *Client, table tableschema.TableName, flush bool) (RowCounts, error)
	// create creates the table with schema if it does not exist.
	create(ctx context.Context, c *Client, table tableschema.TableName, schema *arrow.Schema) error
}

// tablesFor returns the table operations of a dialect, which ParseDialect has accepted.
func tablesFor(d Dialect) tables {
	if d == FlightSQL {
		return &sqlTables{names: map[tableschema.TableName][]string{}}
	}
	return sinkTables{}
}

// TableInfo describes a target table.
type TableInfo struct {
	ID     string // a stable identity of the table, "" if the target has none
	Schema *tableschema.Schema
}

// RowCounts is what a target reports about a table's rows.
type RowCounts struct {
	Committed    int64 // rows visible in the table
	Acknowledged int64 // rows acknowledged (durable) but not yet committed to the table
}

// Describe returns the table's schema (and identity, where the target has one).
//
// Zerobus and Flight ask with the embedded sink's describe action (internal/sinkapi); Flight SQL asks
// with GetTables (include_schema), reading the Arrow schema with tableschema.FromArrow. A target
// without the means returns an *UnsupportedError (errors.Is ErrUnsupported); a table it does not
// have is an error wrapping ErrTableNotFound.
func (c *Client) Describe(ctx context.Context, table tableschema.TableName) (TableInfo, error) {
	if err := ctx.Err(); err != nil {
		return TableInfo{}, err
	}
	info, err := c.tables.describe(ctx, c, table)
	if err != nil {
		return TableInfo{}, fmt.Errorf("flightclient: describe %s: %w", table, err)
	}
	return info, nil
}

// Count returns the table's committed row count, first asking the target to commit what it has
// acknowledged. It returns an *UnsupportedError (errors.Is ErrUnsupported) when the target cannot
// count.
//
// Zerobus and Flight use the embedded sink's flush action; a real Zerobus endpoint answers
// Unimplemented. Flight SQL runs SELECT count(*) FROM the table (CommandStatementQuery), unless the
// server's SqlInfo says it runs no SQL.
func (c *Client) Count(ctx context.Context, table tableschema.TableName) (int64, error) {
	res, err := c.counts(ctx, table, true)
	return res.Committed, err
}

// Counts returns the table's committed and acknowledged-but-uncommitted row counts without asking
// the target to commit first. It returns an *UnsupportedError when the target cannot count. Flight SQL
// has no acknowledged-but-uncommitted rows: its Acknowledged is 0.
func (c *Client) Counts(ctx context.Context, table tableschema.TableName) (RowCounts, error) {
	return c.counts(ctx, table, false)
}

func (c *Client) counts(ctx context.Context, table tableschema.TableName, flush bool) (RowCounts, error) {
	if err := ctx.Err(); err != nil {
		return RowCounts{}, err
	}
	res, err := c.tables.counts(ctx, c, table, flush)
	if err != nil {
		return RowCounts{}, fmt.Errorf("flightclient: count %s: %w", table, err)
	}
	return res, nil
}

// Create creates the table with the given Arrow schema if it does not exist; an existing table is
// left as it is. Only Flight SQL can (an ingest call of no rows with TABLE_NOT_EXIST_OPTION_CREATE and
// TABLE_EXISTS_OPTION_APPEND); other dialects return an *UnsupportedError.
func (c *Client) Create(ctx context.Context, table tableschema.TableName, schema *arrow.Schema) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.tables.create(ctx, c, table, schema); err != nil {
		return fmt.Errorf("flightclient: create %s: %w", table, err)
	}
	return nil
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

// notFound wraps a NotFound status with ErrTableNotFound, keeping the status in the chain.
func notFound(err error) error {
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("%w: %w", ErrTableNotFound, err)
	}
	return err
}

// unimplemented turns an Unimplemented status into an *UnsupportedError for what; other errors are
// returned as they are (NotFound wrapped with ErrTableNotFound).
func unimplemented(what string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return &UnsupportedError{What: what, Why: "it answered Unimplemented: " + status.Convert(err).Message(), Err: err}
	}
	return notFound(err)
}

// sinkTables are the table operations of the Zerobus and Flight dialects: the embedded sink's custom
// actions, which any other server answers Unimplemented.
type sinkTables struct{}

func (sinkTables) describe(ctx context.Context, c *Client, table tableschema.TableName) (TableInfo, error) {
	var res sinkapi.TableInfo
	if err := c.action(ctx, table, sinkapi.ActionDescribe, "describe tables", &res); err != nil {
		return TableInfo{}, err
	}
	var (
		schema *tableschema.Schema
		err    error
	)
	switch {
	case res.Columns != "":
		schema, err = tableschema.ParseColumns(res.Columns)
	case res.DeltaSchema != "":
		schema, err = tableschema.ParseDeltaSchema(res.DeltaSchema)
	default:
		err = errors.New("the answer holds no columns")
	}
	if err != nil {
		return TableInfo{}, err
	}
	return TableInfo{ID: res.ID, Schema: schema}, nil
}

func (sinkTables) counts(ctx context.Context, c *Client, table tableschema.TableName, flush bool) (RowCounts, error) {
	typ := sinkapi.ActionCount
	if flush {
		typ = sinkapi.ActionFlush
	}
	var res sinkapi.CountResult
	if err := c.action(ctx, table, typ, "count rows", &res); err != nil {
		return RowCounts{}, err
	}
	return RowCounts{Committed: res.Committed, Acknowledged: res.Acknowledged}, nil
}

func (sinkTables) create(context.Context, *Client, tableschema.TableName, *arrow.Schema) error {
	return &UnsupportedError{What: "create tables", Why: "this dialect has no way to ask for one (Zerobus tables are created in Unity Catalog beforehand)"}
}

// action runs a sinkapi action whose body is the table name and decodes its first result as JSON.
// what names the capability for an *UnsupportedError.
func (c *Client) action(ctx context.Context, table tableschema.TableName, typ, what string, out any) error {
	octx, cancel, err := c.rpcContext(ctx, table)
	if err != nil {
		return err
	}
	defer cancel()
	stream, err := flight.NewFlightServiceClient(c.raw[0]).DoAction(octx, &flight.Action{Type: typ, Body: []byte(table.String())})
	if err != nil {
		return c.probeErr(unimplemented(what, err))
	}
	res, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("action %s returned no result", typ)
		}
		return c.probeErr(unimplemented(what, err))
	}
	if err := json.Unmarshal(res.GetBody(), out); err != nil {
		return fmt.Errorf("action %s: result is not the expected JSON: %w", typ, err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return unimplemented(what, err)
		}
	}
}
