package ipcguard_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/loaderproject/loader/internal/ipcguard"
	"github.com/loaderproject/loader/readers"
)

// message is one IPC message: its flatbuffer and its body.
type message struct{ meta, body []byte }

// splitStream cuts an IPC stream into its messages.
func splitStream(t testing.TB, data []byte) []message {
	t.Helper()
	var msgs []message
	for len(data) >= 8 {
		if binary.LittleEndian.Uint32(data) != 0xFFFFFFFF {
			t.Fatalf("no continuation marker")
		}
		n := int(binary.LittleEndian.Uint32(data[4:]))
		data = data[8:]
		if n == 0 {
			break
		}
		meta := data[:n]
		body, err := ipcguard.CheckMessage(meta)
		if err != nil {
			t.Fatalf("CheckMessage(message %d arrow-go wrote) = %v", len(msgs), err)
		}
		msgs = append(msgs, message{meta, data[n : n+int(body)]})
		data = data[n+int(body):]
	}
	return msgs
}

// richSchema has a field of every kind the check looks into: nested lists and structs, a union, a
// timestamp with a time zone, a dictionary, a string view (variadic buffers) and custom metadata on
// the schema and a field.
func richSchema() *arrow.Schema {
	md := arrow.NewMetadata([]string{"origin"}, []string{"test"})
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: md},
		{Name: "l", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true})), Nullable: true},
		{Name: "u", Type: arrow.SparseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int8, Nullable: true}}, []arrow.UnionTypeCode{5}), Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}, Nullable: true},
		{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "sv", Type: arrow.BinaryTypes.StringView, Nullable: true},
	}, &md)
}

