package flightclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	"github.com/loaderproject/loader/tableschema"
)

// ingestTransactions reports whether the Flight SQL server advertises ingest transactions
// (FLIGHT_SQL_SERVER_INGEST_TRANSACTIONS_SUPPORTED); a server that cannot say does not.
func (c *Client) ingestTransactions(ctx context.Context, table tableschema.TableName) bool {
	octx, cancel, err := c.rpcContext(ctx, table)
	if err != nil {
		return false
	}
	defer cancel()
	v := sqlInfoBool(octx, c.sqlClient(), flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported)
	return v != nil && *v
}

// beginTxn opens the transaction of a Flight SQL ingest call and returns the call's first FlightData,
// whose CommandStatementIngest carries the transaction id.
func (s *stream) beginTxn(ctx context.Context) (*flightsql.Txn, *flight.FlightData, error) {
	c := s.lr.c
	octx, cancel, err := c.rpcContext(ctx, s.lr.table)
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	txn, err := c.sqlClient().BeginTransaction(octx)
	if err != nil {
		return nil, nil, classify(fmt.Errorf("begin transaction: %w", err))
	}
	desc, err := ingestCommand(s.lr.table, c.cfg.createTable, txn.ID())
	if err != nil {
		return nil, nil, &fatal{err}
	}
	return txn, &flight.FlightData{DataHeader: s.lr.enc.SchemaMessage(), FlightDescriptor: desc}, nil
}

// commitTxn commits the call's transaction once the call ended OK. A failure leaves the call's rows
// unacknowledged: they are sent again (and counted as possibly duplicated, as the commit may have
// happened).
func (s *stream) commitTxn(cl *call) error {
	octx, cancel, err := s.lr.c.rpcContext(context.Background(), s.lr.table)
	if err != nil {
		return err
	}
	defer cancel()
	cl.done = true
	if err := cl.txn.Commit(octx); err != nil {
		return classify(fmt.Errorf("commit transaction: %w", err))
	}
	s.lr.txns.Add(1)
	return nil
}

// endTxn rolls back the transaction of a call that did not end OK; once the rollback is confirmed,
// the call's rows are known not to be in the table.
func (s *stream) endTxn(cl *call) {
	cl.done = true
	octx, cancel, err := s.lr.c.rpcContext(context.Background(), s.lr.table)
	if err != nil {
		return
	}
	defer cancel()
	if err := cl.txn.Rollback(octx); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("rolling back a failed call's transaction", "err", err)
		return
	}
	s.mu.Lock()
	s.rolledBack = true
	s.mu.Unlock()
}
