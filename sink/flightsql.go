package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// Defaults for a CommandStatementIngest that omits them.
const (
	DefaultCatalog = "main"
	DefaultSchema  = "default"
)

// ServerName and ServerVersion are what GetSqlInfo reports.
const (
	ServerName    = "loader embedded sink"
	ServerVersion = "1"
)

// sqlServer is the Flight SQL side: bulk ingest and SqlInfo. Everything else is Unimplemented.
type sqlServer struct {
	flightsql.BaseServer
	s *Server
}

func newSQLServer(s *Server) *sqlServer {
	q := &sqlServer{s: s}
	q.Alloc = s.cfg.mem
	for id, v := range map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:                        ServerName,
		flightsql.SqlInfoFlightSqlServerVersion:                     ServerVersion,
		flightsql.SqlInfoFlightSqlServerArrowVersion:                "18",
		flightsql.SqlInfoFlightSqlServerReadOnly:                    false,
		flightsql.SqlInfoFlightSqlServerSql:                         true, // SELECT count(*) only: see flightsql_query.go
		flightsql.SqlInfoFlightSqlServerSubstrait:                   false,
		flightsql.SqlInfoFlightSqlServerTransaction:                 int32(flightsql.SqlTransactionNone),
		flightsql.SqlInfoFlightSqlServerCancel:                      false,
		flightsql.SqlInfoFlightSqlServerBulkIngestion:               true,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported: false,
		flightsql.SqlInfoFlightSqlServerStatementTimeout:            int32(0),
		flightsql.SqlInfoFlightSqlServerTransactionTimeout:          int32(0),
	} {
		if err := q.RegisterSqlInfo(id, v); err != nil {
			panic(err) // a programming error: the types above are the ones RegisterSqlInfo takes
		}
	}
	return q
}

var errNoTransactions = status.Error(codes.Unimplemented,
	"the loader sink does not support transactions (FLIGHT_SQL_SERVER_TRANSACTION is NONE; each ingest call commits on its own)")

// BeginTransaction is refused: the sink has no transactions.
func (q *sqlServer) BeginTransaction(context.Context, flightsql.ActionBeginTransactionRequest) ([]byte, error) {
	return nil, errNoTransactions
}

// BeginSavepoint is refused: the sink has no transactions.
func (q *sqlServer) BeginSavepoint(context.Context, flightsql.ActionBeginSavepointRequest) ([]byte, error) {
	return nil, errNoTransactions
}

// EndTransaction is refused: the sink has no transactions.
func (q *sqlServer) EndTransaction(context.Context, flightsql.ActionEndTransactionRequest) error {
	return errNoTransactions
}

// ingestName resolves the command's table, defaulting catalog and schema.
func ingestName(cmd flightsql.StatementIngest) (tableschema.TableName, error) {
	catalog, schema := cmd.GetCatalog(), cmd.GetSchema()
	if catalog == "" {
		catalog = DefaultCatalog
	}
	if schema == "" {
		schema = DefaultSchema
	}
	if cmd.GetTable() == "" {
		return tableschema.TableName{}, status.Error(codes.InvalidArgument, "CommandStatementIngest: table is empty")
	}
	name, err := tableschema.ParseTableName(catalog + "." + schema + "." + cmd.GetTable())
	if err != nil {
		return tableschema.TableName{}, status.Errorf(codes.InvalidArgument, "CommandStatementIngest: %v", err)
	}
	return name, nil
}

