package partitioner_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"go.uber.org/goleak"

	"github.com/loaderproject/loader/internal/bufpool"
	"github.com/loaderproject/loader/partitioner"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shape builds a deterministic batch.
type shape struct {
	name  string
	build func(mem memory.Allocator, rows int) arrow.RecordBatch
	tiny  int // a frame limit just above the largest row
}

func flatSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
}

func buildFlat(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, flatSchema())
	defer b.Release()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 3 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int32Builder).Append(r.Int32())
		}
		if i%5 == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.BooleanBuilder).Append(i%2 == 0)
		}
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)))
	}
	return b.NewRecordBatch()
}

func stringSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
	}, nil)
}

// buildWideStrings makes strings of very uneven length: most short, some of several KiB.
func buildWideStrings(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, stringSchema())
	defer b.Release()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		n := r.IntN(40)
		if i%97 == 0 {
			n = 2000 + r.IntN(6000)
		}
		if i%11 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.LargeStringBuilder).Append(randText(r, n))
		}
		if i%13 == 0 {
			b.Field(2).AppendNull()
		} else {
			buf := make([]byte, r.IntN(64))
			for j := range buf {
				buf[j] = byte(r.Uint32())
			}
			b.Field(2).(*array.BinaryBuilder).Append(buf)
		}
	}
	return b.NewRecordBatch()
}

func randText(r *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789 éß"
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteByte(letters[r.IntN(36)])
	}
	return sb.String()
}

func nestedSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.LargeString, Nullable: true}), Nullable: true},
		{Name: "pt", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			arrow.Field{Name: "label", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		), Nullable: true},
		{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.LargeString, arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
}

func buildNested(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, nestedSchema())
	defer b.Release()
	r := rand.New(rand.NewPCG(5, 6))
	lb := b.Field(1).(*array.ListBuilder)
	lv := lb.ValueBuilder().(*array.LargeStringBuilder)
	sb := b.Field(2).(*array.StructBuilder)
	sx := sb.FieldBuilder(0).(*array.Float64Builder)
	sl := sb.FieldBuilder(1).(*array.LargeStringBuilder)
	mb := b.Field(3).(*array.MapBuilder)
	mk := mb.KeyBuilder().(*array.LargeStringBuilder)
	mv := mb.ItemBuilder().(*array.Int32Builder)
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%9 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for j := range r.IntN(6) {
				if j == 2 {
					lv.AppendNull()
				} else {
					lv.Append(randText(r, r.IntN(30)))
				}
			}
		}
		if i%8 == 0 {
			sb.AppendNull()
		} else {
			sb.Append(true)
			sx.Append(r.Float64())
			if i%3 == 0 {
				sl.AppendNull()
			} else {
				sl.Append(randText(r, 10))
			}
		}
		if i%10 == 0 {
			mb.AppendNull()
		} else {
			mb.Append(true)
			for j := range r.IntN(4) {
				mk.Append(fmt.Sprintf("k%d", j))
				mv.Append(r.Int32())
			}
		}
	}
	return b.NewRecordBatch()
}

var shapes = []shape{
	{"flat", buildFlat, 1 << 10},
	{"wide strings", buildWideStrings, 9 << 10},
	{"nested", buildNested, 2 << 10},
}

// encodeAll encodes rec and returns its frames.
func encodeAll(t *testing.T, enc *partitioner.Encoder, rec arrow.RecordBatch, span partitioner.Span) []*partitioner.Frame {
	t.Helper()
	var frames []*partitioner.Frame
	if err := enc.Encode(rec, span, func(f *partitioner.Frame) error {
		frames = append(frames, f)
		return nil
	}); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return frames
}

// releaseFrames drops the references the frames came with.
func releaseFrames(frames []*partitioner.Frame) {
	for _, f := range frames {
		f.Release()
	}
}

