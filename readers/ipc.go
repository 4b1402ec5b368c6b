package readers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/arrowcheck"
	"github.com/loaderproject/loader/internal/ipcguard"
	"github.com/loaderproject/loader/objstore"
)

// ipcOptions bounds what a corrupt file can make the IPC reader allocate: no message body or
// metadata is larger than the file holding it.
func ipcOptions(mem memory.Allocator, size int64) []ipc.Option {
	limit := max(size, 1)
	return []ipc.Option{ipc.WithAllocator(mem), ipc.WithBodySizeLimit(limit), ipc.WithMetadataSizeLimit(limit)}
}

// ipcFileSource reads an Arrow IPC file; a unit is a run of consecutive record batches.
type ipcFileSource struct {
	f   File
	cfg *config
	fh  readerAtCloser
	obj *objstore.Reader // fh, when the file is an object
	// dicts and records are an object's message blocks from its footer (blocksOK), which units
	// prefetch.
	dicts, records []ipcguard.Block
	blocksOK       bool
	ahead          *readAhead // fetches an object's units; nil for a local file
	mem            memory.Allocator
	schema         *arrow.Schema
	batches        int
	group          int // batches per unit
	units          []Unit
}

func openIPCFile(ctx context.Context, f File, cfg *config) (src unitSource, err error) {
	fh, err := openBytes(ctx, f, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			fh.Close()
		}
	}()
	s := &ipcFileSource{f: f, cfg: cfg, fh: fh}
	if obj, ok := fh.(*objstore.Reader); ok {
		s.obj = obj
		// the footer in one suffix-range request (a small file whole); the messages' metadata are read one by one
		if _, err := obj.ReadTail(ctx, firstRead(f.Size)); err != nil {
			return nil, err
		}
	}
	s.mem = limitAllocator(cfg, f.Size)
	var batchRows []int64
	err = guard(func() error {
		var err error
		// An object's record batches are checked as each unit reads them, not all at open: their
		// metadata lie all over the object, one request each (rows then are unknown until read).
		end := -1
		if s.obj != nil {
			end = 0
		}
		if batchRows, err = ipcguard.CheckFile(fh, f.Size, 0, end); err != nil {
			return err
		}
		if s.obj != nil {
			s.dicts, s.records, s.blocksOK = ipcguard.FileBlocks(fh, f.Size)
		}
		r, err := ipc.NewFileReader(io.NewSectionReader(fh, 0, f.Size), ipcOptions(s.mem, f.Size)...)
		if err != nil {
			return err
		}
		defer r.Close()
		s.schema = r.Schema()
		s.batches = r.NumRecords()
		return nil
	})
	if err != nil {
		return nil, corrupt(err)
	}
	// Group tiny batches so a unit is about one batch's worth of bytes.
	s.group = 1
	if s.batches > 0 {
		per := max(int64(1), f.Size/int64(s.batches))
		s.group = int(max(int64(1), min(int64(s.batches), s.cfg.batchBytes/per)))
	}
	if s.obj != nil {
		s.ahead = newReadAhead(s.obj, cfg, s.unitRanges)
	}
	for i, start := 0, 0; start < s.batches; i, start = i+1, start+s.group {
		n := min(s.group, s.batches-start)
		rows := int64(0)
		for b := start; b < start+n; b++ {
			if len(batchRows) != s.batches || batchRows[b] < 0 {
				rows = -1
				break
			}
			rows += batchRows[b]
		}
		s.units = append(s.units, Unit{Index: i, Rows: rows, Bytes: f.Size * int64(n) / int64(s.batches)})
	}
	return s, nil
}

func (s *ipcFileSource) File() File            { return s.f }
func (s *ipcFileSource) Schema() *arrow.Schema { return s.schema }
func (s *ipcFileSource) Units() []Unit         { return append([]Unit(nil), s.units...) }
func (s *ipcFileSource) readAhead(units []int) {
	if s.ahead != nil {
		s.ahead.plan(units)
	}
}

func (s *ipcFileSource) Close() error {
	if s.ahead != nil {
		s.ahead.close()
	}
	return s.fh.Close()
}

// batchRange returns the record batches [first, end) that unit covers.
func (s *ipcFileSource) batchRange(unit int) (int, int) {
	first := unit * s.group
	return first, min(s.batches, first+s.group)
}

func (s *ipcFileSource) unitName() string { return "batch group" }

