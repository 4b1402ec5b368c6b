package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// The rivals are what a user could write instead of running the loader: each file read with
// arrow-go into an array.RecordReader of batchRows-row batches and sent over one stream, file after
// file. They read Parquet (pqarrow, columns decoded in parallel) and Arrow IPC (ipc readers); CSV
// they cannot (arrow-go's csv.Reader has no JSON lists or structs), see rivalFormats.

// rivalFormats reports whether the rivals can read every file, and why not.
func rivalFormats(files []readers.File) (bool, string) {
	for _, f := range files {
		switch f.Format {
		case readers.FormatParquet, readers.FormatIPCFile, readers.FormatIPCStream:
		default:
			return false, fmt.Sprintf("the rivals (ADBC, hand-written) are skipped: they read Parquet and Arrow IPC with arrow-go, and %s is %s (arrow-go's csv.Reader reads no JSON lists or structs)", f.Path, f.Format)
		}
		if f.Store != nil {
			return false, fmt.Sprintf("the rivals (ADBC, hand-written) are skipped: they read local files with arrow-go, and %s is in an object store", f.Path)
		}
		if len(f.Partitions) > 0 {
			return false, fmt.Sprintf("the rivals (ADBC, hand-written) are skipped: %s takes columns from its Hive partition directories, which arrow-go's readers do not add", f.Path)
		}
	}
	return true, ""
}

// openRecords opens a file as arrow-go offers it: pqarrow's RecordReader for Parquet, ipc's readers
// for Arrow IPC. Release the reader, then call done.
func openRecords(ctx context.Context, f readers.File, batchRows int64, mem memory.Allocator) (rdr array.RecordReader, done func(), err error) {
	switch f.Format {
	case readers.FormatParquet:
		pf, err := file.OpenParquetFile(f.Path, false)
		if err != nil {
			return nil, nil, err
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batchRows, Parallel: true}, mem)
		if err != nil {
			pf.Close()
			return nil, nil, err
		}
		rr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			pf.Close()
			return nil, nil, err
		}
		return rr, func() { pf.Close() }, nil
	case readers.FormatIPCFile:
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, nil, err
		}
		fr, err := ipc.NewFileReader(fh, ipc.WithAllocator(mem))
		if err != nil {
			fh.Close()
			return nil, nil, err
		}
		batches := func(yield func(arrow.RecordBatch, error) bool) {
			for i := range fr.NumRecords() {
				rec, err := fr.RecordBatch(i)
				if !yield(rec, err) || err != nil {
					return
				}
			}
		}
		return array.ReaderFromIter(fr.Schema(), batches), func() { fr.Close(); fh.Close() }, nil
	case readers.FormatIPCStream:
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, nil, err
		}
		r, err := ipc.NewReader(fh, ipc.WithAllocator(mem))
		if err != nil {
			fh.Close()
			return nil, nil, err
		}
		return r, func() { fh.Close() }, nil
	}
	return nil, nil, fmt.Errorf("%s: arrow-go has no reader for %s here", f.Path, f.Format)
}

// adbcIngest is the ADBC rival: the Go ADBC Flight SQL driver's bulk ingest (append), one statement
// per file, as its users call it. The sink casts the file's types to the table's (Flight SQL ingest
// takes any schema it can cast), so this client does no casting.
func adbcIngest(ctx context.Context, endpoint string, table tableschema.TableName, files []readers.File, batchRows int64) (rows int64, err error) {
	mem := memory.DefaultAllocator
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(map[string]string{adbc.OptionKeyURI: endpoint})
	if err != nil {
		return 0, fmt.Errorf("adbc: %w", err)
	}
	defer db.Close()
	cnxn, err := db.Open(ctx)
	if err != nil {
		return 0, fmt.Errorf("adbc: open: %w", err)
	}
	defer cnxn.Close()
	for _, f := range files {
		n, err := adbcFile(ctx, cnxn, table, f, batchRows, mem)
		if err != nil {
			return rows, fmt.Errorf("adbc: %s: %w", f.Path, err)
		}
		rows += n
	}
	return rows, nil
}

