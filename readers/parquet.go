package readers

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"

	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/internal/memlimit"
	"github.com/loaderproject/loader/objstore"
)

// parquetSource reads a Parquet file by row group. The file handle and the parsed footer are
// shared; each ReadUnit builds its own file and column readers over them, so units decode
// concurrently.
type parquetSource struct {
	f      File
	cfg    *config
	fh     readerAtCloser
	obj    *objstore.Reader // fh, when the file is an object; nil for local files
	ahead  *readAhead       // fetches an object's row groups; nil for local files
	meta   *metadata.FileMetaData
	schema *arrow.Schema
	units  []Unit
	mem    memory.Allocator
	leaves []int // leaf columns read through pqarrow
	// int96 maps top-level field index -> leaf column for flat INT96 columns, which are read
	// here as timestamp[us] (see readInt96) instead of pqarrow's timestamp[ns].
	int96 map[int]int
	// pages allocates the page buffers (compressed and decompressed pages, dictionary pages, the
	// decoders' scratch) of every unit: each row group's readers ask for about the same buffers
	// and free them when the row group is done, so the next one reuses them. Unzeroed: every page
	// buffer is filled (read or decompressed into) before it is read.
	pages *bufpool.Pool
}

// readerProps returns the page reader properties. Page buffers come from pages (Go's allocator when
// nil): the file reader pools some of them and frees them through finalizers, so they must not count
// against the caller's (checked) allocator. Decoded batches use the caller's allocator.
func readerProps(pages memory.Allocator) *parquet.ReaderProperties {
	if pages == nil {
		pages = memory.NewGoAllocator()
	}
	props := parquet.NewReaderProperties(pages)
	props.BufferedStreamEnabled = true
	return props
}

func openParquet(ctx context.Context, f File, cfg *config) (src unitSource, err error) {
	fh, err := openBytes(ctx, f, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			fh.Close()
		}
	}()
	if f.Size < 12 {
		return nil, fmt.Errorf("%w: %d bytes is too small for a Parquet file", ErrCorrupt, f.Size)
	}
	obj, _ := fh.(*objstore.Reader)
	if obj != nil {
		// the footer and its length in one suffix-range request (a larger footer takes one more; a
		// small file comes whole)
		if _, err := obj.ReadTail(ctx, firstRead(f.Size)); err != nil {
			return nil, err
		}
	}
	tail := make([]byte, 4)
	if _, err := fh.ReadAt(tail, f.Size-4); err != nil {
		return nil, corrupt(err)
	}
	if bytes.Equal(tail, magicParquetEnc) {
		return nil, ErrEncrypted
	}
	s := &parquetSource{f: f, cfg: cfg, fh: fh, obj: obj, pages: bufpool.NewUnzeroed()}
	if obj != nil {
		s.ahead = newReadAhead(obj, cfg, s.unitRanges)
	}
	s.mem = limitAllocator(cfg, f.Size)
	err = guard(func() error {
		rdr, err := file.NewParquetReader(io.NewSectionReader(fh, 0, f.Size), file.WithReadProps(readerProps(nil)))
		if err != nil {
			return err
		}
		s.meta = rdr.MetaData()
		if err := checkEncryption(s.meta); err != nil {
			return err
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, s.mem)
		if err != nil {
			return err
		}
		s.schema, err = fr.Schema()
		if err != nil {
			return err
		}
		s.findInt96(fr.Manifest)
		return nil
	})
	if err != nil {
		return nil, corrupt(err)
	}
	for i := 0; i < s.meta.Schema.NumColumns(); i++ {
		skip := false
		for _, leaf := range s.int96 {
			skip = skip || leaf == i
		}
		if !skip {
			s.leaves = append(s.leaves, i)
		}
	}
	if len(s.leaves)+len(s.int96) == 0 && s.meta.NumRows > 0 {
		return nil, fmt.Errorf("%w: %d rows but no columns", ErrCorrupt, s.meta.NumRows)
	}
	for i := 0; i < s.meta.NumRowGroups(); i++ {
		rg := s.meta.RowGroup(i)
		size := rg.TotalCompressedSize()
		if size <= 0 {
			for c := 0; c < rg.NumColumns(); c++ {
				if cc, err := rg.ColumnChunk(c); err == nil {
					size += cc.TotalCompressedSize()
				}
			}
		}
		if rg.NumRows() < 0 {
			return nil, fmt.Errorf("%w: row group %d declares %d rows", ErrCorrupt, i, rg.NumRows())
		}
		s.units = append(s.units, Unit{Index: i, Rows: rg.NumRows(), Bytes: size})
	}
	return s, nil
}

