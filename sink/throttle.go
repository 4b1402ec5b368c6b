package sink

import (
	"cmp"
	"context"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/status"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// throttledStream paces a DoPut's reads to a byte rate, as a service that caps each stream does
// (Zerobus: 100 MB/s per stream). Reading slower than the client writes fills gRPC's flow-control
// window, so the client feels the cap as backpressure, not as an error.
type throttledStream struct {
	flight.FlightService_DoPutServer
	lim *rate.Limiter
}

// newThrottledStream paces stream to bytesPerSec. The burst is a tenth of a second's worth (at least
// 64 KiB), so a frame larger than the burst is paid for in pieces and the pace stays smooth.
func newThrottledStream(stream flight.FlightService_DoPutServer, bytesPerSec int64) *throttledStream {
	burst := int(max(bytesPerSec/10, 64<<10))
	return &throttledStream{FlightService_DoPutServer: stream, lim: rate.NewLimiter(rate.Limit(bytesPerSec), burst)}
}

func (t *throttledStream) Recv() (*flight.FlightData, error) {
	fd, err := t.FlightService_DoPutServer.Recv()
	if err != nil {
		return fd, err
	}
	ctx := t.Context()
	for n := len(fd.GetDataHeader()) + len(fd.GetDataBody()) + len(fd.GetAppMetadata()); n > 0; {
		take := min(n, t.lim.Burst())
		if t.lim.WaitN(ctx, take) != nil {
			// The call ends (or its deadline falls) before the pace allows these bytes.
			return nil, status.FromContextError(cmp.Or(ctx.Err(), context.DeadlineExceeded)).Err()
		}
		n -= take
	}
	return fd, nil
}