// checkFrames asserts the frames' limit and spans, decodes them and compares the rows with rec, then
// releases the frames.
func checkFrames(t *testing.T, enc *partitioner.Encoder, rec arrow.RecordBatch, span partitioner.Span, limit int, frames []*partitioner.Frame) {
	t.Helper()
	defer releaseFrames(frames)
	row := span.Row
	for i, f := range frames {
		if f.Size() > limit {
			t.Errorf("frame %d: Size() = %d; want <= %d", i, f.Size(), limit)
		}
		if f.Rows <= 0 {
			t.Errorf("frame %d: Rows = %d; want > 0", i, f.Rows)
		}
		want := partitioner.Span{File: span.File, Unit: span.Unit, Row: row}
		if f.Span != want {
			t.Errorf("frame %d: Span = %+v; want %+v", i, f.Span, want)
		}
		got, err := enc.Decode(f)
		if err != nil {
			t.Fatalf("Decode(frame %d): %v", i, err)
		}
		off := row - span.Row
		exp := rec.NewSlice(off, off+f.Rows)
		if !array.RecordEqual(got, exp) {
			t.Errorf("frame %d: decoded rows [%d,%d) differ from the source", i, off, off+f.Rows)
		}
		exp.Release()
		got.Release()
		row += f.Rows
	}
	if row-span.Row != rec.NumRows() {
		t.Errorf("frames hold %d rows; want %d", row-span.Row, rec.NumRows())
	}
}

func TestEncodeFramesFitAndRoundTrip(t *testing.T) {
	compressions := []partitioner.Compression{partitioner.CompressionNone, partitioner.CompressionLZ4, partitioner.CompressionZSTD}
	for _, sh := range shapes {
		limits := []int{sh.tiny, 16 << 10, 256 << 10, partitioner.DefaultMaxFrameBytes}
		for _, c := range compressions {
			for _, limit := range limits {
				t.Run(fmt.Sprintf("%s/%s/%d", sh.name, c, limit), func(t *testing.T) {
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					defer mem.AssertSize(t, 0)
					rec := sh.build(mem, 2000)
					defer rec.Release()
					enc, err := partitioner.NewEncoder(rec.Schema(), limit, partitioner.WithCompression(c), partitioner.WithAllocator(mem))
					if err != nil {
						t.Fatal(err)
					}
					span := partitioner.Span{File: 3, Unit: 7, Row: 1000}
					frames := encodeAll(t, enc, rec, span)
					checkFrames(t, enc, rec, span, limit, frames)
				})
			}
		}
	}
}

func TestEncodeSlicedInput(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			full := sh.build(mem, 2000)
			defer full.Release()
			rec := full.NewSlice(333, 1777)
			defer rec.Release()
			enc, err := partitioner.NewEncoder(rec.Schema(), 8<<10, partitioner.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			frames := encodeAll(t, enc, rec, partitioner.Span{Row: 333})
			checkFrames(t, enc, rec, partitioner.Span{Row: 333}, 8<<10, frames)
		})
	}
}