// checkEncryption reports ErrEncrypted for files whose columns are encrypted (a plaintext footer
// does not mean plaintext data).
func checkEncryption(meta *metadata.FileMetaData) error {
	if meta.IsSetEncryptionAlgorithm() {
		return ErrEncrypted
	}
	for i := 0; i < meta.NumRowGroups(); i++ {
		rg := meta.RowGroup(i)
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return err
			}
			if cc.CryptoMetadata() != nil {
				return ErrEncrypted
			}
		}
	}
	return nil
}

func (s *parquetSource) File() File            { return s.f }
func (s *parquetSource) Schema() *arrow.Schema { return s.schema }
func (s *parquetSource) Units() []Unit         { return append([]Unit(nil), s.units...) }
func (s *parquetSource) readAhead(units []int) {
	if s.ahead != nil {
		s.ahead.plan(units)
	}
}

func (s *parquetSource) Close() error {
	if s.ahead != nil {
		s.ahead.close()
	}
	return s.fh.Close()
}

// firstBatchRows caps a row group's first batch, before decoded sizes are known.
const firstBatchRows = 4096

// batchRows sizes a row group's batches to about batchBytes from its uncompressed size per row.
func (s *parquetSource) batchRows(unit int) int64 {
	rg := s.meta.RowGroup(unit)
	rows := rg.NumRows()
	if rows <= 0 {
		return 1
	}
	size := rg.TotalByteSize()
	if size <= 0 {
		size = s.units[unit].Bytes
	}
	perRow := max(int64(1), size/rows)
	n := max(int64(1), s.cfg.batchBytes/perRow)
	// A row takes at least a bit, so more rows than 8 per batch byte means the footer lies.
	return min(n, rows, max(1, 8*s.cfg.batchBytes))
}

func (s *parquetSource) unitName() string { return "row group" }

