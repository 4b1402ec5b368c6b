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
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"golang.org/x/sync/errgroup"

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

	nFrames, nBytes, nRows, retries, rotations, calls, resent, txns atomic.Int64
	// useTxns: each Flight SQL ingest call runs in a transaction (the server advertises ingest
	// transactions), committed once the call ended OK, rolled back otherwise.
	useTxns bool
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
//
// Load takes over the reference of each frame it receives: it releases the frame once acked returns
// (acked retains it to keep it longer), and, when it returns early, releases the frames it took that
// were not acknowledged. Frames it never received are still the caller's.
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
	first, err := c.proto.schemaFrame(table, enc.SchemaMessage())
	if err != nil {
		return stats, err
	}
	lr := &loadRun{c: c, table: table, enc: enc, frames: frames, acked: acked, first: first,
		log: c.cfg.logger.With("table", table.String(), "dialect", string(c.dialect))}
	if c.dialect == FlightSQL {
		lr.useTxns = c.ingestTransactions(ctx, table)
	}

	g, gctx := errgroup.WithContext(ctx)
	for i := range streams {
		s := &stream{lr: lr, id: i, svc: flight.NewFlightServiceClient(c.raw[i%len(c.raw)]), wake: make(chan struct{}, 1),
			log: lr.log.With("stream", i)}
		g.Go(func() error { return s.run(gctx) })
	}
	err = g.Wait()
	stats.Frames, stats.Bytes, stats.Rows = lr.nFrames.Load(), lr.nBytes.Load(), lr.nRows.Load()
	stats.Retries, stats.Rotations, stats.Calls = lr.retries.Load(), lr.rotations.Load(), lr.calls.Load()
	stats.ResentRows = lr.resent.Load()
	stats.Transactions = lr.txns.Load()
	if cerr := ctx.Err(); cerr != nil {
		return stats, cerr
	}
	return stats, err
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
	reminted   bool // a new token was minted after Unauthenticated, since the last call that ended well (sender only)
	opened     bool // a DoPut was opened before (sender only)

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
	rolledBack   bool      // the last call's transaction was rolled back: its rows are not in the table
}

// call is one DoPut.
type call struct {
	ps       flight.FlightService_DoPutClient
	cancel   context.CancelCauseFunc
	timer    *time.Timer   // the ack timeout of the oldest piece on the wire
	ready    chan struct{} // closed on READY (Zerobus)
	isReady  bool          // receiver only
	recvDone chan struct{}
	recvErr  error          // set before recvDone is closed; nil means the server ended the call OK
	bytes    int64          // data bytes sent on the call
	txn      *flightsql.Txn // the call's Flight SQL transaction, if it has one
	done     bool           // txn was committed or rolled back
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *stream) run(ctx context.Context) error {
	defer s.releaseQueue()
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
			attempt, s.reminted = 0, false
			if end == endRotate {
				s.lr.rotations.Add(1)
				s.log.Debug("rotating to a new DoPut at the server's request")
			}
			continue
		case isFatal(err):
			if tokens := s.lr.c.cfg.tokens; tokens != nil && !s.reminted && isUnauthenticated(err) {
				// As the SDKs do: the token may have been revoked or expired early; one new one.
				s.reminted = true
				tokens.Invalidate(s.lr.table)
				s.log.Info("the server refused the token as unauthenticated; minting a new one and trying once more")
				continue
			}
			return fmt.Errorf("flightclient: stream %d: DoPut into %s: %w", s.id, s.lr.table, err)
		}
		if tf := s.lr.c.tlsFailure(); tf != nil {
			return &fatal{fmt.Errorf("flightclient: stream %d: DoPut into %s: %w", s.id, s.lr.table, tf)}
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
		s.lr.c.cfg.events.retry(s.id, err)
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

// releaseQueue releases the frames of the pieces left when the stream ends (an error, or ctx's end):
// each re-sliced piece's own, and each item's as it came from the channel, once.
func (s *stream) releaseQueue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.queue {
		if p.frame != p.item.orig {
			p.frame.Release()
		}
		if i == len(s.queue)-1 || s.queue[i+1].item != p.item {
			p.item.orig.Release() // an item's pieces are consecutive
		}
	}
	s.queue, s.sent, s.unacked = nil, 0, 0
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
	// The pieces the last call sent and did not acknowledge go again: their fate is unknown, unless
	// the call's transaction was rolled back.
	safe := s.rolledBack
	s.rolledBack = false
	for i, p := range s.queue[:s.sent] {
		if safe {
			break
		}
		span, rows := p.frame.Span, p.frame.Rows
		if i == 0 {
			span.Row += p.prefix
			rows -= p.prefix
		}
		if rows > 0 {
			s.lr.resent.Add(rows)
			if h := s.lr.c.cfg.resendHook; h != nil {
				h(span, rows)
			}
		}
	}
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
	if p.frame != p.item.orig {
		p.frame.Release() // a remainder re-sliced again
	}
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
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(errCallOver)
	cl, err := s.open(ctx, callCtx, cancel)
	if cl != nil {
		defer s.closeCall(cl)
	}
	if err != nil {
		return 0, err
	}
	return s.pump(ctx, callCtx, cl)
}