func (s *ipcFileSource) readUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	if unit < 0 || unit >= len(s.units) {
		return fmt.Errorf("no such unit (the file has %d)", len(s.units))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		r       *ipc.FileReader
		pending arrow.RecordBatch
		st      = &stepper{}
	)
	defer st.finish(func() {
		if r != nil {
			r.Close()
		}
		if pending != nil {
			pending.Release()
		}
	})
	first, end := s.batchRange(unit)
	var ra io.ReaderAt = s.fh
	if s.obj != nil {
		pf, release, err := s.ahead.take(ctx, unit)
		if err != nil {
			return err
		}
		defer release()
		ra = pf
	}
	err := st.run(ctx, func() error {
		// Open checked every message; the reader built here reads the footer and dictionaries
		// again, and this unit's batches, so those are checked again (not the whole file per unit).
		if _, err := ipcguard.CheckFile(ra, s.f.Size, first, end); err != nil {
			return err
		}
		var err error
		r, err = ipc.NewFileReader(io.NewSectionReader(ra, 0, s.f.Size), ipcOptions(s.mem, s.f.Size)...)
		return err
	})
	if err != nil {
		return corrupt(err)
	}
	for i := first; i < end; i++ {
		err := st.run(ctx, func() error {
			rec, err := r.RecordBatchAt(i)
			if err != nil {
				return err
			}
			if err := validateRecord(rec); err != nil {
				rec.Release()
				return err
			}
			pending = rec
			return nil
		})
		if err != nil {
			return fmt.Errorf("record batch %d: %w", i, corrupt(err))
		}
		rec := pending
		pending = nil
		err = sliceBatches(rec, s.cfg.batchBytes, fn)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// ipcStreamSource reads an Arrow IPC stream sequentially as one unit.
type ipcStreamSource struct {
	f      File
	cfg    *config
	mem    memory.Allocator
	schema *arrow.Schema
	whole  []byte // a small object's bytes, read whole by Open and read again from memory by its unit
}

func openIPCStream(ctx context.Context, f File, cfg *config) (unitSource, error) {
	s := &ipcStreamSource{f: f, cfg: cfg}
	s.mem = limitAllocator(cfg, f.Size)
	var err error
	if s.whole, err = readSmall(ctx, f, cfg); err != nil {
		return nil, err
	}
	fh, rd, err := s.open(ctx, false)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	err = guard(func() error {
		if err := ipcguard.CheckStream(fh, f.Size); err != nil {
			return err
		}
		r, err := newStreamReader(rd, s.mem, f.Size)
		if err != nil {
			return err
		}
		defer r.Release()
		s.schema = r.Schema()
		return nil
	})
	if err != nil {
		return nil, corrupt(err)
	}
	return s, nil
}

func (s *ipcStreamSource) File() File            { return s.f }
func (s *ipcStreamSource) Schema() *arrow.Schema { return s.schema }
func (s *ipcStreamSource) Units() []Unit         { return []Unit{{Index: 0, Rows: -1, Bytes: s.f.Size}} }
func (s *ipcStreamSource) Close() error          { return nil }

func (s *ipcStreamSource) unitName() string { return "stream" }

// open is openStream, from memory when Open read the object whole.
func (s *ipcStreamSource) open(ctx context.Context, whole bool) (io.ReaderAt, io.ReadCloser, error) {
	if s.whole != nil {
		return bytes.NewReader(s.whole), io.NopCloser(bytes.NewReader(s.whole)), nil
	}
	return openStream(ctx, s.f, whole, s.cfg)
}

func (s *ipcStreamSource) readUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	if unit != 0 {
		return fmt.Errorf("no such unit (a stream is one unit)")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fh, rd, err := s.open(ctx, true)
	if err != nil {
		return err
	}
	var (
		r       *ipc.Reader
		pending arrow.RecordBatch
		st      = &stepper{}
	)
	defer st.finish(func() {
		if r != nil {
			r.Release()
		}
		if pending != nil {
			pending.Release()
		}
		rd.Close()
	})
	err = st.run(ctx, func() error {
		// An object's messages were checked by Open, and every read of it since is of that version
		// (the ETag it was listed with): checking them again would cost a GET per message.
		if s.f.Store == nil {
			if err := ipcguard.CheckStream(fh, s.f.Size); err != nil {
				return err
			}
		}
		var err error
		r, err = newStreamReader(rd, s.mem, s.f.Size)
		return err
	})
	if err != nil {
		return corrupt(err)
	}
	for batch := 0; ; batch++ {
		err := st.run(ctx, func() error {
			if !r.Next() {
				return r.Err()
			}
			rec := r.RecordBatch()
			if err := validateRecord(rec); err != nil {
				return err
			}
			rec.Retain()
			pending = rec
			return nil
		})
		if err != nil {
			return fmt.Errorf("record batch %d: %w", batch, corrupt(err))
		}
		rec := pending
		pending = nil
		if rec == nil {
			return nil
		}
		err = sliceBatches(rec, s.cfg.batchBytes, fn)
		rec.Release()
		if err != nil {
			return err
		}
	}
}

// validateRecord checks a decoded IPC batch's layout (offsets, buffer sizes, dictionary indices,
// null counts) so a corrupt file fails here instead of panicking later in a cast or writer.
// Columns holding the null or union types are not checked: arrow-go v18.8.0's validator rejects
// valid null arrays and panics on unions (neither has a Delta type, so schemamatch refuses them).
func validateRecord(rec arrow.RecordBatch) error {
	for i, col := range rec.Columns() {
		if !validatable(col.DataType()) {
			continue
		}
		if err := arrowcheck.Full(col); err != nil {
			return fmt.Errorf("column %d (%s): %w", i, rec.ColumnName(i), err)
		}
	}
	return nil
}

func validatable(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.NullType, arrow.UnionType:
		return false
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if !validatable(f.Type) {
				return false
			}
		}
	case *arrow.DictionaryType:
		return validatable(t.ValueType)
	case arrow.ExtensionType:
		return validatable(t.StorageType())
	}
	return true
}

// newStreamReader opens an IPC stream reader whose message sizes are bounded by the file size.
// ipc.NewReader ignores WithMetadataSizeLimit and WithBodySizeLimit in arrow-go v18.8.0 (it
// builds its message reader without them), so a corrupt length made it allocate up to 2 GiB for
// a four-byte file; the message reader built here carries the limits.
func newStreamReader(r io.Reader, mem memory.Allocator, size int64) (*ipc.Reader, error) {
	opts := ipcOptions(mem, size)
	return ipc.NewReaderFromMessageReader(ipc.NewMessageReader(bufio.NewReader(r), opts...), opts...)
}
