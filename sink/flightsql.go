package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/google/uuid"
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

	txMu sync.Mutex
	txns map[string]*sqlTxn // open ingest transactions by id
}

// sqlTxn is an open transaction: at most one ingest call, staged until EndTransaction.
type sqlTxn struct {
	used   bool
	w      *warehouse.Writer
	commit func(context.Context) (warehouse.CommitResult, error)
}

func newSQLServer(s *Server) *sqlServer {
	q := &sqlServer{s: s, txns: map[string]*sqlTxn{}}
	q.Alloc = s.cfg.mem
	for id, v := range map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:                        ServerName,
		flightsql.SqlInfoFlightSqlServerVersion:                     ServerVersion,
		flightsql.SqlInfoFlightSqlServerArrowVersion:                "18",
		flightsql.SqlInfoFlightSqlServerReadOnly:                    false,
		flightsql.SqlInfoFlightSqlServerSql:                         true, // SELECT count(*) only: see flightsql_query.go
		flightsql.SqlInfoFlightSqlServerSubstrait:                   false,
		flightsql.SqlInfoFlightSqlServerTransaction:                 int32(flightsql.SqlTransactionTransaction),
		flightsql.SqlInfoFlightSqlServerCancel:                      false,
		flightsql.SqlInfoFlightSqlServerBulkIngestion:               true,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported: true,
		flightsql.SqlInfoFlightSqlServerStatementTimeout:            int32(0),
		flightsql.SqlInfoFlightSqlServerTransactionTimeout:          int32(0),
	} {
		if err := q.RegisterSqlInfo(id, v); err != nil {
			panic(err) // a programming error: the types above are the ones RegisterSqlInfo takes
		}
	}
	return q
}

var errNoSavepoints = status.Error(codes.Unimplemented, "the loader sink has no savepoints")

// BeginTransaction opens an ingest transaction: one CommandStatementIngest with its id is staged, and
// committed (in one Delta commit) or dropped by EndTransaction.
func (q *sqlServer) BeginTransaction(context.Context, flightsql.ActionBeginTransactionRequest) ([]byte, error) {
	id := uuid.NewString()
	q.txMu.Lock()
	defer q.txMu.Unlock()
	q.txns[id] = &sqlTxn{}
	return []byte(id), nil
}

// BeginSavepoint is refused: the sink has no savepoints.
func (q *sqlServer) BeginSavepoint(context.Context, flightsql.ActionBeginSavepointRequest) ([]byte, error) {
	return nil, errNoSavepoints
}

// EndTransaction commits or rolls back what the transaction's ingest call staged.
func (q *sqlServer) EndTransaction(ctx context.Context, req flightsql.ActionEndTransactionRequest) error {
	id := string(req.GetTransactionId())
	q.txMu.Lock()
	tx := q.txns[id]
	delete(q.txns, id)
	q.txMu.Unlock()
	if tx == nil {
		return status.Errorf(codes.NotFound, "transaction %q is not open", id)
	}
	if tx.w == nil {
		return nil // nothing staged (or discard mode)
	}
	if req.GetAction() != flightsql.EndTransactionCommit {
		tx.w.Abort()
		return nil
	}
	defer tx.w.Abort() // a no-op after a commit
	res, err := tx.commit(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "commit transaction %q: %v", id, err)
	}
	q.s.log.Debug("sink: Flight SQL ingest transaction committed", "rows", res.Rows, "version", res.Version)
	return nil
}

// abortTransactions drops what open transactions staged (at shutdown).
func (q *sqlServer) abortTransactions() {
	q.txMu.Lock()
	defer q.txMu.Unlock()
	for id, tx := range q.txns {
		if tx.w != nil {
			tx.w.Abort()
		}
		delete(q.txns, id)
	}
}

// takeTxn claims an open transaction for one ingest call.
func (q *sqlServer) takeTxn(id []byte) (*sqlTxn, error) {
	q.txMu.Lock()
	defer q.txMu.Unlock()
	tx := q.txns[string(id)]
	switch {
	case tx == nil:
		return nil, status.Errorf(codes.NotFound, "CommandStatementIngest: transaction %q is not open", id)
	case tx.used:
		return nil, status.Errorf(codes.FailedPrecondition, "CommandStatementIngest: transaction %q already holds an ingest call; the loader sink takes one per transaction", id)
	}
	tx.used = true
	return tx, nil
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
	var tx *sqlTxn
	if id := cmd.GetTransactionId(); len(id) > 0 {
		var err error
		if tx, err = q.takeTxn(id); err != nil {
			return 0, err
		}
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
	var (
		w      *warehouse.Writer
		staged bool
	)
	if !s.cfg.discard {
		w = t.NewWriter(warehouse.WithSchema(target))
		defer func() {
			if !staged { // else a transaction took it
				w.Abort()
			}
		}()
	}
	var rows, batch int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if err := q.writeBatch(ctx, plan, w, rec); err != nil {
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
	switch {
	case tx != nil:
		// Staged: EndTransaction commits it (or drops it). The writer outlives this call.
		q.txMu.Lock()
		tx.w = w
		tx.commit = commit
		if overwrite {
			tx.commit = func(ctx context.Context) (warehouse.CommitResult, error) { return q.replace(ctx, name, target, commit) }
		}
		staged = true
		q.txMu.Unlock()
		return rows, nil
	case overwrite:
		res, err = q.replace(ctx, name, target, commit)
	default:
		res, err = commit(ctx)
	}
	if err != nil {
		return 0, tableStatus(name, err)
	}
	s.log.Debug("sink: Flight SQL ingest committed", "table", name.String(), "rows", res.Rows, "version", res.Version, "mode", mode)
	return res.Rows, nil
}

// writeBatch validates, casts and writes one batch; discarding, it checks the batch's structure
// only, as DoPut does (WithDiscard).
func (q *sqlServer) writeBatch(ctx context.Context, plan *schemamatch.Plan, w *warehouse.Writer, rec arrow.RecordBatch) error {
	if err := checkBatchStructure(rec, !q.s.cfg.discard); err != nil {
		return fmt.Errorf("the batch %w", err)
	}
	if q.s.cfg.discard {
		return nil
	}
	out, err := plan.Apply(rec)
	if err != nil {
		return err
	}
	defer out.Release()
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
