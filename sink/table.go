package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/sink/internal/wal"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

const (
	// walAppID is the Delta txn appId of commits made from the write-ahead log; its version is the
	// last log sequence number the commit holds.
	walAppID = "loader-sink-wal"
	// maxCommitBytes bounds the log bytes one Delta commit takes, so a large backlog is committed in
	// several steps rather than one unbounded one.
	maxCommitBytes = 256 << 20
)

// tableEntry is a table in the registry; ready is closed once ts or err is set.
type tableEntry struct {
	ready chan struct{}
	ts    *tableState
	err   error
}

// tableState is a table the server ingests into: its log, its committer and its schema.
type tableState struct {
	s    *Server
	name tableschema.TableName
	t    *warehouse.Table
	wal  *wal.WAL // nil in discard mode
	// units are the unit ranges the table holds (see units.go); nil in discard mode.
	units *unitIndex

	schemaMu sync.RWMutex
	schema   *tableschema.Schema
	gen      uint64 // bumped when the schema is replaced

	commitMu  sync.Mutex
	committed uint64 // last log sequence number in Delta; guarded by commitMu
	pending   atomic.Int64

	stop chan struct{}
	done chan struct{}
}

// table returns the open state of a table, opening (and recovering) it on first use.
func (s *Server) table(ctx context.Context, name tableschema.TableName) (*tableState, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "sink is shutting down")
	}
	e, ok := s.tables[name]
	if !ok {
		e = &tableEntry{ready: make(chan struct{})}
		s.tables[name] = e
		s.mu.Unlock()
		// The server's context, not the caller's: one impatient client must not fail the others.
		e.ts, e.err = s.openTable(s.ctx, name)
		if e.err != nil {
			s.mu.Lock()
			delete(s.tables, name)
			s.mu.Unlock()
		}
		close(e.ready)
	} else {
		s.mu.Unlock()
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.ts, e.err
}

// openIfLogged returns the table's state if it is open or has a log on disk, else nil.
func (s *Server) openIfLogged(ctx context.Context, name tableschema.TableName) (*tableState, error) {
	s.mu.Lock()
	_, open := s.tables[name]
	s.mu.Unlock()
	if !open {
		t, err := s.wh.Table(ctx, name)
		if err != nil {
			return nil, err
		}
		if s.cfg.discard || !walExists(t.Dir()) {
			return nil, nil
		}
	}
	return s.table(ctx, name)
}

// recoverAll opens every table that has a write-ahead log, committing what it holds.
func (s *Server) recoverAll(ctx context.Context) error {
	if s.cfg.discard {
		return nil
	}
	names, err := s.wh.List(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		t, err := s.wh.Table(ctx, name)
		if err != nil {
			return err
		}
		if !walExists(t.Dir()) {
			continue
		}
		if _, err := s.table(ctx, name); err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
	}
	return nil
}

