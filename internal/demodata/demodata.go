// Package demodata generates a realistic, deterministic dataset of Parquet, CSV or Arrow IPC files:
// the data `make demo` loads and the benchmarks measure. The same options always produce
// byte-identical files, and the three formats hold the same rows.
//
// The rows look like product events: ids, strings with nulls, timestamps with a zone, dates, decimals,
// doubles, floats, booleans, a list of tags, a struct and some binary. The Arrow types are the ones
// real writers (pandas, Spark) produce, not the canonical ones, so a load exercises the usual casts:
// utf8 to large_utf8, timestamp[ns] to µs, decimal to text, a list child named "element".
package demodata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
)

// Format is the file format of a dataset.
type Format string

// The formats.
const (
	// Parquet files (part-NNNNN.parquet), Snappy-compressed, a row group per RowGroupRows rows.
	Parquet Format = "parquet"
	// CSV files (part-NNNNN.csv) with a header row; nulls are empty fields, lists and structs JSON,
	// timestamps RFC 3339 in UTC, decimals their text, binary its bytes as they are (quoted when
	// needed). The table's columns (Schema's canonical mapping) give the types back.
	CSV Format = "csv"
	// Arrow IPC files (part-NNNNN.arrow, the random-access file format), a record batch per
	// RowGroupRows rows.
	IPC Format = "ipc"
)

// ParseFormat reads a format name: parquet, csv or ipc.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Parquet, CSV, IPC:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q, want parquet, csv or ipc", s)
}

// ext is the file name extension of the format.
func (f Format) ext() string {
	switch f {
	case CSV:
		return ".csv"
	case IPC:
		return ".arrow"
	}
	return ".parquet"
}

// Options size the dataset. Zero values take the defaults noted.
type Options struct {
	Rows         int64  // total rows; default 1,000,000
	Files        int    // number of files; default 8
	RowGroupRows int64  // rows per row group (Parquet) or record batch (IPC); default 25,000
	Format       Format // default Parquet; an unknown one makes Generate fail
	Seed         uint64
	// Canonical writes the columns in the canonical Arrow types of their table columns (the types
	// frames carry: large strings, microsecond timestamps, DECIMAL as text...), so a load needs no
	// cast: the files a tool writing for Zerobus would have. Parquet and IPC only.
	Canonical bool
}

func (o *Options) applyDefaults() {
	if o.Rows <= 0 {
		o.Rows = 1_000_000 // issue 3: at least a million rows
	}
	if o.Files <= 0 {
		o.Files = 8 // several files, so file-level parallelism shows
	}
	if int64(o.Files) > o.Rows {
		o.Files = int(o.Rows)
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 25_000 // several row groups per file
	}
	if o.Format == "" {
		o.Format = Parquet // what the loader's users have most
	}
}