func (s *parquetSource) readUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	if unit < 0 || unit >= len(s.units) {
		return fmt.Errorf("no such unit (the file has %d row groups)", len(s.units))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	want := s.units[unit].Rows
	if want == 0 {
		return nil
	}
	batch := s.batchRows(unit)
	var readers []*pqarrow.ColumnReader
	i96 := map[int]*file.Int96ColumnChunkReader{}
	var pending arrow.RecordBatch
	st := &stepper{}
	defer st.finish(func() {
		for _, r := range readers {
			if r != nil {
				r.Release()
			}
		}
		if pending != nil {
			pending.Release()
		}
	})
	mem := s.mem
	var fh io.ReaderAt = s.fh
	if s.obj != nil {
		pf, release, err := s.ahead.take(ctx, unit)
		if err != nil {
			return err
		}
		defer release()
		fh = pf
	}
	err := st.run(ctx, func() error {
		largest, sizesTrue, err := checkRowGroupPages(fh, s.f.Size, s.meta.RowGroup(unit), s.f.Path, unit, s.cfg.verifyCRC, s.cfg.maxPage)
		if err != nil {
			return err
		}
		if 2*largest > s.cfg.allocLimit(s.f.Size) {
			// A page within the page limit but larger than the allocation cap: its values may need
			// a buffer of its size, rounded up to a power of two as builders grow.
			mem = memlimit.New(s.cfg.mem, 2*largest, memlimit.PerAllocation)
		}
		rdr, err := file.NewParquetReader(io.NewSectionReader(fh, 0, s.f.Size),
			file.WithReadProps(readerProps(s.pages)), file.WithMetadata(s.meta))
		if err != nil {
			return err
		}
		// PreAllocBinaryData sizes each batch's string and binary values buffer from the column
		// chunk's uncompressed size up front, instead of doubling it (a copy each time) as values
		// come; a dictionary-encoded chunk under-reserves, which only leaves some doubling. Only
		// when the pages bear the footer's sizes out: a footer that lies would size the buffers.
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: batch, PreAllocBinaryData: sizesTrue}, mem)
		if err != nil {
			return err
		}
		if len(s.leaves) > 0 {
			readers, _, err = fr.GetFieldReaders(ctx, s.leaves, []int{unit})
			if err != nil {
				return err
			}
		}
		return s.openInt96(rdr, unit, &i96)
	})
	if err != nil {
		return corrupt(err)
	}
	par := s.cfg.parquetParallel(len(readers) + len(i96))
	// The footer's sizes are only an estimate (dictionary pages, for one, decode to far more than
	// they take on disk): start small, then size each batch from what the previous one decoded to.
	batch = min(batch, firstBatchRows)
	var got int64
	for got < want {
		n := min(batch, want-got)
		err := st.run(ctx, func() error {
			var err error
			pending, err = s.readBatch(mem, readers, i96, n, par)
			return err
		})
		if err != nil {
			return corrupt(err)
		}
		rec := pending
		pending = nil
		if rec == nil {
			break
		}
		got += rec.NumRows()
		if size := util.TotalRecordSize(rec); size > 0 {
			batch = max(1, min(rec.NumRows()*s.cfg.batchBytes/size, 8*s.cfg.batchBytes, 2*batch+1024))
		}
		err = fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	if got != want {
		return fmt.Errorf("%w: the footer declares %d rows, the data holds %d", ErrCorrupt, want, got)
	}
	return nil
}

// readBatch decodes the next n rows of every column, par columns at a time. It returns nil at the
// end of the row group.
func (s *parquetSource) readBatch(mem memory.Allocator, readers []*pqarrow.ColumnReader, i96 map[int]*file.Int96ColumnChunkReader, n int64, par int) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, s.schema.NumFields())
	releaseAll := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	// jobs[i] decodes output column i
	jobs := make([]func() error, len(cols))
	next := 0
	for i := range cols {
		if r, ok := i96[i]; ok {
			jobs[i] = func() error {
				var err error
				cols[i], err = s.readInt96(mem, r, n)
				return err
			}
			continue
		}
		if next >= len(readers) {
			return nil, fmt.Errorf("%w: %d columns decoded, the schema has %d", ErrCorrupt, next, len(cols))
		}
		rd := readers[next]
		next++
		jobs[i] = func() error {
			ch, err := rd.NextBatch(n)
			if err != nil {
				return err
			}
			defer ch.Release()
			switch len(ch.Chunks()) {
			case 0:
				cols[i] = array.MakeArrayOfNull(mem, ch.DataType(), 0)
			case 1:
				cols[i] = ch.Chunk(0)
				cols[i].Retain()
			default:
				cols[i], err = array.Concatenate(ch.Chunks(), mem)
			}
			return err
		}
	}
	if par <= 1 {
		for _, job := range jobs {
			if err := guard(job); err != nil {
				releaseAll()
				return nil, err
			}
		}
	} else {
		var g errgroup.Group
		g.SetLimit(par)
		hook := s.cfg.decodeHook
		for _, job := range jobs {
			g.Go(func() error {
				if hook != nil {
					hook(true)
					defer hook(false)
				}
				return guard(job)
			})
		}
		if err := g.Wait(); err != nil {
			releaseAll()
			return nil, err
		}
	}
	rows := int64(-1)
	for i, c := range cols {
		if rows < 0 {
			rows = int64(c.Len())
		} else if int64(c.Len()) != rows {
			releaseAll()
			return nil, fmt.Errorf("%w: column %q decoded %d rows, column %q %d", ErrCorrupt,
				s.schema.Field(0).Name, rows, s.schema.Field(i).Name, c.Len())
		}
	}
	if rows <= 0 {
		releaseAll()
		return nil, nil
	}
	var rec arrow.RecordBatch
	err := guard(func() error {
		rec = array.NewRecordBatch(s.schema, cols, rows)
		return nil
	})
	releaseAll()
	return rec, err
}