func adbcFile(ctx context.Context, cnxn adbc.Connection, table tableschema.TableName, f readers.File, batchRows int64, mem memory.Allocator) (int64, error) {
	rdr, done, err := openRecords(ctx, f, batchRows, mem)
	if err != nil {
		return 0, err
	}
	defer done()
	defer rdr.Release()
	stmt, err := cnxn.NewStatement()
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	for k, v := range map[string]string{
		adbc.OptionKeyIngestTargetTable:      table.Table,
		adbc.OptionKeyIngestMode:             adbc.OptionValueIngestModeAppend,
		adbc.OptionValueIngestTargetCatalog:  table.Catalog,
		adbc.OptionValueIngestTargetDBSchema: table.Schema,
	} {
		if err := stmt.SetOption(k, v); err != nil {
			return 0, fmt.Errorf("option %s: %w", k, err)
		}
	}
	if err := stmt.BindStream(ctx, rdr); err != nil {
		return 0, err
	}
	return stmt.ExecuteUpdate(ctx)
}

// handwritten is the hand-written rival: a plain arrow-go loop. For each file, one Flight DoPut with
// a PATH descriptor [catalog, schema, table] and one flight.Writer; every batch is cast to the table's
// canonical types first (the sink's plain Flight dialect, like Zerobus, takes exactly those), with
// arrow-go's compute.CastArray, and DECIMAL columns formatted as text by hand (arrow-go casts no
// decimal to text). The PutResults are drained as they come and the call must end OK.
func handwritten(ctx context.Context, addr string, table tableschema.TableName, files []readers.File, batchRows int64) (rows int64, err error) {
	mem := memory.DefaultAllocator
	cl, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, fmt.Errorf("hand-written: %w", err)
	}
	defer cl.Close()
	for _, f := range files {
		n, err := handwrittenFile(ctx, cl, table, f, batchRows, mem)
		rows += n
		if err != nil {
			return rows, fmt.Errorf("hand-written: %s: %w", f.Path, err)
		}
	}
	return rows, nil
}

func handwrittenFile(ctx context.Context, cl flight.Client, table tableschema.TableName, f readers.File, batchRows int64, mem memory.Allocator) (int64, error) {
	rdr, done, err := openRecords(ctx, f, batchRows, mem)
	if err != nil {
		return 0, err
	}
	defer done()
	defer rdr.Release()
	ts, err := tableschema.FromArrow(rdr.Schema())
	if err != nil {
		return 0, err
	}
	target := ts.Arrow()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cl.DoPut(ctx)
	if err != nil {
		return 0, err
	}
	drained := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				drained <- err
				return
			}
		}
	}()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(target), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: table.Parts()})
	var rows int64
	send := func() error {
		for rdr.Next() {
			rec, err := castTo(ctx, rdr.RecordBatch(), target, mem)
			if err != nil {
				return err
			}
			err = w.Write(rec)
			rec.Release()
			if err != nil {
				return err
			}
			rows += rec.NumRows()
		}
		if err := rdr.Err(); err != nil {
			return err
		}
		return w.Close()
	}
	serr := send()
	if cerr := stream.CloseSend(); serr == nil {
		serr = cerr
	}
	if serr != nil && !errors.Is(serr, io.EOF) { // io.EOF: the server ended the call; its status follows
		cancel()
	}
	rerr := <-drained
	switch {
	case rerr != nil:
		return rows, rerr
	case serr != nil:
		return rows, serr
	}
	return rows, nil
}

// castTo casts every column of rec to the type of target's field of the same position.
func castTo(ctx context.Context, rec arrow.RecordBatch, target *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	ectx := compute.WithAllocator(ctx, mem)
	for i, col := range rec.Columns() {
		want := target.Field(i).Type
		var out arrow.Array
		var err error
		switch {
		case arrow.TypeEqual(col.DataType(), want):
			col.Retain()
			out = col
		case col.DataType().ID() == arrow.DECIMAL128 && want.ID() == arrow.LARGE_STRING:
			out = decimalText(col.(*array.Decimal128), mem)
		default:
			out, err = compute.CastArray(ectx, col, compute.SafeCastOptions(want))
		}
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", target.Field(i).Name, err)
		}
		cols = append(cols, out)
	}
	return array.NewRecordBatch(target, cols, rec.NumRows()), nil
}

// decimalText formats decimals as text with their scale's digits, as DECIMAL columns travel.
func decimalText(a *array.Decimal128, mem memory.Allocator) arrow.Array {
	scale := a.DataType().(*arrow.Decimal128Type).Scale
	b := array.NewLargeStringBuilder(mem)
	defer b.Release()
	b.Reserve(a.Len())
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(a.Value(i).ToString(scale))
	}
	return b.NewArray()
}
