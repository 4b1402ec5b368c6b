package sink

import (
	"context"
	"regexp"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/tableschema"
)

// The one SQL statement the sink runs is the row count a loader verifies a Flight SQL load with:
//
//	SELECT count(*) FROM [[catalog.]schema.]table
//
// keywords in any case, names bare or double-quoted (catalog and schema default as in ingest), an
// optional trailing semicolon. Before counting, the table's acknowledged rows are committed, so the
// count covers everything any dialect acknowledged. Any other statement is InvalidArgument.

const identPattern = `(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*)`

var countStatement = regexp.MustCompile(`(?is)^\s*select\s+count\s*\(\s*(?:\*|1)\s*\)\s+from\s+(` +
	identPattern + `(?:\s*\.\s*` + identPattern + `){0,2})\s*;?\s*$`)

var identRe = regexp.MustCompile(identPattern)

// countSchema is the result of the count statement: one row, one column.
var countSchema = arrow.NewSchema([]arrow.Field{{Name: "count(*)", Type: arrow.PrimitiveTypes.Int64}}, nil)

// parseCount reads the count statement and returns the table it counts.
func parseCount(query string) (tableschema.TableName, error) {
	m := countStatement.FindStringSubmatch(query)
	if m == nil {
		return tableschema.TableName{}, status.Errorf(codes.InvalidArgument,
			"the loader sink runs one statement, SELECT count(*) FROM <table>; not %.200q", query)
	}
	var parts []string
	for _, id := range identRe.FindAllString(m[1], -1) {
		if strings.HasPrefix(id, `"`) {
			id = strings.ReplaceAll(id[1:len(id)-1], `""`, `"`)
		}
		parts = append(parts, id)
	}
	for len(parts) < 3 {
		def := DefaultSchema
		if len(parts) == 2 {
			def = DefaultCatalog
		}
		parts = append([]string{def}, parts...)
	}
	name, err := tableschema.ParseTableName(strings.Join(parts, "."))
	if err != nil {
		return tableschema.TableName{}, status.Errorf(codes.InvalidArgument, "SELECT count(*): %v", err)
	}
	return name, nil
}

// GetFlightInfoStatement plans the count statement; the ticket carries the statement itself.
func (q *sqlServer) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if len(cmd.GetTransactionId()) > 0 {
		return nil, status.Error(codes.Unimplemented, "the loader sink runs queries outside transactions only (its transactions hold one ingest call)")
	}
	name, err := parseCount(cmd.GetQuery())
	if err != nil {
		return nil, err
	}
	if _, err := q.s.wh.Table(ctx, name); err != nil {
		return nil, tableStatus(name, err)
	}
	if q.s.cfg.discard {
		return nil, status.Error(codes.Unimplemented, "the sink discards what it receives and stores nothing to count")
	}
	tkt, err := flightsql.CreateStatementQueryTicket([]byte(cmd.GetQuery()))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ticket: %v", err)
	}
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		FlightDescriptor: desc,
		Schema:           flight.SerializeSchema(countSchema, q.s.cfg.mem),
		TotalRecords:     1,
		TotalBytes:       -1,
	}, nil
}

// DoGetStatement runs the count statement: it commits the table's acknowledged rows, then counts the
// committed ones.
func (q *sqlServer) DoGetStatement(ctx context.Context, cmd flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	name, err := parseCount(string(cmd.GetStatementHandle()))
	if err != nil {
		return nil, nil, err
	}
	if q.s.cfg.discard {
		return nil, nil, status.Error(codes.Unimplemented, "the sink discards what it receives and stores nothing to count")
	}
	if err := q.s.Flush(ctx, name); err != nil {
		return nil, nil, tableStatus(name, err)
	}
	res, err := q.s.count(ctx, name)
	if err != nil {
		return nil, nil, tableStatus(name, err)
	}
	b := array.NewInt64Builder(q.s.cfg.mem)
	defer b.Release()
	b.Append(res.Committed)
	col := b.NewArray()
	defer col.Release()
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: array.NewRecordBatch(countSchema, []arrow.Array{col}, 1)}
	close(ch)
	return countSchema, ch, nil
}
