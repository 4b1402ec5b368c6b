package flightclient

import (
	"context"
	"errors"
	"strconv"

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
	err := c.action(ctx, table, sinkapi.ActionUnitIDs, "deduplicate by unit id", &res)
	switch {
	case errors.Is(err, ErrUnsupported):
		return false, nil
	case err != nil:
		return false, err
	case !res.UnitIDs:
		return false, nil
	}
	c.unitID = id
	return true, nil
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
