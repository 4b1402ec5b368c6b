package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/sink/internal/wal"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

// streamBudget bounds the bytes of received frames one stream keeps while they wait for the log.
const streamBudget = 64 << 20

type dialect int

const (
	dialectZerobus dialect = iota
	dialectFlight
)

func (d dialect) String() string {
	if d == dialectZerobus {
		return "zerobus"
	}
	return "flight"
}

// ackItem is one received data frame on its way to being acknowledged.
type ackItem struct {
	fut     *wal.Pending   // nil: nothing to wait for (discard mode, zero rows, rows held already)
	deps    []*wal.Pending // records of other frames holding rows of this one (unit ids)
	offset  int64
	records int64 // cumulative rows on this DoPut, this frame included
	size    int64 // stream budget held until fut completes
}

type recvResult struct {
	fd  *flight.FlightData
	err error
}

// putStream is one Zerobus or plain Flight DoPut after its setup.
type putStream struct {
	s       *Server
	ts      *tableState
	stream  flight.FlightService_DoPutServer
	dialect dialect
	faults  streamFaults
	budget  *semaphore.Weighted

	// The receiving goroutine's state.
	schemaHeader []byte             // the schema frame's IPC message, stored with every frame
	dec          *decoder           // decodes data frames against that schema
	check        *warehouse.Checker // checks frames against the table's schema
	gen          uint64             // that schema's generation (tableState.currentSchema)
	expected     int64              // next offset_id
	records      int64              // rows received so far, cumulative as acks report them
}