func (s *Server) openTable(ctx context.Context, name tableschema.TableName) (*tableState, error) {
	t, err := s.wh.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	ts := &tableState{
		s: s, name: name, t: t, schema: snap.Schema, gen: 1,
		committed: uint64(max(snap.Txns[walAppID], 0)),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if s.cfg.discard {
		close(ts.done)
		return ts, nil
	}
	ts.units = newUnitIndex()
	for app, v := range snap.Txns {
		if unit, r, ok := parseUnitTxn(app, v); ok {
			ts.units.addDurable(unit, r.From, r.To)
		}
	}
	var pending int64
	var bad error
	w, err := wal.Open(walDir(t.Dir()),
		wal.WithFloor(ts.committed),
		wal.WithSegmentBytes(s.cfg.segmentBytes),
		wal.WithLogger(s.log),
		wal.WithRecoveredRecord(func(seq uint64, payload []byte) {
			if seq <= ts.committed {
				return
			}
			r, err := parseRecord(payload)
			if err == nil {
				var um unitRecordMeta
				var ok bool
				if um, ok, err = parseUnitMeta(r.meta, r.rows); ok {
					for _, k := range um.Keep {
						ts.units.addDurable(um.Unit, k[0], k[1])
					}
				}
			}
			if err != nil && bad == nil {
				bad = fmt.Errorf("record %d: %w", seq, err)
			}
			pending += r.rows
		}))
	if err != nil {
		return nil, err
	}
	if bad != nil {
		// Intact on disk (the checksum matched) but not ours to read: refuse rather than guess.
		w.Close()
		return nil, bad
	}
	ts.wal = w
	ts.pending.Store(pending)
	if w.LastSeq() > ts.committed {
		s.log.Info("sink: committing recovered log records", "table", name.String(),
			"from_seq", ts.committed+1, "to_seq", w.LastSeq(), "rows", pending)
		if err := ts.commit(ctx); err != nil {
			// The rows stay durable in the log; the committer retries every interval.
			s.log.Error("sink: recovery commit failed; will retry", "table", name.String(), "err", err)
		}
	} else if err := w.Release(ts.committed); err != nil {
		s.log.Warn("sink: removing committed log segments", "table", name.String(), "err", err)
	}
	go ts.run(s.cfg.commitInterval)
	return ts, nil
}

// currentSchema returns the table schema streams validate against and its generation.
func (ts *tableState) currentSchema() (*tableschema.Schema, uint64) {
	ts.schemaMu.RLock()
	defer ts.schemaMu.RUnlock()
	return ts.schema, ts.gen
}

func (ts *tableState) setSchema(schema *tableschema.Schema) {
	ts.schemaMu.Lock()
	defer ts.schemaMu.Unlock()
	ts.schema = schema
	ts.gen++
}

// run is the committer: it commits durable records every interval until close.
func (ts *tableState) run(interval time.Duration) {
	defer close(ts.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastErr string
	for {
		select {
		case <-ts.stop:
			return
		case <-tick.C:
		}
		if err := ts.commit(ts.s.ctx); err != nil {
			if msg := err.Error(); msg != lastErr { // one line per distinct failure, not one per tick
				ts.s.log.Error("sink: commit failed; will retry", "table", ts.name.String(), "err", err)
				lastErr = msg
			}
			continue
		}
		lastErr = ""
	}
}

// commit commits every record durable when it is called.
func (ts *tableState) commit(ctx context.Context) error {
	if ts.wal == nil {
		return nil
	}
	ts.commitMu.Lock()
	defer ts.commitMu.Unlock()
	return ts.commitLocked(ctx)
}

var errChunkFull = errors.New("commit chunk full")

func (ts *tableState) commitLocked(ctx context.Context) error {
	target := ts.wal.LastSeq()
	for ts.committed < target {
		if err := ts.commitChunk(ctx, target); err != nil {
			return fmt.Errorf("commit %s: %w", ts.name, err)
		}
	}
	return nil
}

// commitChunk commits the records after ts.committed, up to target and maxCommitBytes, in one Delta
// commit whose txn version is the last of them.
func (ts *tableState) commitChunk(ctx context.Context, target uint64) error {
	// The table's schema as committed now: it may have been replaced since the records were taken.
	schema, err := ts.t.Schema(ctx)
	if err != nil {
		return err
	}
	if cur, _ := ts.currentSchema(); !cur.Equal(schema) {
		ts.setSchema(schema)
	}
	mem := newLimitedAllocator(ts.s.cfg.mem, maxDecodedFrameBytes)
	w := ts.t.NewWriter(warehouse.WithSchema(schema))
	defer w.Abort()
	var (
		last     uint64
		bytes    int
		rows     int64 // rows leaving the pending count: written or rejected
		rejected int
		units    = map[string][]unitRange{}
	)
	err = ts.wal.Replay(ctx, ts.committed, target, func(seq uint64, payload []byte) error {
		if bytes > 0 && bytes+len(payload) > maxCommitBytes {
			return errChunkFull
		}
		r, err := parseRecord(payload)
		if err != nil {
			return fmt.Errorf("log record %d: %w", seq, err)
		}
		um, tagged, err := parseUnitMeta(r.meta, r.rows)
		if err != nil {
			return fmt.Errorf("log record %d: %w", seq, err)
		}
		var keep [][2]int64
		if tagged {
			for _, k := range um.Keep {
				units[um.Unit] = append(units[um.Unit], unitRange{k[0], k[1]})
			}
			// Ranges relative to the frame.
			keep = make([][2]int64, len(um.Keep))
			for i, k := range um.Keep {
				keep[i] = [2]int64{k[0] - um.From, k[1] - um.From}
			}
		}
		if err := ts.writeRecord(ctx, w, schema, r, keep, mem); err != nil {
			if !errors.Is(err, errReject) {
				return fmt.Errorf("log record %d: %w", seq, err)
			}
			path, serr := saveRejected(ts.t.Dir(), seq, r)
			if serr != nil {
				// The record's reason is text only: it may hold a *zerobus.SchemaError, whose gRPC
				// status (InvalidArgument) must not become the status of this server-side failure.
				return fmt.Errorf("log record %d: %v; keeping it failed: %w", seq, err, serr) //nolint:errorlint // the reason is deliberately not wrapped, see above
			}
			ts.s.log.Error("sink: acknowledged rows no longer fit the table; kept aside, NOT committed",
				"table", ts.name.String(), "seq", seq, "rows", r.rows, "file", path, "reason", err)
			rejected++
		}
		last, bytes, rows = seq, bytes+len(payload), rows+r.rows
		return nil
	})
	if err != nil && !errors.Is(err, errChunkFull) {
		return err
	}
	if last == 0 {
		return nil
	}
	res, err := w.Commit(ctx, warehouse.CommitOptions{
		Txn:       &warehouse.Txn{AppID: walAppID, Version: int64(last)},
		MoreTxns:  unitTxns(units),
		Operation: "STREAMING UPDATE",
		OperationParameters: map[string]string{
			"outputMode": "Append",
			"queryId":    walAppID,
			"epochId":    strconv.FormatUint(last, 10),
		},
	})
	switch {
	case errors.Is(err, warehouse.ErrTxnCommitted):
		ts.s.log.Info("sink: log records were committed before; skipping them", "table", ts.name.String(), "to_seq", last)
	case err != nil:
		return err
	default:
		ts.s.log.Debug("sink: committed", "table", ts.name.String(), "version", res.Version, "rows", res.Rows,
			"to_seq", last, "rejected_records", rejected)
	}
	ts.committed = last
	ts.pending.Add(-rows)
	if err := ts.wal.Release(last); err != nil {
		ts.s.log.Warn("sink: removing committed log segments", "table", ts.name.String(), "err", err)
	}
	return nil
}

var errReject = errors.New("record does not fit the table")

// writeRecord decodes one log record and writes it; errors wrapping errReject mean the record can
// never be written to this table (its schema was replaced) and is to be kept aside.
func (ts *tableState) writeRecord(ctx context.Context, w *warehouse.Writer, schema *tableschema.Schema, r walRecord, keep [][2]int64, mem memory.Allocator) error {
	rec, err := decodeRecord(r, mem)
	if err != nil {
		return fmt.Errorf("%w: %w", errReject, err)
	}
	defer rec.Release()
	if se := zerobus.ValidateSchema(schema, rec.Schema()); se != nil {
		return fmt.Errorf("%w: %w", errReject, se)
	}
	write := func(rec arrow.RecordBatch) error {
		if err := w.Write(ctx, rec); err != nil {
			if errors.Is(err, warehouse.ErrBadValue) {
				return fmt.Errorf("%w: %w", errReject, err)
			}
			return err
		}
		return nil
	}
	if keep == nil {
		return write(rec)
	}
	// A tagged record keeps only the ranges of its frame the table did not hold.
	for _, k := range keep {
		if k[0] < 0 || k[1] > rec.NumRows() {
			return fmt.Errorf("%w: kept rows [%d,%d) of a %d-row frame", errReject, k[0], k[1], rec.NumRows())
		}
		if k[0] == 0 && k[1] == rec.NumRows() {
			return write(rec)
		}
		part := rec.NewSlice(k[0], k[1])
		err := write(part)
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// counts returns the committed rows, the version they were read at, and the acknowledged rows not
// yet committed, consistently (no commit runs in between).
func (ts *tableState) counts(ctx context.Context) (committed, version, pending int64, err error) {
	ts.commitMu.Lock()
	defer ts.commitMu.Unlock()
	committed, version, err = ts.t.Count(ctx)
	return committed, version, ts.pending.Load(), err
}

// close stops the committer, commits what is durable (unless ctx is over) and closes the log.
func (ts *tableState) close(ctx context.Context) error {
	if ts.wal == nil {
		return nil
	}
	close(ts.stop)
	<-ts.done
	var errs []error
	ts.commitMu.Lock()
	if ts.wal.LastSeq() > ts.committed {
		err := ctx.Err()
		if err == nil {
			err = ts.commitLocked(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("final commit of %s: %w (the rows stay in the write-ahead log and are committed at the next start)", ts.name, err))
		}
	}
	ts.commitMu.Unlock()
	if err := ts.wal.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