// int96Type is what flat INT96 columns are read as. pqarrow reads them as timestamp[ns, UTC] and fails on
// the values Spark writes outside 1677-2262; microseconds hold every year from 1 to 9999, and
// sub-microsecond digits (Impala) are truncated toward the past.
var int96Type = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// findInt96 notes the flat top-level INT96 columns and retypes them in the schema.
func (s *parquetSource) findInt96(m *pqarrow.SchemaManifest) {
	fields := s.schema.Fields()
	changed := false
	for i, f := range m.Fields {
		if !f.IsLeaf() || i >= len(fields) {
			continue
		}
		col := s.meta.Schema.Column(f.ColIndex)
		if col.PhysicalType() != parquet.Types.Int96 || col.MaxRepetitionLevel() != 0 {
			continue
		}
		if s.int96 == nil {
			s.int96 = map[int]int{}
		}
		s.int96[i] = f.ColIndex
		fields[i].Type = int96Type
		changed = true
	}
	if changed {
		meta := s.schema.Metadata()
		s.schema = arrow.NewSchema(fields, &meta)
	}
}

// openInt96 opens the INT96 column readers of a row group.
func (s *parquetSource) openInt96(rdr *file.Reader, unit int, out *map[int]*file.Int96ColumnChunkReader) error {
	if len(s.int96) == 0 {
		return nil
	}
	rg := rdr.RowGroup(unit)
	for field, leaf := range s.int96 {
		cr, err := rg.Column(leaf)
		if err != nil {
			return err
		}
		r, ok := cr.(*file.Int96ColumnChunkReader)
		if !ok {
			return fmt.Errorf("column %d is not INT96", leaf)
		}
		(*out)[field] = r
	}
	return nil
}

// readInt96 reads up to n values of a flat INT96 column as microseconds.
func (s *parquetSource) readInt96(mem memory.Allocator, r *file.Int96ColumnChunkReader, n int64) (arrow.Array, error) {
	maxDef := r.Descriptor().MaxDefinitionLevel()
	vals := make([]parquet.Int96, n)
	var defs []int16
	if maxDef > 0 {
		defs = make([]int16, n)
	}
	b := array.NewTimestampBuilder(mem, int96Type)
	defer b.Release()
	b.Reserve(int(n))
	for int64(b.Len()) < n {
		total, nvals, err := r.ReadBatch(n-int64(b.Len()), vals, defs, nil)
		if err != nil {
			return nil, err
		}
		if total == 0 {
			break
		}
		if nvals > len(vals) || total > n {
			return nil, fmt.Errorf("INT96 reader returned %d values for %d levels", nvals, total)
		}
		v := 0
		for k := int64(0); k < total; k++ {
			if maxDef > 0 && defs[k] < maxDef {
				b.AppendNull()
				continue
			}
			if v >= nvals {
				return nil, fmt.Errorf("INT96 levels and values disagree")
			}
			b.Append(arrow.Timestamp(int96Micros(vals[v])))
			v++
		}
	}
	return b.NewArray(), nil
}

// int96Micros converts an INT96 (nanoseconds of the day, Julian day) to microseconds since the
// Unix epoch as Spark does: both parts signed, in wrapping 64-bit arithmetic, so that the extreme
// values Spark writes (its minimum timestamp, year -290308) read back as written.
func int96Micros(v parquet.Int96) int64 {
	nanos := int64(binary.LittleEndian.Uint64(v[:8]))
	days := int64(int32(binary.LittleEndian.Uint32(v[8:]))) - 2_440_588
	return days*86_400_000_000 + nanos/1000
}