// richData returns an IPC stream (or file) of one batch of richSchema, written by arrow-go.
func richData(t testing.TB, file bool) []byte {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, _, err := array.RecordFromJSON(mem, richSchema(), strings.NewReader(`[
		{"id": 1, "l": [{"x": 1}, null], "u": [5, 3], "ts": 1704164645000000, "d": "a", "sv": "a string long enough to need a data buffer"},
		{"id": 2, "l": null, "u": [5, null], "ts": null, "d": null, "sv": null}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var buf bytes.Buffer
	opts := []ipc.Option{ipc.WithSchema(rec.Schema()), ipc.WithAllocator(mem)}
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if !file {
		w = ipc.NewWriter(&buf, opts...)
	} else if w, err = ipc.NewFileWriter(&buf, opts...); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// handSchema builds a Schema message by hand with what arrow-go's writer never writes: message
// custom metadata and schema features.
func handSchema() []byte {
	b := flatbuffers.NewBuilder(256)
	key, val := b.CreateString("k"), b.CreateString("v")
	b.StartObject(2)
	b.PrependUOffsetTSlot(0, key, 0)
	b.PrependUOffsetTSlot(1, val, 0)
	kv := b.EndObject()
	b.StartVector(4, 1, 4)
	b.PrependUOffsetT(kv)
	kvs := b.EndVector(1)
	b.StartVector(8, 1, 8)
	b.PrependInt64(1)
	features := b.EndVector(1)
	b.StartVector(4, 0, 4)
	fields := b.EndVector(0)
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, fields, 0)
	b.PrependUOffsetTSlot(3, features, 0)
	schema := b.EndObject()
	return finishMessage(b, 1, schema, kvs)
}

// finishMessage ends a Message (V5) whose header is of type ht; kvs is its custom metadata, or 0.
func finishMessage(b *flatbuffers.Builder, ht byte, header, kvs flatbuffers.UOffsetT) []byte {
	b.StartObject(5)
	b.PrependInt16Slot(0, 4, 0)
	b.PrependByteSlot(1, ht, 0)
	b.PrependUOffsetTSlot(2, header, 0)
	if kvs != 0 {
		b.PrependUOffsetTSlot(4, kvs, 0)
	}
	b.Finish(b.EndObject())
	return b.FinishedBytes()
}

// sharedFields builds a Schema message whose one field has two children that are the same field,
// which has two children that are the same field, and so on depth times: a few hundred bytes that
// name 2^depth fields.
func sharedFields(depth int) []byte {
	b := flatbuffers.NewBuilder(1024)
	b.StartObject(7)
	f := b.EndObject()
	for range depth {
		b.StartVector(4, 2, 4)
		b.PrependUOffsetT(f)
		b.PrependUOffsetT(f)
		children := b.EndVector(2)
		b.StartObject(7)
		b.PrependUOffsetTSlot(5, children, 0)
		f = b.EndObject()
	}
	b.StartVector(4, 1, 4)
	b.PrependUOffsetT(f)
	fields := b.EndVector(1)
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, fields, 0)
	return finishMessage(b, 1, b.EndObject(), 0)
}

// nestedSchema is a schema message of a struct field nested depth deep.
func nestedSchema(t testing.TB, depth int) []byte {
	t.Helper()
	typ := arrow.PrimitiveTypes.Int32
	for range depth {
		typ = arrow.StructOf(arrow.Field{Name: "s", Type: typ, Nullable: true})
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(arrow.NewSchema([]arrow.Field{{Name: "top", Type: typ, Nullable: true}}, nil)))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes() // the continuation marker, the length, the schema
	return data[8 : 8+binary.LittleEndian.Uint32(data[4:])]
}

// TestCheckMessageAccepts: every message arrow-go writes passes, and hand-built ones with the
// parts it never writes.
func TestCheckMessageAccepts(t *testing.T) {
	msgs := splitStream(t, richData(t, false))
	if len(msgs) != 3 {
		t.Fatalf("the stream has %d messages; want schema, dictionary, batch", len(msgs))
	}
	for i, m := range msgs {
		body, err := ipcguard.CheckMessage(m.meta)
		if err != nil || body != int64(len(m.body)) {
			t.Errorf("CheckMessage(message %d) = %d, %v; want %d, nil", i, body, err, len(m.body))
		}
	}
	for name, b := range map[string][]byte{
		"hand-built schema":         handSchema(),
		"fields nested 64 deep":     nestedSchema(t, ipcguard.MaxDepth),
		"a field shared four times": sharedFields(2),
	} {
		if _, err := ipcguard.CheckMessage(b); err != nil {
			t.Errorf("CheckMessage(%s) = %v; want nil", name, err)
		}
	}
}

// TestCheckMessageRefusesLyingCounts makes each vector the check knows claim a billion entries, in
// the messages of a valid stream: every one is refused before arrow-go would size a slice by it.
func TestCheckMessageRefusesLyingCounts(t *testing.T) {
	msgs := splitStream(t, richData(t, false))
	schema, dict, batch := msgs[0].meta, msgs[1].meta, msgs[2].meta
	tests := []struct {
		name string
		msg  []byte
		path []string
	}{
		{"message custom_metadata", handSchema(), []string{"4"}},
		{"message custom_metadata key", handSchema(), []string{"4[0]", "0"}},
		{"schema features", handSchema(), []string{"2", "3"}},
		{"schema fields", schema, []string{"2", "1"}},
		{"schema custom_metadata", schema, []string{"2", "2"}},
		{"schema custom_metadata value", schema, []string{"2", "2[0]", "1"}},
		{"field name", schema, []string{"2", "1[0]", "0"}},
		{"field custom_metadata", schema, []string{"2", "1[0]", "6"}},
		{"field children", schema, []string{"2", "1[1]", "5"}},
		{"grandchild field name", schema, []string{"2", "1[1]", "5[0]", "5[0]", "0"}},
		{"union type ids", schema, []string{"2", "1[2]", "3", "1"}},
		{"timestamp time zone", schema, []string{"2", "1[3]", "3", "1"}},
		{"record batch nodes", batch, []string{"2", "1"}},
		{"record batch buffers", batch, []string{"2", "2"}},
		{"record batch variadic buffer counts", batch, []string{"2", "4"}},
		{"dictionary batch nodes", dict, []string{"2", "1", "1"}},
		{"dictionary batch buffers", dict, []string{"2", "1", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := bytes.Clone(tt.msg)
			at, err := ipcguard.VectorLenAt(msg, tt.path...)
			if err != nil {
				t.Fatalf("VectorLenAt(%v): %v", tt.path, err)
			}
			binary.LittleEndian.PutUint32(msg[at:], 1<<30)
			if _, err := ipcguard.CheckMessage(msg); !errors.Is(err, ipcguard.ErrMalformed) {
				t.Errorf("CheckMessage(%s claiming 2^30) = %v; want ErrMalformed", tt.name, err)
			}
		})
	}
}

// TestCheckMessageRefuses: counts that fit the bytes but would still make arrow-go allocate or
// recurse without bound, and garbage.
func TestCheckMessageRefuses(t *testing.T) {
	batch := splitStream(t, richData(t, false))[2].meta
	variadic := bytes.Clone(batch)
	at, err := ipcguard.VectorLenAt(variadic, "2", "4")
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(variadic[at+4:], 1<<40)
	tests := []struct {
		name string
		msg  []byte
		want string
	}{
		{"a variadic buffer count of 2^40", variadic, "variadic buffers"},
		{"fields nested 65 deep", nestedSchema(t, ipcguard.MaxDepth+1), "deep"},
		{"a field shared 2^40 times", sharedFields(40), "more schema fields"},
		{"empty", nil, "too short"},
		{"seven bytes", []byte{8, 0, 0, 0, 0, 0, 0}, "too short"},
		{"root outside", []byte{0xff, 0xff, 0, 0, 0, 0, 0, 0}, "outside"},
		{"vtable outside", []byte{4, 0, 0, 0, 0x80, 0, 0, 0}, "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ipcguard.CheckMessage(tt.msg)
			if !errors.Is(err, ipcguard.ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckMessage(%s) = %v; want ErrMalformed saying %q", tt.name, err, tt.want)
			}
		})
	}
}

// TestCheckMessageRegression: the schema the sink's FuzzDecoder found, which claimed billions of
// fields and made arrow-go allocate without bound, is refused (its seed is this package's too).
func TestCheckMessageRegression(t *testing.T) {
	data, err := os.ReadFile("testdata/fuzz/FuzzCheckMessage/billion-fields")
	if err != nil {
		t.Fatal(err)
	}
	_, arg, ok := strings.Cut(strings.TrimSpace(string(data)), "\n")
	if !ok || !strings.HasPrefix(arg, "[]byte(") {
		t.Fatalf("the seed is not one []byte: %q", data)
	}
	msg, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(arg, "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ipcguard.CheckMessage([]byte(msg)); !errors.Is(err, ipcguard.ErrMalformed) {
		t.Errorf("CheckMessage(the fuzzer's billion-field schema) = %v; want ErrMalformed", err)
	}
}

func TestCheckStream(t *testing.T) {
	data := richData(t, false)
	if err := ipcguard.CheckStream(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Errorf("CheckStream(a valid stream) = %v", err)
	}
	// A stream cut short is arrow-go's to report.
	if err := ipcguard.CheckStream(bytes.NewReader(data[:len(data)/2]), int64(len(data)/2)); err != nil {
		t.Errorf("CheckStream(a truncated stream) = %v; want nil", err)
	}
	bad := bytes.Clone(data)
	msgs := splitStream(t, bad)
	at, err := ipcguard.VectorLenAt(msgs[2].meta, "2", "1") // aliases bad
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(msgs[2].meta[at:], 1<<30)
	if err := ipcguard.CheckStream(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ipcguard.ErrMalformed) || !strings.Contains(err.Error(), "message 2") {
		t.Errorf("CheckStream(a lying batch) = %v; want ErrMalformed naming message 2", err)
	}
}

func TestCheckFile(t *testing.T) {
	data := richData(t, true)
	r := bytes.NewReader(data)
	rows, err := ipcguard.CheckFile(r, int64(len(data)), 0, -1)
	if err != nil || len(rows) != 1 || rows[0] != 2 {
		t.Errorf("CheckFile(a valid file) = %v, %v; want [2], nil", rows, err)
	}
	if rows, err := ipcguard.CheckFile(r, int64(len(data)), 1, 1); err != nil || len(rows) != 0 {
		t.Errorf("CheckFile(no batches) = %v, %v; want [], nil", rows, err)
	}
	if rows, err := ipcguard.CheckFile(r, 12, 0, -1); err != nil || rows != nil {
		t.Errorf("CheckFile(too short for a footer) = %v, %v; want nil, nil", rows, err)
	}
	// The schema in the footer claims a billion fields.
	bad := bytes.Clone(data)
	flen := int(binary.LittleEndian.Uint32(bad[len(bad)-10:]))
	footer := bad[len(bad)-10-flen : len(bad)-10]
	at, err := ipcguard.VectorLenAt(footer, "1", "1")
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(footer[at:], 1<<30)
	if _, err := ipcguard.CheckFile(bytes.NewReader(bad), int64(len(bad)), 0, -1); !errors.Is(err, ipcguard.ErrMalformed) || !strings.Contains(err.Error(), "footer") {
		t.Errorf("CheckFile(a lying footer) = %v; want ErrMalformed naming the footer", err)
	}
}

// TestReaderRefusesCorruptVariadicCount is the readers' end of the check: a string_view batch
// claiming 2^40 variadic buffers (arrow-go would size a slice by it, a fatal out-of-memory) fails
// with ErrCorrupt, having allocated little.
func TestReaderRefusesCorruptVariadicCount(t *testing.T) {
	data := richData(t, false)
	batch := splitStream(t, data)[2].meta // aliases data
	at, err := ipcguard.VectorLenAt(batch, "2", "4")
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(batch[at+4:], 1<<40)
	path := filepath.Join(t.TempDir(), "bad.arrows")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem))
	if err == nil {
		err = src.ReadUnit(context.Background(), 0, func(arrow.RecordBatch) error { return nil })
		src.Close()
	}
	runtime.ReadMemStats(&after)
	if !errors.Is(err, readers.ErrCorrupt) || !errors.Is(err, ipcguard.ErrMalformed) {
		t.Errorf("read = %v; want ErrCorrupt wrapping ErrMalformed", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("allocated %d bytes", n)
	}
}

// FuzzCheckMessage: no flatbuffer makes the check panic or run long. Seeds: the messages of a
// stream arrow-go writes, hand-built ones and the regression cases in testdata.
func FuzzCheckMessage(f *testing.F) {
	for _, m := range splitStream(f, richData(f, false)) {
		f.Add(m.meta)
	}
	f.Add(handSchema())
	f.Add(sharedFields(8))
	f.Fuzz(func(t *testing.T, msg []byte) {
		body, err := ipcguard.CheckMessage(msg)
		if err != nil && !errors.Is(err, ipcguard.ErrMalformed) {
			t.Fatalf("CheckMessage = %d, %v; want an error wrapping ErrMalformed", body, err)
		}
	})
}

// countingReaderAt counts the reads made through it.
type countingReaderAt struct {
	r     *bytes.Reader
	reads int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

// intStream is an IPC stream of batches batches of rows rows, each of cols int64 columns.
func intStream(t *testing.T, cols, batches, rows int) []byte {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fields := make([]arrow.Field, cols)
	for i := range fields {
		fields[i] = arrow.Field{Name: "c" + strconv.Itoa(i), Type: arrow.PrimitiveTypes.Int64}
	}
	schema := arrow.NewSchema(fields, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for range batches {
		for _, f := range b.Fields() {
			for r := range rows {
				f.(*array.Int64Builder).Append(int64(r))
			}
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// CheckStream reads ahead: many short messages cost a read or two in all, not two each; metadata
// larger than what it reads ahead is read whole; and a lying batch is found wherever it falls.
func TestCheckStreamReadsAhead(t *testing.T) {
	for _, c := range []struct {
		name                string
		cols, batches, rows int
		maxReads            int
	}{
		{"many short messages", 1, 200, 1, 4},
		{"metadata larger than a read ahead", 1500, 4, 2, 2*(1+4) + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := intStream(t, c.cols, c.batches, c.rows)
			r := &countingReaderAt{r: bytes.NewReader(data)}
			if err := ipcguard.CheckStream(r, int64(len(data))); err != nil {
				t.Fatalf("CheckStream(a valid stream) = %v", err)
			}
			if r.reads > c.maxReads {
				t.Errorf("%d reads to check %d messages; want at most %d", r.reads, 1+c.batches, c.maxReads)
			}
			for _, k := range []int{1, c.batches / 2, c.batches} {
				bad := bytes.Clone(data)
				msgs := splitStream(t, bad)
				at, err := ipcguard.VectorLenAt(msgs[k].meta, "2", "1") // aliases bad
				if err != nil {
					t.Fatal(err)
				}
				binary.LittleEndian.PutUint32(msgs[k].meta[at:], 1<<30)
				err = ipcguard.CheckStream(&countingReaderAt{r: bytes.NewReader(bad)}, int64(len(bad)))
				if want := "message " + strconv.Itoa(k) + ":"; !errors.Is(err, ipcguard.ErrMalformed) || !strings.Contains(err.Error(), want) {
					t.Errorf("CheckStream(a stream lying in message %d) = %v; want ErrMalformed naming it", k, err)
				}
			}
		})
	}
}
