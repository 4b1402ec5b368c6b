package flightclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loaderproject/loader/partitioner"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// Causes of a call's cancellation.
var (
	errAckTimeout   = errors.New("no acknowledgement within the ack timeout")
	errReadyTimeout = errors.New("no READY within the ready timeout")
	errDrainTimeout = errors.New("the server did not end the call after the client half-closed")
	errCallOver     = errors.New("call over")
)

// fatal marks an error that stops the load: retrying cannot help.
type fatal struct{ err error }

func (e *fatal) Error() string { return e.err.Error() }
func (e *fatal) Unwrap() error { return e.err }

func isFatal(err error) bool {
	var f *fatal
	return errors.As(err, &f)
}

// classify marks err fatal unless the reference's rules make it transient. A schema error becomes a
// *zerobus.SchemaError, so callers get its causes with zerobus.AsSchemaError.
func classify(err error) error {
	if err == nil || isFatal(err) {
		return err
	}
	if se, ok := zerobus.AsSchemaError(err); ok {
		return &fatal{se}
	}
	if zerobus.Retryable(err) {
		return err
	}
	return &fatal{err}
}

// loadRun is one Load call.
type loadRun struct {
	c      *Client
	table  tableschema.TableName
	enc    *partitioner.Encoder
	frames <-chan *partitioner.Frame
	acked  func(*partitioner.Frame)
	first  *flight.FlightData // the schema frame (with the descriptor for Flight and Flight SQL)
	log    *slog.Logger

	nFrames, nBytes, nRows, retries, rotations, calls atomic.Int64
}

// Load sends every frame received on frames to the table over `streams` parallel DoPuts and returns
// once frames is closed and every frame has been acknowledged, or on the first fatal error (after
// stopping every stream). enc is the frames' encoder: its SchemaMessage is the first FlightData of
// every DoPut, and it decodes a frame when a partial acknowledgement forces a re-slice. schema, when
// not nil, must equal enc's schema. acked is called exactly once per frame, after the target made all
// of its rows durable; it may be called from several goroutines at once.
//
// acked receives the frame exactly as it came from the channel (even when only a re-sliced remainder
// of it had to be sent again), so the caller can record [Span.Row, Span.Row+Rows) and release the
// frame's Size. Frames of one stream are reported in the order that stream took them. When ctx ends,
// Load returns ctx's error.
func (c *Client) Load(ctx context.Context, table tableschema.TableName, schema *arrow.Schema, enc *partitioner.Encoder,
	streams int, frames <-chan *partitioner.Frame, acked func(*partitioner.Frame)) (Stats, error) {
	stats := Stats{Streams: streams}
	switch {
	case streams < 1:
		return stats, fmt.Errorf("flightclient: %d streams, want at least 1", streams)
	case enc == nil:
		return stats, errors.New("flightclient: nil encoder")
	case frames == nil:
		return stats, errors.New("flightclient: nil frames channel")
	case schema != nil && !schema.Equal(enc.Schema()):
		return stats, fmt.Errorf("flightclient: schema %s differs from the encoder's %s", schema, enc.Schema())
	case !tableschema.ValidName(table.Catalog) || !tableschema.ValidName(table.Schema) || !tableschema.ValidName(table.Table):
		return stats, fmt.Errorf("flightclient: table name %q, want catalog.schema.table", table.String())
	}
	if acked == nil {
		acked = func(*partitioner.Frame) {}
	}
	if err := ctx.Err(); err != nil {
		return stats, err
	}
	first, err := c.schemaFrame(table, enc)
	if err != nil {
		return stats, err
	}
	lr := &loadRun{c: c, table: table, enc: enc, frames: frames, acked: acked, first: first,
		log: c.cfg.logger.With("table", table.String(), "dialect", string(c.dialect))}

	g, gctx := errgroup.WithContext(ctx)
	for i := range streams {
		s := &stream{lr: lr, id: i, svc: flight.NewFlightServiceClient(c.raw[i%len(c.raw)]), wake: make(chan struct{}, 1),
			log: lr.log.With("stream", i)}
		g.Go(func() error { return s.run(gctx) })
	}
	err = g.Wait()
	stats.Frames, stats.Bytes, stats.Rows = lr.nFrames.Load(), lr.nBytes.Load(), lr.nRows.Load()
	stats.Retries, stats.Rotations, stats.Calls = lr.retries.Load(), lr.rotations.Load(), lr.calls.Load()
	if cerr := ctx.Err(); cerr != nil {
		return stats, cerr
	}
	return stats, err
}