func invalidf(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// ingest runs a Zerobus or plain Flight DoPut whose first FlightData is first.
func (s *Server) ingest(stream flight.FlightService_DoPutServer, ts *tableState, first *flight.FlightData, d dialect) error {
	// The schema frame.
	if len(first.GetDataHeader()) == 0 {
		return invalidf("schema frame: data_header is empty; the first FlightData must carry an IPC Schema message")
	}
	if d == dialectZerobus && len(first.GetAppMetadata()) != 0 {
		return invalidf("schema frame: app_metadata must be empty, got %d bytes (offset_id belongs on data frames)", len(first.GetAppMetadata()))
	}
	if len(first.GetDataBody()) != 0 {
		return invalidf("schema frame: data_body must be empty, got %d bytes", len(first.GetDataBody()))
	}
	mem := newLimitedAllocator(s.cfg.mem, maxDecodedFrameBytes)
	dec, err := newDecoder(first.GetDataHeader(), mem)
	if err != nil {
		return invalidf("schema frame: %v", err)
	}
	defer dec.release()
	dec.structureOnly = s.cfg.discard
	schema, gen := ts.currentSchema()
	if se := zerobus.ValidateSchema(schema, dec.schema); se != nil {
		return se
	}
	p := &putStream{
		s: s, ts: ts, stream: stream, dialect: d,
		faults: s.faults.forStream(),
		budget: semaphore.NewWeighted(streamBudget),

		schemaHeader: first.GetDataHeader(), dec: dec, check: warehouse.NewChecker(schema), gen: gen,
	}
	if err := stream.Send(&flight.PutResult{AppMetadata: zerobus.Ready().Marshal()}); err != nil {
		return err
	}
	s.log.Debug("sink: stream ready", "table", ts.name.String(), "dialect", d.String())
	return p.run()
}

// run receives data frames until the client half-closes, with one goroutine receiving and one
// sending acks, and returns the call's status.
func (p *putStream) run() (err error) {
	ctx, cancel := context.WithCancelCause(p.stream.Context())
	defer cancel(nil)

	frames := make(chan recvResult, 1)
	p.s.wg.Add(2)
	go func() {
		defer p.s.wg.Done()
		for {
			fd, err := p.stream.Recv()
			select {
			case frames <- recvResult{fd, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	acks := make(chan ackItem, 1024)
	ackDone := make(chan error, 1)
	go func() {
		defer p.s.wg.Done()
		err := p.ackLoop(ctx, acks)
		if err != nil {
			cancel(err)
		}
		ackDone <- err
	}()
	// finish closes the ack queue and waits for the ack goroutine: with drain, after it has
	// acknowledged every queued frame; without, at once.
	finished := false
	finish := func(drain bool) error {
		if finished {
			return nil
		}
		finished = true
		if !drain {
			cancel(context.Canceled)
		}
		close(acks)
		return <-ackDone
	}
	defer func() {
		// Only a failing return leaves the ack side unfinished, and then what the ack side says (the
		// cancellation just made, most often) comes second.
		if ferr := finish(false); err == nil && ferr != nil {
			err = ackStatus(ctx, ferr)
		}
	}()

	nframes := 0
	for {
		var r recvResult
		select {
		case r = <-frames:
		case err := <-ackDone:
			finished = true
			return ackStatus(ctx, err)
		case <-p.s.closing:
			if aerr := finish(true); aerr != nil {
				return ackStatus(ctx, aerr)
			}
			return status.Errorf(codes.Unavailable, "sink is shutting down: rows acknowledged up to offset %d are durable; reconnect and send the rest", p.expected-1)
		}
		if errors.Is(r.err, io.EOF) {
			// Half-close: acknowledge everything, then end OK.
			if aerr := finish(true); aerr != nil {
				return ackStatus(ctx, aerr)
			}
			p.s.log.Debug("sink: stream done", "table", p.ts.name.String(), "frames", nframes, "rows", p.records)
			return nil
		}
		if r.err != nil {
			return r.err
		}
		nframes++
		if p.faults.dropAfter > 0 && nframes >= p.faults.dropAfter {
			if aerr := finish(true); aerr != nil {
				return ackStatus(ctx, aerr)
			}
			return status.Errorf(codes.Unavailable, "sink fault injection: stream dropped at data frame %d (drop_after_frames)", nframes)
		}
		item, perr := p.frame(ctx, r.fd)
		if perr != nil {
			// Acknowledge what is already durable so the client replays as little as possible.
			if aerr := finish(true); aerr != nil && ctx.Err() == nil {
				return ackStatus(ctx, aerr)
			}
			return perr
		}
		select {
		case acks <- item:
		case err := <-ackDone:
			finished = true
			return ackStatus(ctx, err)
		}
		p.expected++
	}
}

// ackStatus is the call's status when the ack side failed first.
func ackStatus(ctx context.Context, err error) error {
	if err == nil {
		err = context.Cause(ctx)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "%v", err)
}

// frame checks, decodes and stores the data frame numbered p.expected.
func (p *putStream) frame(ctx context.Context, fd *flight.FlightData) (ackItem, error) {
	offset := p.expected
	var um sinkapi.UnitMeta
	if meta := fd.GetAppMetadata(); p.dialect == dialectZerobus || len(meta) > 0 {
		got, err := zerobus.ParseFrameMetadata(meta)
		if err != nil {
			return ackItem{}, invalidf("data frame after offset %d: %v", p.expected-1, err)
		}
		offset = got
		if bytes.Contains(meta, []byte(`"unit"`)) {
			if err := json.Unmarshal(meta, &um); err != nil {
				return ackItem{}, invalidf("data frame at offset %d: app_metadata unit fields: %v", offset, err)
			}
		}
	}
	if offset != p.expected {
		return ackItem{}, zerobus.NonIncrementalOffsetError(p.expected, offset)
	}
	if len(fd.GetDataHeader()) == 0 {
		return ackItem{}, invalidf("data frame at offset %d: data_header is empty; want an IPC RecordBatch message", offset)
	}
	// The table's schema was replaced (Flight SQL): the stream must still fit it.
	if cur, g := p.ts.currentSchema(); g != p.gen {
		if se := zerobus.ValidateSchema(cur, p.dec.schema); se != nil {
			return ackItem{}, se
		}
		p.check, p.gen = warehouse.NewChecker(cur), g
	}
	rec, err := p.dec.decode(fd.GetDataHeader(), fd.GetDataBody())
	if err != nil {
		return ackItem{}, invalidf("data frame at offset %d %v", offset, err)
	}
	rows := rec.NumRows()
	if !p.s.cfg.discard { // the discard sink checks structure and counts rows, not values (sink.go)
		err = checkBatch(p.check, rec)
	}
	rec.Release()
	if err != nil {
		return ackItem{}, invalidf("data frame at offset %d: %v", offset, err)
	}
	if um.Unit != "" && (um.From < 0 || um.To-um.From != rows) {
		return ackItem{}, invalidf("data frame at offset %d: unit %q rows [%d,%d) but the frame holds %d rows", offset, um.Unit, um.From, um.To, rows)
	}
	p.records += rows
	item := ackItem{offset: offset, records: p.records}
	if p.ts.wal == nil || rows == 0 {
		return item, nil
	}
	if um.Unit != "" && p.ts.units != nil {
		return p.storeUnit(ctx, item, fd, um)
	}
	size := int64(len(p.schemaHeader) + len(fd.GetDataHeader()) + len(fd.GetDataBody()))
	item.size = min(size, streamBudget)
	if err := p.budget.Acquire(ctx, item.size); err != nil {
		return ackItem{}, ackStatus(ctx, err)
	}
	ts := p.ts
	fut, err := ts.wal.AppendFunc(ctx, func(uint64) { ts.pending.Add(rows); ts.s.cfg.events.durable(ts.name, rows, size) },
		recordParts(rows, nil, p.schemaHeader, fd.GetDataHeader(), fd.GetDataBody())...)
	if err != nil {
		p.budget.Release(item.size)
		if ctx.Err() != nil {
			return ackItem{}, ackStatus(ctx, ctx.Err())
		}
		return ackItem{}, status.Errorf(codes.Unavailable, "table %s: write-ahead log: %v", ts.name, err)
	}
	item.fut = fut
	return item, nil
}

// storeUnit logs the rows of a tagged frame that the table does not hold yet.
func (p *putStream) storeUnit(ctx context.Context, item ackItem, fd *flight.FlightData, um sinkapi.UnitMeta) (ackItem, error) {
	ts := p.ts
	size := int64(len(p.schemaHeader) + len(fd.GetDataHeader()) + len(fd.GetDataBody()))
	item.size = min(size, streamBudget)
	if err := p.budget.Acquire(ctx, item.size); err != nil {
		return ackItem{}, ackStatus(ctx, err)
	}
	fut, deps, err := ts.units.store(um.Unit, um.From, um.To, func(keep []unitRange) (*wal.Pending, error) {
		var kept int64
		for _, k := range keep {
			kept += k.To - k.From
		}
		rows := um.To - um.From
		return ts.wal.AppendFunc(ctx, func(uint64) { ts.pending.Add(kept); ts.s.cfg.events.durable(ts.name, kept, size*kept/max(rows, 1)) },
			recordParts(kept, unitMetaBytes(um.Unit, um.From, keep), p.schemaHeader, fd.GetDataHeader(), fd.GetDataBody())...)
	})
	if err != nil {
		p.budget.Release(item.size)
		if ctx.Err() != nil {
			return ackItem{}, ackStatus(ctx, ctx.Err())
		}
		return ackItem{}, status.Errorf(codes.Unavailable, "table %s: write-ahead log: %v", ts.name, err)
	}
	if fut == nil {
		p.budget.Release(item.size)
		item.size = 0
	}
	item.fut, item.deps = fut, deps
	return item, nil
}

// checkBatch is check.Check, recovering from a panic on data the decoder let through.
func checkBatch(check *warehouse.Checker, rec arrow.RecordBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("values cannot be checked (%v)", r)
		}
	}()
	return check.Check(rec)
}

// wait waits until the frame is durable and gives its budget back.
func (p *putStream) wait(ctx context.Context, it ackItem) error {
	for _, d := range it.deps {
		select {
		case <-d.Done():
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if err := d.Err(); err != nil {
			p.budget.Release(it.size)
			return status.Errorf(codes.Unavailable, "table %s: write-ahead log: %v", p.ts.name, err)
		}
	}
	if it.fut == nil {
		return nil
	}
	select {
	case <-it.fut.Done():
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	p.budget.Release(it.size)
	if err := it.fut.Err(); err != nil {
		return status.Errorf(codes.Unavailable, "table %s: write-ahead log: %v", p.ts.name, err)
	}
	return nil
}

func durableNow(it ackItem) bool {
	for _, d := range it.deps {
		select {
		case <-d.Done():
		default:
			return false
		}
	}
	if it.fut == nil {
		return true
	}
	select {
	case <-it.fut.Done():
		return true
	default:
		return false
	}
}

// coalesce takes from acks every frame that is already durable, returning the last of them and the
// first one that is not (held), if any.
func (p *putStream) coalesce(ctx context.Context, acks <-chan ackItem, last ackItem) (ackItem, *ackItem, error) {
	for {
		select {
		case x, ok := <-acks:
			if !ok {
				return last, nil, nil
			}
			if !durableNow(x) {
				return last, &x, nil
			}
			if err := p.wait(ctx, x); err != nil {
				return last, nil, err
			}
			last = x
		default:
			return last, nil, nil
		}
	}
}

// ackLoop sends the acks of queued frames in order once they are durable, coalescing those that are
// durable together, until acks is closed and drained (nil) or something fails.
func (p *putStream) ackLoop(ctx context.Context, acks <-chan ackItem) error {
	var (
		held    *ackItem
		rotated bool
		delay   = time.Duration(p.faults.ackDelayNs)
	)
	for {
		var it ackItem
		if held != nil {
			it = *held // the coalesce below replaces held
		} else {
			select {
			case x, ok := <-acks:
				if !ok {
					return nil
				}
				it = x
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if err := p.wait(ctx, it); err != nil {
			return err
		}
		last := it
		// Acknowledge everything that is durable by now in one ack, and again after an injected
		// delay, which holds the ack back but not the frames behind it.
		var err error
		if last, held, err = p.coalesce(ctx, acks, last); err != nil {
			return err
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			}
			if held != nil && durableNow(*held) {
				if err := p.wait(ctx, *held); err != nil {
					return err
				}
				last, held = *held, nil
			}
			if held == nil {
				if last, held, err = p.coalesce(ctx, acks, last); err != nil {
					return err
				}
			}
		}
		ack := zerobus.Ack{Offset: last.offset, Records: last.records}
		if p.faults.rotateAfter > 0 && !rotated && last.offset+1 >= int64(p.faults.rotateAfter) {
			ms := p.faults.rotateMs
			ack.CloseStreamAfterMs = &ms
			rotated = true
		}
		if p.faults.silent {
			continue // fault injection: the frame is stored, its ack never sent
		}
		if err := p.stream.Send(&flight.PutResult{AppMetadata: ack.Marshal()}); err != nil {
			return err
		}
	}
}