// DoPutCommandStatementIngest is Flight SQL bulk ingest: it creates, appends to or replaces the table
// as TableDefinitionOptions say, casts the batches to the table's canonical schema and commits them in
// one Delta commit. The call's completion is its acknowledgement; nothing goes through the log.
func (q *sqlServer) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	s := q.s
	if cmd.GetTemporary() {
		return 0, status.Error(codes.Unimplemented, "CommandStatementIngest: temporary tables are not supported by the loader sink")
	}
	if len(cmd.GetTransactionId()) > 0 {
		return 0, status.Error(codes.Unimplemented, "CommandStatementIngest: transactions are not supported by the loader sink (FLIGHT_SQL_SERVER_INGEST_TRANSACTIONS_SUPPORTED is false)")
	}
	name, err := ingestName(cmd)
	if err != nil {
		return 0, err
	}
	opts := cmd.GetTableDefinitionOptions()
	if opts == nil {
		return 0, status.Error(codes.InvalidArgument, "CommandStatementIngest: table_definition_options is required")
	}
	src := rdr.Schema()
	if src == nil {
		if err := rdr.Err(); err != nil {
			return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: reading the stream's schema: %v", name, err)
		}
		return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: the stream has no schema", name)
	}

	t, err := s.wh.Table(ctx, name)
	exists := err == nil
	if err != nil && !errors.Is(err, warehouse.ErrTableNotFound) {
		return 0, tableStatus(name, err)
	}
	var (
		target    *tableschema.Schema
		overwrite bool
		operation = "WRITE"
		mode      = "Append"
	)
	if !exists {
		switch opts.GetIfNotExist() {
		case flightsql.TableDefinitionOptionsTableNotExistOptionCreate:
		case flightsql.TableDefinitionOptionsTableNotExistOptionFail:
			return 0, status.Errorf(codes.NotFound, "ingest into %s: the table does not exist (if_not_exist is FAIL)", name)
		default:
			return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: table_definition_options.if_not_exist is %s; want CREATE or FAIL", name, opts.GetIfNotExist())
		}
		if target, err = tableschema.FromArrow(src); err != nil {
			return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: cannot create the table from the stream's schema: %v", name, err)
		}
		if !s.cfg.discard {
			t, err = s.wh.CreateTable(ctx, name, target)
			switch {
			case errors.Is(err, warehouse.ErrTableExists):
				// Another call created it meanwhile (parallel streams all ask to create): go on as
				// if it had existed.
				if t, err = s.wh.Table(ctx, name); err != nil {
					return 0, tableStatus(name, err)
				}
				exists = true
			case err != nil:
				return 0, tableStatus(name, err)
			default:
				s.log.Info("sink: created table for Flight SQL ingest", "table", name.String(), "columns", target.SQL())
			}
		}
	}
	if exists {
		switch opts.GetIfExists() {
		case flightsql.TableDefinitionOptionsTableExistsOptionAppend:
			if target, err = t.Schema(ctx); err != nil {
				return 0, tableStatus(name, err)
			}
		case flightsql.TableDefinitionOptionsTableExistsOptionReplace:
			if target, err = tableschema.FromArrow(src); err != nil {
				return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: cannot replace the table with the stream's schema: %v", name, err)
			}
			overwrite, operation, mode = true, "CREATE OR REPLACE TABLE AS SELECT", "Overwrite"
		case flightsql.TableDefinitionOptionsTableExistsOptionFail:
			return 0, status.Errorf(codes.AlreadyExists, "ingest into %s: the table already exists (if_exists is FAIL)", name)
		default:
			return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: table_definition_options.if_exists is %s; want FAIL, APPEND or REPLACE", name, opts.GetIfExists())
		}
	}

	plan, err := schemamatch.NewPlan(src, target, schemamatch.WithAllocator(s.cfg.mem),
		schemamatch.WithSource("Flight SQL ingest into "+name.String()))
	if err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	var w *warehouse.Writer
	if !s.cfg.discard {
		w = t.NewWriter(warehouse.WithSchema(target))
		defer w.Abort()
	}
	var rows, batch int64
	check := warehouse.NewChecker(target)
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if err := q.writeBatch(ctx, plan, check, w, rec); err != nil {
			return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: batch %d: %v", name, batch, err)
		}
		rows += rec.NumRows()
		batch++
	}
	if err := rdr.Err(); err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "ingest into %s: reading batch %d: %v", name, batch, err)
	}
	if s.cfg.discard {
		return rows, nil
	}
	commit := func(ctx context.Context) (warehouse.CommitResult, error) {
		co := warehouse.CommitOptions{Overwrite: overwrite, Operation: operation,
			OperationParameters: map[string]string{"mode": mode, "source": "flight sql ingest"}}
		if overwrite {
			co.Schema = target
		}
		return w.Commit(ctx, co)
	}
	var res warehouse.CommitResult
	if overwrite {
		res, err = q.replace(ctx, name, target, commit)
	} else {
		res, err = commit(ctx)
	}
	if err != nil {
		return 0, tableStatus(name, err)
	}
	s.log.Debug("sink: Flight SQL ingest committed", "table", name.String(), "rows", res.Rows, "version", res.Version, "mode", mode)
	return res.Rows, nil
}

// writeBatch validates, casts and writes (or, discarding, checks) one batch.
func (q *sqlServer) writeBatch(ctx context.Context, plan *schemamatch.Plan, check *warehouse.Checker, w *warehouse.Writer, rec arrow.RecordBatch) error {
	if err := validateBatch(rec); err != nil {
		return fmt.Errorf("the batch %w", err)
	}
	out, err := plan.Apply(rec)
	if err != nil {
		return err
	}
	defer out.Release()
	if w == nil {
		return checkBatch(check, out)
	}
	return w.Write(ctx, out)
}

// replace commits an overwrite while the table's log is quiet: it first commits what the log holds
// (those rows belong before the replacement), then the overwrite, then tells running streams that
// the schema changed.
func (q *sqlServer) replace(ctx context.Context, name tableschema.TableName, schema *tableschema.Schema,
	commit func(context.Context) (warehouse.CommitResult, error)) (warehouse.CommitResult, error) {
	ts, err := q.s.openIfLogged(ctx, name)
	if err != nil {
		return warehouse.CommitResult{}, err
	}
	if ts == nil || ts.wal == nil {
		return commit(ctx)
	}
	ts.commitMu.Lock()
	defer ts.commitMu.Unlock()
	if err := ts.commitLocked(ctx); err != nil {
		return warehouse.CommitResult{}, err
	}
	res, err := commit(ctx)
	if err == nil {
		ts.setSchema(schema)
	}
	return res, err
}