// Schema is the Arrow schema of the generated files.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "event_id", Type: arrow.BinaryTypes.String},
		{Name: "user_id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "user_name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "email", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "country", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "event_date", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "quantity", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "discount", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "is_active", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "device", Type: arrow.StructOf(
			arrow.Field{Name: "os", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "version", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "mobile", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		), Nullable: true},
		{Name: "payload", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "session_ms", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
}

// Result describes what Generate wrote.
type Result struct {
	Files []string
	Rows  int64
}

// Generate writes the dataset into dir as part-NNNNN files of the format (.parquet, .csv or .arrow),
// replacing files of the same name.
func Generate(ctx context.Context, dir string, opts Options) (Result, error) {
	opts.applyDefaults()
	if _, err := ParseFormat(string(opts.Format)); err != nil {
		return Result{}, fmt.Errorf("demodata: %w", err)
	}
	if opts.Canonical && opts.Format == CSV {
		return Result{}, errors.New("demodata: canonical types apply to Parquet and Arrow IPC files; CSV is text")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	var res Result
	per := opts.Rows / int64(opts.Files)
	start := int64(0)
	for f := 0; f < opts.Files; f++ {
		n := per
		if f == opts.Files-1 {
			n = opts.Rows - start
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%05d%s", f, opts.Format.ext()))
		if err := writeFile(ctx, path, f, start, n, opts); err != nil {
			return res, fmt.Errorf("demodata: %s: %w", path, err)
		}
		res.Files = append(res.Files, path)
		res.Rows += n
		start += n
	}
	return res, nil
}

// batchWriter writes the batches of one file; Close finishes the file (and closes it).
type batchWriter interface {
	Write(rec arrow.RecordBatch) error
	Close() error
}

// canonicalPlan casts the generated batches to the canonical Arrow types of their table columns.
func canonicalPlan() (*schemamatch.Plan, error) {
	ts, err := tableschema.FromArrow(Schema())
	if err != nil {
		return nil, err
	}
	return schemamatch.NewPlan(Schema(), ts)
}

func newWriter(out *os.File, opts Options, plan *schemamatch.Plan) (batchWriter, error) {
	schema := Schema()
	if plan != nil {
		schema = plan.Schema()
	}
	switch opts.Format {
	case CSV:
		return newCSVWriter(out), nil
	case IPC:
		w, err := ipc.NewFileWriter(out, ipc.WithSchema(schema))
		if err != nil {
			return nil, err
		}
		return closeBoth{w, out}, nil
	}
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(opts.RowGroupRows),
		parquet.WithCreatedBy("loader demodata"),
	)
	arrowProps := pqarrow.DefaultWriterProps()
	if plan != nil {
		// The stored Arrow schema keeps the large types, which a reader would otherwise read back as
		// their plain Parquet defaults.
		arrowProps = pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
	}
	return pqarrow.NewFileWriter(schema, out, props, arrowProps) // its Close closes out
}

// closeBoth closes a writer that leaves its file open, then the file.
type closeBoth struct {
	batchWriter
	f *os.File
}

func (c closeBoth) Close() error {
	if err := c.batchWriter.Close(); err != nil {
		return err
	}
	return c.f.Close()
}

func writeFile(ctx context.Context, path string, fileIdx int, firstID, rows int64, opts Options) (err error) {
	tmp := path + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	var plan *schemamatch.Plan
	if opts.Canonical {
		if plan, err = canonicalPlan(); err != nil {
			return err
		}
	}
	w, err := newWriter(out, opts, plan)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(opts.Seed, uint64(fileIdx)))
	for done := int64(0); done < rows; {
		if err := ctx.Err(); err != nil {
			w.Close()
			return err
		}
		n := min(opts.RowGroupRows, rows-done)
		rec := batch(rng, firstID+done, n)
		if plan != nil {
			cast, err := plan.Apply(rec)
			rec.Release()
			if err != nil {
				w.Close()
				return err
			}
			rec = cast
		}
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			w.Close()
			return err
		}
		done += n
	}
	if err := w.Close(); err != nil { // closes out too
		return err
	}
	return os.Rename(tmp, path)
}

var (
	countries = []string{"US", "DE", "FR", "JP", "BR", "IN", "GB", "CA", "AU", "NL", "SE", "ES"}
	names     = []string{"ada", "grace", "linus", "barbara", "ken", "margaret", "dennis", "frances", "john", "radia"}
	tagWords  = []string{"new", "promo", "mobile", "returning", "beta", "vip", "trial", "churn-risk"}
	oses      = []string{"ios", "android", "linux", "windows", "macos"}
	epoch2025 = int64(1735689600) // 2025-01-01T00:00:00Z
)

