package readers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"
)

// parquetSource reads a Parquet file by row group. The file handle and the parsed footer are
// shared; each ReadUnit builds its own file and column readers over them, so units decode
// concurrently.
type parquetSource struct {
	f      File
	cfg    *config
	fh     *os.File
	meta   *metadata.FileMetaData
	schema *arrow.Schema
	units  []Unit
	mem    memory.Allocator
	leaves []int
	cols   int
}

func readerProps() *parquet.ReaderProperties {
	// Page buffers come from Go's allocator: the file reader pools them and frees them through
	// finalizers, so they must not count against the caller's (checked) allocator. Decoded
	// batches use the caller's allocator.
	props := parquet.NewReaderProperties(memory.NewGoAllocator())
	props.BufferedStreamEnabled = true
	return props
}

func openParquet(ctx context.Context, f File, cfg *config) (src Source, err error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	defer func() {
		if err != nil {
			fh.Close()
		}
	}()
	if f.Size < 12 {
		return nil, fmt.Errorf("%w: %s: %d bytes is too small for a Parquet file", ErrCorrupt, f.Path, f.Size)
	}
	tail := make([]byte, 4)
	if _, err := fh.ReadAt(tail, f.Size-4); err != nil {
		return nil, corrupt(f.Path, err)
	}
	if bytes.Equal(tail, magicParquetEnc) {
		return nil, fmt.Errorf("%s: %w", f.Path, ErrEncrypted)
	}
	s := &parquetSource{f: f, cfg: cfg, fh: fh}
	s.mem = &limitAllocator{Allocator: cfg.mem, limit: cfg.allocLimit(f.Size)}
	err = guard(func() error {
		rdr, err := file.NewParquetReader(io.NewSectionReader(fh, 0, f.Size), file.WithReadProps(readerProps()))
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
		s.cols = len(fr.Manifest.Fields)
		return nil
	})
	if err != nil {
		return nil, corrupt(f.Path, err)
	}
	s.leaves = make([]int, s.meta.Schema.NumColumns())
	for i := range s.leaves {
		s.leaves[i] = i
	}
	if len(s.leaves) == 0 && s.meta.NumRows > 0 {
		return nil, fmt.Errorf("%w: %s: %d rows but no columns", ErrCorrupt, f.Path, s.meta.NumRows)
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
			return nil, fmt.Errorf("%w: %s: row group %d declares %d rows", ErrCorrupt, f.Path, i, rg.NumRows())
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
func (s *parquetSource) Close() error          { return s.fh.Close() }

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

func (s *parquetSource) ReadUnit(ctx context.Context, unit int, fn func(arrow.RecordBatch) error) error {
	where := unitWhere(s.f.Path, "row group", unit)
	if unit < 0 || unit >= len(s.units) {
		return fmt.Errorf("%s: no such unit (the file has %d row groups)", where, len(s.units))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	want := s.units[unit].Rows
	if want == 0 {
		return nil
	}
	batch := s.batchRows(unit)
	var readers []*pqarrow.ColumnReader
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.Release()
			}
		}
	}()
	err := guard(func() error {
		rdr, err := file.NewParquetReader(io.NewSectionReader(s.fh, 0, s.f.Size),
			file.WithReadProps(readerProps()), file.WithMetadata(s.meta))
		if err != nil {
			return err
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: batch}, s.mem)
		if err != nil {
			return err
		}
		readers, _, err = fr.GetFieldReaders(ctx, s.leaves, []int{unit})
		return err
	})
	if err != nil {
		return corrupt(where, err)
	}
	par := s.cfg.parquetParallel(len(readers))
	var got int64
	for got < want {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		n := min(batch, want-got)
		rec, err := s.readBatch(readers, n, par)
		if err != nil {
			return corrupt(where, err)
		}
		if rec == nil {
			break
		}
		got += rec.NumRows()
		err = fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	if got != want {
		return fmt.Errorf("%w: %s: the footer declares %d rows, the data holds %d", ErrCorrupt, where, want, got)
	}
	return nil
}

// readBatch decodes the next n rows of every column, par columns at a time. It returns nil at the
// end of the row group.
func (s *parquetSource) readBatch(readers []*pqarrow.ColumnReader, n int64, par int) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(readers))
	releaseAll := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	read := func(i int) error {
		return guard(func() error {
			ch, err := readers[i].NextBatch(n)
			if err != nil {
				return err
			}
			defer ch.Release()
			switch len(ch.Chunks()) {
			case 0:
				cols[i] = array.MakeArrayOfNull(s.mem, ch.DataType(), 0)
			case 1:
				cols[i] = ch.Chunk(0)
				cols[i].Retain()
			default:
				cols[i], err = array.Concatenate(ch.Chunks(), s.mem)
			}
			return err
		})
	}
	if par <= 1 {
		for i := range readers {
			if err := read(i); err != nil {
				releaseAll()
				return nil, err
			}
		}
	} else {
		var g errgroup.Group
		g.SetLimit(par)
		for i := range readers {
			g.Go(func() error { return read(i) })
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