// TestEncodeFillsFrames checks that uniform rows are not cut into needlessly small frames.
func TestEncodeFillsFrames(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := buildFlat(mem, 200_000)
	defer rec.Release()
	const limit = 256 << 10
	enc, err := partitioner.NewEncoder(rec.Schema(), limit, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	frames := encodeAll(t, enc, rec, partitioner.Span{})
	total := 0
	for _, f := range frames {
		total += f.Size()
	}
	if maxFrames := total/(limit*8/10) + 1; len(frames) > maxFrames {
		t.Errorf("Encode made %d frames for %d bytes; want at most %d (frames at least 80%% full)", len(frames), total, maxFrames)
	}
	checkFrames(t, enc, rec, partitioner.Span{}, limit, frames)
}

func TestEncodeCompressionShrinks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := buildFlat(mem, 20_000)
	defer rec.Release()
	size := func(c partitioner.Compression) (n int) {
		enc, err := partitioner.NewEncoder(rec.Schema(), 64<<20, partitioner.WithCompression(c), partitioner.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		frames := encodeAll(t, enc, rec, partitioner.Span{})
		for _, f := range frames {
			n += f.Size()
		}
		checkFrames(t, enc, rec, partitioner.Span{}, 64<<20, frames)
		return n
	}
	plain := size(partitioner.CompressionNone)
	for _, c := range []partitioner.Compression{partitioner.CompressionLZ4, partitioner.CompressionZSTD} {
		if got := size(c); got >= plain {
			t.Errorf("%s: encoded %d bytes; want fewer than the %d uncompressed bytes", c, got, plain)
		}
	}
}

func TestEncodeRowTooLarge(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewRecordBuilder(mem, stringSchema())
	defer b.Release()
	for i := range 50 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		s := "small"
		if i == 37 {
			s = strings.Repeat("x", 20_000)
		}
		b.Field(1).(*array.LargeStringBuilder).Append(s)
		b.Field(2).AppendNull()
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	const limit = 4096
	enc, err := partitioner.NewEncoder(rec.Schema(), limit, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	err = enc.Encode(rec, partitioner.Span{File: 2, Unit: 1, Row: 100}, func(f *partitioner.Frame) error {
		rows += f.Rows
		f.Release()
		return nil
	})
	if !errors.Is(err, partitioner.ErrRowTooLarge) {
		t.Fatalf("Encode() = %v; want ErrRowTooLarge", err)
	}
	for _, want := range []string{"file #2 unit 1 row 137", "limit is 4096 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Encode() error %q; want it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "xxxx") {
		t.Errorf("Encode() error %q contains row values", err)
	}
	if rows != 37 {
		t.Errorf("frames before the error hold %d rows; want the 37 rows before the large one", rows)
	}
}

func TestEncodeEmptyBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := buildFlat(mem, 0)
	defer rec.Release()
	enc, err := partitioner.NewEncoder(rec.Schema(), 1024, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if frames := encodeAll(t, enc, rec, partitioner.Span{}); len(frames) != 0 {
		t.Errorf("Encode(0 rows) made %d frames; want 0", len(frames))
	}
}

func TestEncodeEmitErrorStops(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := buildFlat(mem, 10_000)
	defer rec.Release()
	enc, err := partitioner.NewEncoder(rec.Schema(), 4096, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	calls := 0
	err = enc.Encode(rec, partitioner.Span{}, func(f *partitioner.Frame) error {
		f.Release()
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Errorf("Encode() = %v after %d emits; want the emit error after 3", err, calls)
	}
}

func TestEncodeSchemaMismatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := buildFlat(mem, 10)
	defer rec.Release()
	enc, err := partitioner.NewEncoder(stringSchema(), 4096, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	err = enc.Encode(rec, partitioner.Span{File: 1}, func(*partitioner.Frame) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Encode(other schema) = %v; want a schema mismatch error", err)
	}
}

func TestNewEncoderRefuses(t *testing.T) {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	tests := []struct {
		name   string
		schema *arrow.Schema
		limit  int
		opts   []partitioner.EncoderOption
		want   string
	}{
		{"nil schema", nil, 1024, nil, "nil schema"},
		{"zero limit", flatSchema(), 0, nil, "positive"},
		{"dictionary", arrow.NewSchema([]arrow.Field{{Name: "d", Type: dict}}, nil), 1024, nil, `column "d"`},
		{"nested dictionary", arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(dict)}}, nil), 1024, nil, "l.item"},
		{"unknown compression", flatSchema(), 1024, []partitioner.EncoderOption{partitioner.WithCompression(9)}, "compression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := partitioner.NewEncoder(tt.schema, tt.limit, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewEncoder() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSchemaMessage(t *testing.T) {
	enc, err := partitioner.NewEncoder(nestedSchema(), 1024)
	if err != nil {
		t.Fatal(err)
	}
	msg := ipc.NewMessage(memory.NewBufferBytes(enc.SchemaMessage()), memory.NewBufferBytes(nil))
	defer msg.Release()
	if msg.Type() != ipc.MessageSchema {
		t.Fatalf("SchemaMessage() is a %s message; want schema", msg.Type())
	}
	// The schema message plus a frame read back as a stream give the same schema.
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := buildNested(mem, 3)
	defer rec.Release()
	frames := encodeAll(t, enc, rec, partitioner.Span{})
	defer releaseFrames(frames)
	got, err := enc.Decode(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !got.Schema().Equal(nestedSchema()) {
		t.Errorf("decoded schema %s; want %s", got.Schema(), nestedSchema())
	}
}

func TestDecodeBadFrames(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := buildFlat(mem, 100)
	defer rec.Release()
	enc, err := partitioner.NewEncoder(rec.Schema(), 1<<20, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	frames := encodeAll(t, enc, rec, partitioner.Span{})
	defer releaseFrames(frames)
	good := frames[0]
	body := good.AppendBody(nil)
	tests := []struct {
		name string
		f    *partitioner.Frame
	}{
		{"nil", nil},
		{"empty header", &partitioner.Frame{}},
		{"garbage header", &partitioner.Frame{Header: []byte("not a flatbuffer at all"), Rows: 1}},
		{"schema header", &partitioner.Frame{Header: enc.SchemaMessage(), Rows: 1}},
		{"short body", &partitioner.Frame{Header: good.Header, Body: body[:len(body)/2], Rows: good.Rows}},
		{"wrong rows", &partitioner.Frame{Header: good.Header, Body: body, Rows: good.Rows + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := enc.Decode(tt.f)
			if err == nil {
				rec.Release()
				t.Fatalf("Decode() = nil error; want an error")
			}
		})
	}
}

func TestEncoderConcurrentUse(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	enc, err := partitioner.NewEncoder(stringSchema(), 8<<10, partitioner.WithCompression(partitioner.CompressionZSTD), partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rec := buildWideStrings(mem, 500+g*100)
			defer rec.Release()
			span := partitioner.Span{File: g}
			var frames []*partitioner.Frame
			if err := enc.Encode(rec, span, func(f *partitioner.Frame) error {
				frames = append(frames, f)
				return nil
			}); err != nil {
				t.Error(err)
				return
			}
			checkFrames(t, enc, rec, span, 8<<10, frames)
		})
	}
	wg.Wait()
}

func BenchmarkEncode(b *testing.B) {
	for _, sh := range shapes {
		for _, c := range []partitioner.Compression{partitioner.CompressionNone, partitioner.CompressionLZ4, partitioner.CompressionZSTD} {
			b.Run(fmt.Sprintf("%s/%s", sh.name, c), func(b *testing.B) {
				rec := sh.build(memory.DefaultAllocator, 100_000)
				defer rec.Release()
				enc, err := partitioner.NewEncoder(rec.Schema(), partitioner.DefaultMaxFrameBytes, partitioner.WithCompression(c))
				if err != nil {
					b.Fatal(err)
				}
				raw := util.TotalRecordSize(rec)
				b.SetBytes(raw)
				b.ReportAllocs()
				var out int64
				for b.Loop() {
					if err := enc.Encode(rec, partitioner.Span{}, func(f *partitioner.Frame) error {
						out += int64(f.Size())
						f.Release()
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(rec.NumRows())*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(out)/float64(b.N)/float64(raw), "wire/raw")
			})
		}
	}
}

// TestFramesHoldTheirBatch checks that a frame's body is its batch's own buffers rather than a copy,
// and that a frame keeps what its body references until its last Release: the batch, after the caller
// released it, and the buffers the encoder made for the frame (a sliced string column's rebased
// offsets), while other batches are encoded and released through an allocator that hands freed memory
// out again. A Release too many panics.
func TestFramesHoldTheirBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(bufpool.New())
	defer mem.AssertSize(t, 0)
	const limit = 128 << 10 // frames of about 1,800 rows: rebased offsets of 14 KiB, which the pool keeps
	enc, err := partitioner.NewEncoder(stringSchema(), limit, partitioner.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	// sliced returns rows [from, 20000) of a fresh batch: its offsets do not start at zero, so the
	// encoder rebases them into buffers of its own.
	sliced := func(from int64) arrow.RecordBatch {
		full := buildWideStrings(mem, 20000)
		defer full.Release()
		return full.NewSlice(from, full.NumRows())
	}
	rec := sliced(77)
	frames := encodeAll(t, enc, rec, partitioner.Span{})
	defer func() { releaseFrames(frames) }()
	ids := rec.Column(0).Data().Buffers()[1].Bytes()
	shared := false
	for _, s := range frames[0].Segments() {
		shared = shared || &s[0] == &ids[77*8]
	}
	if !shared {
		t.Errorf("the first frame's body does not reference the id column's values: it was copied")
	}
	bodies := make([][]byte, len(frames))
	for i, f := range frames {
		bodies[i] = f.AppendBody(nil)
	}
	rec.Release() // the caller is done; the frames are not

	for from := range int64(4) {
		other := sliced(from + 1) // other rows: other values and offsets, in reused memory
		checkFrames(t, enc, other, partitioner.Span{}, limit, encodeAll(t, enc, other, partitioner.Span{}))
		other.Release()
	}
	for i, f := range frames {
		if got := f.AppendBody(nil); !bytes.Equal(got, bodies[i]) {
			t.Fatalf("frame %d of %d: its body changed after its batch was released and others encoded", i, len(frames))
		}
	}

	f := frames[0]
	f.Retain() // a transport's reference
	f.Release()
	f.Release() // the owner's: the last
	frames = frames[1:]
	defer func() {
		if recover() == nil {
			t.Errorf("a Release after the last did not panic")
		}
	}()
	f.Release()
}