// schemaFrame builds the first FlightData of every call.
func (c *Client) schemaFrame(table tableschema.TableName, enc *partitioner.Encoder) (*flight.FlightData, error) {
	fd := &flight.FlightData{DataHeader: enc.SchemaMessage()}
	switch c.dialect {
	case Flight:
		fd.FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: table.Parts()}
	case FlightSQL:
		notExist := pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_FAIL
		if c.cfg.createTable {
			notExist = pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_CREATE
		}
		cmd := &pb.CommandStatementIngest{
			TableDefinitionOptions: &pb.CommandStatementIngest_TableDefinitionOptions{
				IfNotExist: notExist,
				IfExists:   pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_APPEND,
			},
			Table:   table.Table,
			Schema:  &table.Schema,
			Catalog: &table.Catalog,
		}
		var a anypb.Any
		if err := a.MarshalFrom(cmd); err != nil {
			return nil, fmt.Errorf("flightclient: CommandStatementIngest: %w", err)
		}
		b, err := proto.Marshal(&a)
		if err != nil {
			return nil, fmt.Errorf("flightclient: CommandStatementIngest: %w", err)
		}
		fd.FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}
	}
	return fd, nil
}

// ackless reports whether the current call acknowledges its frames only when it ends OK: always in
// Flight SQL, and in Flight until the server sent an ack (acksSeen).
func (lr *loadRun) ackless(acksSeen bool) bool {
	return lr.c.dialect == FlightSQL || (lr.c.dialect == Flight && !acksSeen)
}

// item is a frame taken from the channel, reported to acked once all its rows are durable.
type item struct {
	orig *partitioner.Frame
	done int64 // rows of orig acknowledged
}

// piece is what goes on the wire for (part of) an item: the item's frame, or after a partial
// acknowledgement a re-encoded remainder of it.
type piece struct {
	item  *item
	frame *partitioner.Frame
	// Set when sent on the current call:
	start, end int64 // cumulative record range on the call
	sentAt     time.Time
	prefix     int64 // rows of this piece acknowledged so far on the call
}

// stream is one of Load's parallel DoPut sequences. Its goroutine (run) owns the calls and is the only
// one to Send; each call's receiver goroutine processes acknowledgements under mu.
type stream struct {
	lr   *loadRun
	id   int
	svc  flight.FlightServiceClient
	log  *slog.Logger
	wake chan struct{} // capacity 1: something changed for the sender

	framesDone bool // the channel is closed (sender only)

	mu           sync.Mutex
	queue        []*piece // not fully acknowledged, in order; queue[:sent] are on the current call
	sent         int
	unacked      int64 // bytes of the pieces in queue
	sentRecords  int64 // on the current call
	ackedRecords int64 // on the current call
	nextOffset   int64
	progress     bool      // an acknowledgement advanced on the current call
	acksSeen     bool      // the current call's server sends ack JSON (Flight dialect)
	rotateBy     time.Time // set when the server asked to rotate
	putCount     *int64    // Flight SQL DoPutUpdateResult.record_count
	cur          *call     // the current call, nil between calls
}