// open starts a DoPut: it sends the schema frame and, where the dialect has one, waits for READY.
// It returns the call as soon as its receiver runs (even with an error), so the caller can close it.
func (s *stream) open(ctx, callCtx context.Context, cancel context.CancelCauseFunc) (*call, error) {
	octx, err := s.lr.c.outgoing(callCtx, s.lr.table)
	if err != nil {
		return nil, err
	}
	first := s.lr.first
	var txn *flightsql.Txn
	if s.lr.useTxns {
		if txn, first, err = s.beginTxn(callCtx); err != nil {
			return nil, err
		}
	}
	s.lr.calls.Add(1)
	ps, err := s.svc.DoPut(octx, callCodec, commitFirst)
	if err != nil {
		if txn != nil {
			s.endTxn(&call{txn: txn})
		}
		return nil, classify(fmt.Errorf("open: %w", err))
	}
	cl := &call{ps: ps, cancel: cancel, ready: make(chan struct{}), recvDone: make(chan struct{}), txn: txn}
	s.lr.c.cfg.events.callOpened(s.id, s.opened)
	s.opened = true
	s.mu.Lock()
	s.cur = cl
	s.mu.Unlock()
	go s.receive(cl)
	s.log.Debug("DoPut opened")

	if err := ps.Send(first); err != nil {
		return cl, s.sendFailed(ctx, callCtx, cl, err)
	}
	if !s.lr.c.proto.awaitsReady() {
		return cl, nil
	}
	t := time.AfterFunc(s.lr.c.cfg.readyTimeout, func() { cancel(errReadyTimeout) })
	defer t.Stop()
	select {
	case <-cl.ready:
		return cl, nil
	case <-cl.recvDone:
		return cl, s.failure(ctx, callCtx, cl, errors.New("the server ended the call before READY"))
	case <-callCtx.Done():
		return cl, s.failure(ctx, callCtx, cl, nil)
	}
}

// closeCall ends the call's receiver and forgets the call.
func (s *stream) closeCall(cl *call) {
	cl.cancel(errCallOver)
	<-cl.recvDone
	s.lr.c.cfg.events.callClosed(s.id)
	if cl.txn != nil && !cl.done {
		s.endTxn(cl)
	}
	s.mu.Lock()
	s.cur = nil
	if cl.timer != nil {
		cl.timer.Stop()
	}
	s.mu.Unlock()
}

// alarm is a timer made on first use: until set, its channel is nil, so a select never takes it.
type alarm struct{ t *time.Timer }

func (a *alarm) set(d time.Duration) {
	if a.t == nil {
		a.t = time.NewTimer(d)
		return
	}
	a.t.Reset(d)
}

func (a *alarm) c() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.C
}

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
	}
}

// view is a consistent snapshot of the stream's state, taken under mu.
type view struct {
	queued, sent int
	unacked      int64
	rotateBy     time.Time
	acksSeen     bool
}

func (s *stream) view() view {
	s.mu.Lock()
	defer s.mu.Unlock()
	return view{queued: len(s.queue), sent: s.sent, unacked: s.unacked, rotateBy: s.rotateBy, acksSeen: s.acksSeen}
}

// pumpState is what one call's loop in pump remembers between iterations.
type pumpState struct {
	closing   bool      // the client half-closed
	want      endReason // why it did
	drainSet  bool      // the drain alarm is running
	lastFrame time.Time // when the last frame arrived from the channel
	atCap     bool      // the stream stopped taking frames at its cap (reported once)

	idle, rotate, drain alarm
}

// pump sends the stream's frames on an open call, takes new ones while the stream is under its cap,
// and ends the call when the channel is done, the server asks to rotate, or a bounded call is full or
// idle; then it waits for the call's end.
func (s *stream) pump(ctx, callCtx context.Context, cl *call) (endReason, error) {
	cfg := &s.lr.c.cfg
	st := pumpState{lastFrame: time.Now()}
	defer st.idle.stop()
	defer st.rotate.stop()
	defer st.drain.stop()
	for {
		if !st.closing {
			for p := s.nextUnsent(); p != nil; p = s.nextUnsent() {
				if err := s.sendPiece(cl, p); err != nil {
					return 0, s.sendFailed(ctx, callCtx, cl, err)
				}
			}
		}
		v := s.view()
		ackless := s.lr.c.proto.ackless(v.acksSeen)
		rotating := !v.rotateBy.IsZero()
		if !st.closing {
			if want, ok := s.closeReason(cl, v, ackless, st.lastFrame); ok {
				st.closing, st.want = true, want
				if err := cl.ps.CloseSend(); err != nil {
					return 0, s.failure(ctx, callCtx, cl, err)
				}
			}
		}
		if st.closing && !st.drainSet && (v.queued == 0 || v.sent == 0 || st.want == endRotate) {
			// Nothing left to wait for (or a rotation's grace is over): give the server a moment to
			// end the call. Otherwise the ack timeout bounds the wait.
			st.drainSet = true
			st.drain.set(cfg.drainTimeout)
		}
		frames := s.intake(&st, v)
		if !st.closing && ackless && v.sent > 0 {
			st.idle.set(time.Until(st.lastFrame.Add(cfg.idleFlush)))
		}
		if !st.closing && rotating {
			st.rotate.set(time.Until(v.rotateBy))
		}

		select {
		case f, ok := <-frames:
			if !ok {
				s.framesDone = true
				continue
			}
			st.lastFrame = time.Now()
			s.enqueue(f)
		case <-s.wake:
		case <-st.idle.c():
		case <-st.rotate.c():
		case <-cl.recvDone:
			if ctx.Err() != nil || context.Cause(callCtx) != nil {
				return 0, s.failure(ctx, callCtx, cl, nil)
			}
			return s.callFinished(cl, st.closing, st.want)
		case <-st.drain.c():
			return s.drained(cl, st.want)
		case <-callCtx.Done():
			return 0, s.failure(ctx, callCtx, cl, nil)
		}
	}
}