// batch builds n rows starting at id firstID.
func batch(rng *rand.Rand, firstID, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema())
	defer b.Release()
	b.Reserve(int(n))
	id := b.Field(0).(*array.Int64Builder)
	eventID := b.Field(1).(*array.StringBuilder)
	userID := b.Field(2).(*array.Int32Builder)
	userName := b.Field(3).(*array.StringBuilder)
	email := b.Field(4).(*array.StringBuilder)
	country := b.Field(5).(*array.StringBuilder)
	eventTime := b.Field(6).(*array.TimestampBuilder)
	eventDate := b.Field(7).(*array.Date32Builder)
	amount := b.Field(8).(*array.Decimal128Builder)
	price := b.Field(9).(*array.Float64Builder)
	quantity := b.Field(10).(*array.Int32Builder)
	discount := b.Field(11).(*array.Float32Builder)
	active := b.Field(12).(*array.BooleanBuilder)
	tags := b.Field(13).(*array.ListBuilder)
	tagVals := tags.ValueBuilder().(*array.StringBuilder)
	device := b.Field(14).(*array.StructBuilder)
	devOS := device.FieldBuilder(0).(*array.StringBuilder)
	devVer := device.FieldBuilder(1).(*array.Int32Builder)
	devMobile := device.FieldBuilder(2).(*array.BooleanBuilder)
	payload := b.Field(15).(*array.BinaryBuilder)
	session := b.Field(16).(*array.Int64Builder)

	for i := int64(0); i < n; i++ {
		rowID := firstID + i
		id.Append(rowID)
		eventID.Append(fmt.Sprintf("%016x-%08x", uint64(rowID)*0x9E3779B97F4A7C15, rng.Uint32()))
		maybe(rng, 0.05, userID.AppendNull, func() { userID.Append(int32(rng.IntN(5_000_000))) })
		maybe(rng, 0.10, userName.AppendNull, func() { userName.Append(names[rng.IntN(len(names))] + fmt.Sprint(rng.IntN(1000))) })
		maybe(rng, 0.20, email.AppendNull, func() { email.Append(fmt.Sprintf("user%d@example.com", rng.IntN(1_000_000))) })
		maybe(rng, 0.02, country.AppendNull, func() { country.Append(countries[rng.IntN(len(countries))]) })
		secs := epoch2025 + rng.Int64N(365*86400)
		micros := rng.Int64N(1_000_000)
		maybe(rng, 0.01, eventTime.AppendNull, func() { eventTime.Append(arrow.Timestamp((secs*1_000_000 + micros) * 1000)) })
		maybe(rng, 0.01, eventDate.AppendNull, func() { eventDate.Append(arrow.Date32(secs / 86400)) })
		maybe(rng, 0.05, amount.AppendNull, func() { amount.Append(decimal128.FromI64(rng.Int64N(20_000_000) - 1_000_000)) })
		maybe(rng, 0.03, price.AppendNull, func() { price.Append(float64(rng.IntN(100_000)) / 100) })
		maybe(rng, 0.03, quantity.AppendNull, func() { quantity.Append(int32(rng.IntN(50) + 1)) })
		maybe(rng, 0.30, discount.AppendNull, func() { discount.Append(float32(rng.IntN(50)) / 100) })
		maybe(rng, 0.05, active.AppendNull, func() { active.Append(rng.IntN(2) == 0) })
		maybe(rng, 0.10, tags.AppendNull, func() {
			tags.Append(true)
			for k := rng.IntN(4); k > 0; k-- {
				maybe(rng, 0.05, tagVals.AppendNull, func() { tagVals.Append(tagWords[rng.IntN(len(tagWords))]) })
			}
		})
		maybe(rng, 0.08, device.AppendNull, func() {
			device.Append(true)
			devOS.Append(oses[rng.IntN(len(oses))])
			maybe(rng, 0.1, devVer.AppendNull, func() { devVer.Append(int32(rng.IntN(20))) })
			devMobile.Append(rng.IntN(3) == 0)
		})
		maybe(rng, 0.50, payload.AppendNull, func() {
			p := make([]byte, 4+rng.IntN(12))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			payload.Append(p)
		})
		maybe(rng, 0.04, session.AppendNull, func() { session.Append(rng.Int64N(3_600_000)) })
	}
	return b.NewRecordBatch()
}

// maybe appends a null with probability p, else a value; it always draws once from rng first, so the
// stream of draws, and thus the dataset, is fixed by the seed.
func maybe(rng *rand.Rand, p float64, null func(), value func()) {
	if rng.Float64() < p {
		null()
		return
	}
	value()
}
