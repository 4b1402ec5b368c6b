package load

import (
	"context"
	"fmt"
	"time"

	"github.com/loaderproject/loader/tableschema"
)

// Counter counts a table's rows as queries see them (committed rows), for example through a SQL
// warehouse (databricks.SQLCounter). Count may be called from one goroutine at a time.
type Counter interface {
	Count(ctx context.Context, table tableschema.TableName) (int64, error)
}

// DefaultVerifyTimeout is how long VerifyVisible waits for acknowledged rows to become visible:
// Zerobus commits them to the table about 5 s after they are durable (P95 30 s).
const DefaultVerifyTimeout = 60 * time.Second

// DefaultVerifyPoll is the wait between counts while VerifyVisible waits.
const DefaultVerifyPoll = time.Second

// VerifyVisible counts table with c until it has grown by sum.Rows since before (its count before
// the load), or until timeout, waiting poll between counts. It sets sum.VerifiedRows (the growth
// seen), sum.VisibleAfterSeconds (from the call to the count that showed every row) and, when the
// growth differs, sum.VerifyWarning: fewer rows means they are durable but not yet visible, more
// means possible duplicates (Zerobus delivers at least once). Neither is an error; the error is a
// failed count (or ctx ending).
func VerifyVisible(ctx context.Context, c Counter, table tableschema.TableName, before int64, sum *Summary, timeout, poll time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultVerifyTimeout
	}
	if poll <= 0 {
		poll = DefaultVerifyPoll
	}
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		n, err := c.Count(ctx, table)
		if err != nil {
			return fmt.Errorf("count %s after loading: %w", table, err)
		}
		grew := n - before
		sum.VerifiedRows, sum.NotVerified = &grew, ""
		if grew >= sum.Rows {
			secs := time.Since(start).Seconds()
			sum.VisibleAfterSeconds = &secs
			if grew > sum.Rows {
				sum.VerifyWarning = fmt.Sprintf("table %s grew by %d rows but %d were acknowledged: %d possible duplicates (Zerobus delivers at least once), or another writer", table, grew, sum.Rows, grew-sum.Rows)
			}
			return nil
		}
		if !time.Now().Add(poll).Before(deadline) {
			sum.VerifyWarning = fmt.Sprintf("%d of %d acknowledged rows are visible in %s after %s: the rows are durable but not yet visible (Zerobus commits them to the table later; count again in a minute)",
				grew, sum.Rows, table, timeout)
			return nil
		}
		t := time.NewTimer(poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