// closeReason says whether the client should half-close the call now, and why.
func (s *stream) closeReason(cl *call, v view, ackless bool, lastFrame time.Time) (endReason, bool) {
	cfg := &s.lr.c.cfg
	now := time.Now()
	switch {
	case !v.rotateBy.IsZero() && (v.sent == 0 || !now.Before(v.rotateBy)):
		return endRotate, true
	case s.framesDone:
		return endDone, true
	case ackless && v.sent > 0 && (cl.bytes >= cfg.callBytes || v.unacked >= cfg.streamCap || !now.Before(lastFrame.Add(cfg.idleFlush))):
		return endCall, true
	}
	return 0, false
}

// intake returns the frames channel when the stream may take another frame, else nil; it reports
// the first time the stream stops at its cap.
func (s *stream) intake(st *pumpState, v view) <-chan *partitioner.Frame {
	switch {
	case st.closing || !v.rotateBy.IsZero() || s.framesDone:
		return nil
	case v.unacked < s.lr.c.cfg.streamCap:
		st.atCap = false
		return s.lr.frames
	case !st.atCap:
		st.atCap = true
		if h := s.lr.c.cfg.capHook; h != nil {
			h(s.id, v.sent, v.unacked)
		}
	}
	return nil
}

// drained ends a half-closed call whose server did not end it within the drain timeout.
func (s *stream) drained(cl *call, want endReason) (endReason, error) {
	cl.cancel(errDrainTimeout)
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
	ackless := s.lr.c.proto.ackless(s.acksSeen)
	var done []*partitioner.Frame
	if ackless && s.sent > 0 {
		if s.putCount != nil && *s.putCount != -1 && *s.putCount != s.sentRecords {
			n, sent := *s.putCount, s.sentRecords
			s.mu.Unlock()
			return 0, &fatal{fmt.Errorf("%w: the target reported %d rows ingested by a call that sent %d",
				zerobus.ErrProtocol, n, sent)}
		}
		if cl.txn != nil {
			s.mu.Unlock()
			if err := s.commitTxn(cl); err != nil {
				return 0, err
			}
			s.mu.Lock()
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
	meta := s.lr.c.proto.frameMetadata(off)
	if s.lr.c.unitID != nil && len(meta) > 1 && meta[len(meta)-1] == '}' {
		meta = appendUnitMeta(meta[:len(meta)-1], s.lr.c.unitID(p.frame.Span), p.frame.Span.Row, p.frame.Span.Row+p.frame.Rows)
	}
	cl.bytes += int64(p.frame.Size())
	return cl.ps.SendMsg(&framedData{header: p.frame.Header, appMetadata: meta, frame: p.frame})
}

// armLocked points the ack timer at the oldest piece on the wire; the timer is made the first time
// a call has a piece on the wire.
func (s *stream) armLocked() {
	cl := s.cur
	switch {
	case cl == nil:
	case s.sent == 0:
		if cl.timer != nil {
			cl.timer.Stop()
		}
	case cl.timer == nil:
		cl.timer = time.AfterFunc(time.Until(s.queue[0].sentAt.Add(s.lr.c.cfg.ackTimeout)), func() { s.ackTimerFired(cl) })
	default:
		cl.timer.Reset(time.Until(s.queue[0].sentAt.Add(s.lr.c.cfg.ackTimeout)))
	}
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

// handle processes one PutResult as the dialect reads it.
func (s *stream) handle(cl *call, res *flight.PutResult) error {
	ans, err := s.lr.c.proto.parse(res, cl.isReady)
	if err != nil {
		return err
	}
	switch ans.kind {
	case answerReady:
		cl.isReady = true
		close(cl.ready)
	case answerAck:
		s.mu.Lock()
		s.acksSeen = true
		s.mu.Unlock()
		return s.applyAck(ans.ack)
	case answerCount:
		s.mu.Lock()
		s.putCount = &ans.count
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
		s.lr.c.cfg.events.ackLatency(time.Since(p.sentAt))
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.sent--
		s.unacked -= int64(p.frame.Size())
		if p.frame != p.item.orig {
			p.frame.Release() // a re-sliced remainder, done
		}
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
		f.Release()
	}
}
