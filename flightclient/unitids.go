package flightclient

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
)

// EnableUnitIDs asks the target whether it deduplicates data frames by unit id (the embedded sink's
// loader.unit-ids action) and, when it does, makes every later Load tag each data frame's
// app_metadata with id(frame span) and the frame's row range in its unit, so the target stores each
// range once however often it is sent. It returns whether the target accepted; a target that does
// not know the action (any real Zerobus or Flight server, every Flight SQL one) is not an error and
// gets no unit ids. id must be stable across runs of the same load and may be called from several
// goroutines. Call it before Load, not during one.
func (c *Client) EnableUnitIDs(ctx context.Context, table tableschema.TableName, id func(partitioner.Span) string) (bool, error) {
	if c.dialect == FlightSQL || id == nil {
		return false, nil
	}
	var res sinkapi.UnitIDsResult
	var err error
	// A transient failure (a connection reset, a restarting server) is retried as a stream would be.
	for attempt := 1; ; attempt++ {
		err = c.action(ctx, table, sinkapi.ActionUnitIDs, "deduplicate by unit id", &res)
		if err == nil || !Transient(err) || attempt > c.cfg.retries {
			break
		}
		t := time.NewTimer(backoff(attempt, c.cfg.backoffBase, c.cfg.backoffMax))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		}
	}
	switch {
	case errors.Is(err, ErrUnsupported):
		return false, nil
	case err != nil && ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil && Transient(err):
		return false, err // the target is unreachable: the load could not go on anyway
	case err != nil:
		// Any other refusal (a server that answers unknown actions otherwise than Unimplemented)
		// means no unit ids: the load goes on at least once, and counts what it may duplicate.
		c.cfg.logger.Debug("the target refused loader.unit-ids; loading at least once", "err", err)
		return false, nil
	case !res.UnitIDs:
		return false, nil
	}
	c.unitID = id
	return true, nil
}

// Transient reports whether err carries a gRPC status that a retry may cure: Unavailable (a restarting
// or unreachable server, a reset connection), ResourceExhausted, Aborted or DeadlineExceeded. Errors
// without a status (a corrupt local file, a bad answer) are not transient.
func Transient(err error) bool {
	st, ok := status.FromError(err)
	if err == nil || !ok || errors.Is(err, context.Canceled) {
		return false
	}
	switch st.Code() {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded:
		return true
	}
	return false
}

// appendUnitMeta appends the unit fields of sinkapi.UnitMeta and the closing brace to meta, a JSON
// object without its closing brace.
func appendUnitMeta(meta []byte, unit string, from, to int64) []byte {
	b := make([]byte, 0, len(meta)+len(unit)+48)
	b = append(b, meta...)
	b = append(b, `,"unit":`...)
	b = strconv.AppendQuote(b, unit)
	b = append(b, `,"from":`...)
	b = strconv.AppendInt(b, from, 10)
	b = append(b, `,"to":`...)
	b = strconv.AppendInt(b, to, 10)
	return append(b, '}')
}