// call is one DoPut.
type call struct {
	ps       flight.FlightService_DoPutClient
	cancel   context.CancelCauseFunc
	timer    *time.Timer   // the ack timeout of the oldest piece on the wire
	ready    chan struct{} // closed on READY (Zerobus)
	isReady  bool          // receiver only
	recvDone chan struct{}
	recvErr  error // set before recvDone is closed; nil means the server ended the call OK
	bytes    int64 // data bytes sent on the call
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *stream) run(ctx context.Context) error {
	attempt := 0
	for {
		s.mu.Lock()
		empty := len(s.queue) == 0
		s.mu.Unlock()
		if empty {
			if s.framesDone {
				return nil
			}
			select {
			case f, ok := <-s.lr.frames:
				if !ok {
					s.framesDone = true
					return nil
				}
				s.enqueue(f)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		end, err := s.session(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			attempt = 0
			if end == endRotate {
				s.lr.rotations.Add(1)
				s.log.Debug("rotating to a new DoPut at the server's request")
			}
			continue
		case isFatal(err):
			return fmt.Errorf("flightclient: stream %d: DoPut into %s: %w", s.id, s.lr.table, err)
		}
		s.mu.Lock()
		if s.progress {
			attempt = 0
		}
		s.mu.Unlock()
		attempt++
		if attempt > s.lr.c.cfg.retries {
			return &fatal{fmt.Errorf("flightclient: stream %d: DoPut into %s: giving up after %d retries: %w",
				s.id, s.lr.table, s.lr.c.cfg.retries, err)}
		}
		wait := backoff(attempt, s.lr.c.cfg.backoffBase, s.lr.c.cfg.backoffMax)
		s.log.Warn("transient failure; reopening the stream", "err", err, "attempt", attempt, "backoff", wait)
		s.lr.retries.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// backoff returns base·2^(attempt-1), at most max, jittered into [d/2, d].
func backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	half := d / 2
	return half + rand.N(d-half+1)
}

func (s *stream) enqueue(f *partitioner.Frame) {
	s.mu.Lock()
	s.queue = append(s.queue, &piece{item: &item{orig: f}, frame: f})
	s.unacked += int64(f.Size())
	s.mu.Unlock()
}

// prepare resets the per-call state before a new call and re-slices a partly acknowledged head piece
// so that only its unacknowledged rows are sent again.
func (s *stream) prepare() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent, s.sentRecords, s.ackedRecords, s.nextOffset = 0, 0, 0, 0
	s.progress, s.acksSeen, s.rotateBy, s.putCount = false, false, time.Time{}, nil
	if len(s.queue) == 0 || s.queue[0].prefix == 0 {
		return nil
	}
	p := s.queue[0]
	enc := s.lr.enc
	rec, err := enc.Decode(p.frame)
	if err != nil {
		return fmt.Errorf("re-slice the partly acknowledged frame at %s: %w", p.frame.Span, err)
	}
	defer rec.Release()
	rest := rec.NewSlice(p.prefix, p.frame.Rows)
	defer rest.Release()
	span := p.frame.Span
	span.Row += p.prefix
	var pieces []*piece
	var size int64
	if err := enc.Encode(rest, span, func(f *partitioner.Frame) error {
		pieces = append(pieces, &piece{item: p.item, frame: f})
		size += int64(f.Size())
		return nil
	}); err != nil {
		return fmt.Errorf("re-slice the partly acknowledged frame at %s: %w", p.frame.Span, err)
	}
	s.log.Debug("re-sliced a partly acknowledged frame", "span", p.frame.Span.String(), "acked_rows", p.prefix, "resend_rows", rest.NumRows())
	s.unacked += size - int64(p.frame.Size())
	s.queue = append(pieces, s.queue[1:]...)
	return nil
}

// endReason says why a call ended without error.
type endReason int

const (
	endDone   endReason = iota // the frames channel is closed and every frame is acknowledged
	endRotate                  // the server asked to rotate; the rest is replayed on a new call
	endCall                    // a bounded call (Flight, Flight SQL) ended; its frames are acknowledged
)

// session runs one DoPut until it ends. An error is transient unless marked fatal.
func (s *stream) session(ctx context.Context) (endReason, error) {
	if err := s.prepare(); err != nil {
		return 0, &fatal{err}
	}
	cfg := &s.lr.c.cfg
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(errCallOver)
	octx, err := s.lr.c.outgoing(callCtx, s.lr.table)
	if err != nil {
		return 0, err
	}
	s.lr.calls.Add(1)
	ps, err := s.svc.DoPut(octx, callCodec)
	if err != nil {
		return 0, classify(fmt.Errorf("open: %w", err))
	}
	cl := &call{ps: ps, cancel: cancel, ready: make(chan struct{}), recvDone: make(chan struct{})}
	cl.timer = time.AfterFunc(time.Hour, func() { s.ackTimerFired(cl) })
	cl.timer.Stop()
	s.mu.Lock()
	s.cur = cl
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
		cl.timer.Stop()
	}()
	go s.receive(cl)
	defer func() {
		cancel(errCallOver)
		<-cl.recvDone
	}()
	s.log.Debug("DoPut opened")

	if err := ps.Send(s.lr.first); err != nil {
		return 0, s.sendFailed(ctx, callCtx, cl, err)
	}
	if s.lr.c.dialect == Zerobus {
		t := time.AfterFunc(cfg.readyTimeout, func() { cancel(errReadyTimeout) })
		select {
		case <-cl.ready:
			t.Stop()
		case <-cl.recvDone:
			t.Stop()
			return 0, s.failure(ctx, callCtx, cl, errors.New("the server ended the call before READY"))
		case <-callCtx.Done():
			t.Stop()
			return 0, s.failure(ctx, callCtx, cl, nil)
		}
	}

	var (
		closing   bool
		drainSet  bool
		want      endReason
		lastFrame = time.Now()
		atCap     bool
		idle      = time.NewTimer(time.Hour)
		rotate    = time.NewTimer(time.Hour)
		drain     = time.NewTimer(time.Hour)
	)
	idle.Stop()
	rotate.Stop()
	drain.Stop()
	defer idle.Stop()
	defer rotate.Stop()
	defer drain.Stop()

	for {
		if !closing {
			for p := s.nextUnsent(); p != nil; p = s.nextUnsent() {
				if err := s.sendPiece(cl, p); err != nil {
					return 0, s.sendFailed(ctx, callCtx, cl, err)
				}
			}
		}
		s.mu.Lock()
		queued, sent, unacked, rotateBy, acksSeen := len(s.queue), s.sent, s.unacked, s.rotateBy, s.acksSeen
		s.mu.Unlock()
		ackless := s.lr.ackless(acksSeen)
		rotating := !rotateBy.IsZero()

		if !closing {
			now := time.Now()
			switch {
			case rotating && (sent == 0 || !now.Before(rotateBy)):
				closing, want = true, endRotate
			case s.framesDone:
				closing, want = true, endDone
			case ackless && sent > 0 && (cl.bytes >= cfg.callBytes || unacked >= cfg.streamCap || !now.Before(lastFrame.Add(cfg.idleFlush))):
				closing, want = true, endCall
			}
			if closing {
				if err := ps.CloseSend(); err != nil {
					return 0, s.failure(ctx, callCtx, cl, err)
				}
			}
		}
		if closing && !drainSet && (queued == 0 || sent == 0 || want == endRotate) {
			// Nothing left to wait for (or a rotation's grace is over): give the server a moment to
			// end the call. Otherwise the ack timeout bounds the wait.
			drainSet = true
			drain.Reset(cfg.drainTimeout)
		}

		var frames <-chan *partitioner.Frame
		switch {
		case closing || rotating || s.framesDone:
		case unacked < cfg.streamCap:
			frames = s.lr.frames
			atCap = false
		case !atCap:
			atCap = true
			s.mu.Lock()
			n := s.sent
			s.mu.Unlock()
			if h := cfg.capHook; h != nil {
				h(s.id, n, unacked)
			}
		}
		if !closing && ackless && sent > 0 {
			idle.Reset(time.Until(lastFrame.Add(cfg.idleFlush)))
		}
		if !closing && rotating {
			rotate.Reset(time.Until(rotateBy))
		}

		select {
		case f, ok := <-frames:
			if !ok {
				s.framesDone = true
				continue
			}
			lastFrame = time.Now()
			s.enqueue(f)
		case <-s.wake:
		case <-idle.C:
		case <-rotate.C:
		case <-cl.recvDone:
			if ctx.Err() != nil || context.Cause(callCtx) != nil {
				return 0, s.failure(ctx, callCtx, cl, nil)
			}
			return s.callFinished(cl, closing, want)
		case <-drain.C:
			cancel(errDrainTimeout)
			<-cl.recvDone
			s.mu.Lock()
			left := len(s.queue)
			s.mu.Unlock()
			switch {
			case want == endRotate:
				return endRotate, nil
			case left == 0:
				return want, nil
			}
			return 0, errDrainTimeout
		case <-callCtx.Done():
			return 0, s.failure(ctx, callCtx, cl, nil)
		}
	}
}

// callFinished handles the end of the receiver: the server ended the call.
func (s *stream) callFinished(cl *call, closing bool, want endReason) (endReason, error) {
	if cl.recvErr != nil {
		err := classify(cl.recvErr)
		if isFatal(err) {
			return 0, err
		}
		s.mu.Lock()
		left := len(s.queue)
		s.mu.Unlock()
		switch {
		case closing && want == endRotate:
			s.log.Debug("rotated call ended with an error", "err", cl.recvErr)
			return endRotate, nil
		case closing && want == endDone && left == 0:
			s.log.Debug("call ended with an error after everything was acknowledged", "err", cl.recvErr)
			return endDone, nil
		}
		return 0, err
	}
	if !closing {
		return 0, errors.New("the server ended the call before the client half-closed")
	}
	s.mu.Lock()
	ackless := s.lr.ackless(s.acksSeen)
	var done []*partitioner.Frame
	if ackless && s.sent > 0 {
		if s.lr.c.dialect == FlightSQL && s.putCount != nil && *s.putCount != -1 && *s.putCount != s.sentRecords {
			n, sent := *s.putCount, s.sentRecords
			s.mu.Unlock()
			return 0, &fatal{fmt.Errorf("%w: the target reported %d rows ingested by a call that sent %d",
				zerobus.ErrProtocol, n, sent)}
		}
		done = s.completeLocked(s.sentRecords)
	}
	left := len(s.queue)
	s.mu.Unlock()
	s.report(done)
	switch {
	case want == endRotate:
		return endRotate, nil
	case left == 0 || (ackless && want == endCall):
		return want, nil
	}
	return 0, fmt.Errorf("the server ended the call with %d frames unacknowledged", left)
}

// sendFailed turns a failed Send into the call's real outcome: io.EOF means the server ended the call,
// and its status comes from Recv.
func (s *stream) sendFailed(ctx, callCtx context.Context, cl *call, err error) error {
	if errors.Is(err, io.EOF) {
		_ = cl.ps.CloseSend()
		select {
		case <-cl.recvDone:
			if cl.recvErr == nil {
				return s.failure(ctx, callCtx, cl, errors.New("the server ended the call while the client was sending"))
			}
			return s.failure(ctx, callCtx, cl, cl.recvErr)
		case <-callCtx.Done():
			return s.failure(ctx, callCtx, cl, nil)
		}
	}
	return s.failure(ctx, callCtx, cl, err)
}

// failure explains a call that failed or was cancelled: the load's end, then our own timeouts, then
// what the receiver saw (the server's status, a protocol violation), then err.
func (s *stream) failure(ctx, callCtx context.Context, cl *call, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if cause := context.Cause(callCtx); errors.Is(cause, errAckTimeout) || errors.Is(cause, errReadyTimeout) || errors.Is(cause, errDrainTimeout) {
		return cause
	}
	select {
	case <-cl.recvDone:
		if cl.recvErr != nil {
			return classify(cl.recvErr)
		}
	default:
	}
	if err == nil {
		err = context.Cause(callCtx)
	}
	return classify(err)
}

func (s *stream) nextUnsent() *piece {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent < len(s.queue) {
		return s.queue[s.sent]
	}
	return nil
}

func (s *stream) sendPiece(cl *call, p *piece) error {
	s.mu.Lock()
	p.start = s.sentRecords
	p.end = p.start + p.frame.Rows
	p.prefix = 0
	p.sentAt = time.Now()
	s.sentRecords = p.end
	off := s.nextOffset
	s.nextOffset++
	s.sent++
	if s.sent == 1 {
		s.armLocked()
	}
	s.mu.Unlock()
	fd := &flight.FlightData{DataHeader: p.frame.Header, DataBody: p.frame.Body}
	if s.lr.c.dialect != FlightSQL {
		fd.AppMetadata = zerobus.FrameMetadata(off)
	}
	cl.bytes += int64(p.frame.Size())
	return cl.ps.Send(fd)
}

// armLocked points the ack timer at the oldest piece on the wire.
func (s *stream) armLocked() {
	if s.cur == nil {
		return
	}
	if s.sent == 0 {
		s.cur.timer.Stop()
		return
	}
	s.cur.timer.Reset(time.Until(s.queue[0].sentAt.Add(s.lr.c.cfg.ackTimeout)))
}

func (s *stream) ackTimerFired(cl *call) {
	s.mu.Lock()
	if s.cur != cl || s.sent == 0 {
		s.mu.Unlock()
		return
	}
	if d := time.Until(s.queue[0].sentAt.Add(s.lr.c.cfg.ackTimeout)); d > 0 {
		cl.timer.Reset(d)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	cl.cancel(errAckTimeout)
}

// receive reads the call's results until it ends.
func (s *stream) receive(cl *call) {
	defer s.signal()
	defer close(cl.recvDone)
	for {
		res, err := cl.ps.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			cl.recvErr = err
			return
		}
		if err := s.handle(cl, res); err != nil {
			cl.recvErr = err
			return
		}
	}
}

// handle processes one PutResult.
func (s *stream) handle(cl *call, res *flight.PutResult) error {
	switch s.lr.c.dialect {
	case Zerobus:
		ack, err := zerobus.ParseAck(res.GetAppMetadata())
		if err != nil {
			return &fatal{err}
		}
		if !cl.isReady {
			switch {
			case ack.IsReady():
				cl.isReady = true
				close(cl.ready)
				return nil
			case ack.Offset == zerobus.ReadyOffset && ack.Records == 0:
				return errors.New("the server asked to rotate before READY")
			}
			return &fatal{fmt.Errorf("%w: the first answer %s is not READY", zerobus.ErrProtocol, ack.Marshal())}
		}
		return s.applyAck(ack)
	case Flight:
		ack, err := zerobus.ParseAck(res.GetAppMetadata())
		if err != nil || ack.IsReady() {
			return nil // not an ack: this server acknowledges at the end of the call
		}
		s.mu.Lock()
		s.acksSeen = true
		s.mu.Unlock()
		return s.applyAck(ack)
	case FlightSQL:
		if len(res.GetAppMetadata()) == 0 {
			return nil
		}
		var r pb.DoPutUpdateResult
		if err := proto.Unmarshal(res.GetAppMetadata(), &r); err != nil {
			return nil
		}
		n := r.GetRecordCount()
		s.mu.Lock()
		s.putCount = &n
		s.mu.Unlock()
	}
	return nil
}

// applyAck applies a cumulative acknowledgement and a rotation request.
func (s *stream) applyAck(ack zerobus.Ack) error {
	s.mu.Lock()
	if ack.Records > s.sentRecords {
		sent := s.sentRecords
		s.mu.Unlock()
		return &fatal{fmt.Errorf("%w: the server acknowledged %d records on this DoPut, but only %d were sent",
			zerobus.ErrProtocol, ack.Records, sent)}
	}
	var done []*partitioner.Frame
	if ack.Records > s.ackedRecords {
		s.ackedRecords = ack.Records
		s.progress = true
		done = s.completeLocked(ack.Records)
		s.armLocked()
	}
	if ack.CloseStreamAfterMs != nil && s.rotateBy.IsZero() {
		grace := time.Duration(min(*ack.CloseStreamAfterMs, uint64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
		s.rotateBy = time.Now().Add(min(grace, s.lr.c.cfg.rotationWait))
	}
	s.mu.Unlock()
	s.report(done)
	s.signal()
	return nil
}

// completeLocked removes the pieces the cumulative count covers and returns the items now complete.
func (s *stream) completeLocked(records int64) []*partitioner.Frame {
	var done []*partitioner.Frame
	for s.sent > 0 {
		p := s.queue[0]
		if p.end > records {
			if p.start < records {
				n := records - p.start
				p.item.done += n - p.prefix
				p.prefix = n
			}
			break
		}
		p.item.done += p.frame.Rows - p.prefix
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.sent--
		s.unacked -= int64(p.frame.Size())
		if p.item.done >= p.item.orig.Rows {
			done = append(done, p.item.orig)
		}
	}
	return done
}

// report hands completed frames to the caller, in order.
func (s *stream) report(done []*partitioner.Frame) {
	for _, f := range done {
		s.lr.nFrames.Add(1)
		s.lr.nBytes.Add(int64(f.Size()))
		s.lr.nRows.Add(f.Rows)
		s.lr.acked(f)
	}
}
