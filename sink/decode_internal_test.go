package sink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/internal/ipcguard"
	"github.com/loaderproject/loader/internal/memlimit"
)

// corpusStreamDir is where the corpus keeps IPC streams.
const corpusStreamDir = "arrow-testing/data/arrow-ipc-stream"

// splitIPC cuts an IPC stream into its messages' (metadata, body) pairs, as a Flight client would
// put them in FlightData.data_header and data_body. It stops at the end-of-stream marker or at the
// first framing it cannot follow.
func splitIPC(data []byte) (msgs [][2][]byte) {
	for len(data) >= 4 {
		n := binary.LittleEndian.Uint32(data)
		data = data[4:]
		if n == 0xFFFFFFFF {
			if len(data) < 4 {
				return msgs
			}
			n = binary.LittleEndian.Uint32(data)
			data = data[4:]
		}
		if n == 0 || int(n) > len(data) {
			return msgs
		}
		meta := data[:n]
		data = data[n:]
		_, _, bodyLen, err := parseMessage(meta, nil)
		if err != nil || bodyLen < 0 || bodyLen > int64(len(data)) {
			msgs = append(msgs, [2][]byte{meta, nil})
			return msgs
		}
		msgs = append(msgs, [2][]byte{meta, data[:bodyLen]})
		data = data[bodyLen:]
	}
	return msgs
}

// corpusStreams returns the IPC stream files of the shared corpus (valid and fuzzer-found), or
// skips when the corpus is absent.
func corpusStreams(tb testing.TB) []string {
	tb.Helper()
	return streamsIn(tb, corpus.Dir(tb, corpusStreamDir))
}

// streamsIn returns the IPC stream files below dir.
func streamsIn(tb testing.TB, dir string) []string {
	tb.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".md") {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Size() <= 10<<20 {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// decodeAll runs a stream's messages through the frame decoder as a DoPut would: the first as the
// schema frame, the rest as data frames.
func decodeAll(mem memory.Allocator, msgs [][2][]byte) (ok, failed int) {
	if len(msgs) == 0 {
		return 0, 0
	}
	d, err := newDecoder(msgs[0][0], newLimitedAllocator(mem, maxDecodedFrameBytes))
	if err != nil {
		return 0, 1
	}
	defer d.release()
	for _, m := range msgs[1:] {
		rec, err := d.decode(m[0], m[1])
		if err != nil {
			failed++
			return ok, failed // a DoPut ends at its first bad frame
		}
		rec.Release()
		ok++
	}
	return ok, failed
}

// TestDecoderCorpus feeds every IPC stream of the corpus, fuzzer crash cases included, through the
// frame decoder: each frame decodes to a consistent batch or to an error, never a panic.
func TestDecoderCorpus(t *testing.T) {
	files := corpusStreams(t)
	var ok, failed int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, e := decodeAll(memory.DefaultAllocator, splitIPC(data))
		ok, failed = ok+o, failed+e
	}
	if ok == 0 {
		t.Errorf("no frame of %d corpus streams decoded; the splitter is broken", len(files))
	}
	t.Logf("%d streams: %d frames decoded, %d refused", len(files), ok, failed)
}

// TestDecoderReleasesMemory: decoding compressed frames allocates, and every byte comes back.
func TestDecoderReleasesMemory(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range 1000 {
		b.Field(0).(*array.LargeStringBuilder).Append(strings.Repeat("x", i%50))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	for _, opt := range []ipc.Option{ipc.WithLZ4(), ipc.WithZstd()} {
		schemaFrame, data := encodeFrames(t, schema, rec, opt)
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		if ok, failed := decodeAll(mem, [][2][]byte{{schemaFrame.DataHeader, nil}, {data.DataHeader, data.DataBody}}); ok != 1 || failed != 0 {
			t.Fatalf("decode = %d ok, %d failed", ok, failed)
		}
		mem.AssertSize(t, 0)
	}
}

// TestDecoderMemoryLimit: a compressed buffer claiming a huge decompressed size is refused, not
// allocated.
func TestDecoderMemoryLimit(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range 1000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	schemaFrame, data := encodeFrames(t, schema, rec, ipc.WithZstd())
	body := bytes.Clone(data.DataBody)
	// Each compressed buffer starts with its int64 decompressed length; claim 64 GiB for all.
	for off := 0; off+8 <= len(body); off += 8 {
		if v := binary.LittleEndian.Uint64(body[off:]); v == 8000 {
			binary.LittleEndian.PutUint64(body[off:], 64<<30)
		}
	}
	d, err := newDecoder(schemaFrame.DataHeader, newLimitedAllocator(memory.DefaultAllocator, maxDecodedFrameBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer d.release()
	var lim *memlimit.Error
	if _, err := d.decode(data.DataHeader, body); !errors.As(err, &lim) || lim.Limit != maxDecodedFrameBytes || lim.Mode != memlimit.Live {
		t.Errorf("decode(64 GiB claim) = %v; want the %d-byte memlimit.Error", err, maxDecodedFrameBytes)
	}
}

type frameCapture struct{ msgs []*flight.FlightData }

func (c *frameCapture) Send(fd *flight.FlightData) error {
	c.msgs = append(c.msgs, &flight.FlightData{DataHeader: bytes.Clone(fd.DataHeader), DataBody: bytes.Clone(fd.DataBody)})
	return nil
}

// encodeFrames returns the schema frame and the data frame arrow-go's Flight writer makes of rec.
func encodeFrames(tb testing.TB, schema *arrow.Schema, rec arrow.RecordBatch, opts ...ipc.Option) (schemaFrame, data *flight.FlightData) {
	tb.Helper()
	var c frameCapture
	w := flight.NewRecordWriter(&c, append(opts, ipc.WithSchema(schema))...)
	if err := w.Write(rec); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return c.msgs[0], c.msgs[1]
}

// FuzzDecoder mutates a schema frame and a data frame; decoding must end in a batch or an error.
// Seeds: frames arrow-go encodes (plain, LZ4, ZSTD) and the corpus streams.
func FuzzDecoder(f *testing.F) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema,
		strings.NewReader(`[{"id":1,"s":"a","l":[1,null]},{"id":2,"s":null,"l":null}]`))
	if err != nil {
		f.Fatal(err)
	}
	for _, opts := range [][]ipc.Option{nil, {ipc.WithLZ4()}, {ipc.WithZstd()}} {
		schemaFrame, data := encodeFrames(f, schema, rec, opts...)
		f.Add(schemaFrame.DataHeader, data.DataHeader, data.DataBody)
	}
	rec.Release()
	// The corpus streams as seeds when the corpus is there (corpus.Dir would skip the whole target).
	root := os.Getenv(corpus.EnvRoot)
	if root == "" {
		root = filepath.Join("..", "..", "shared", "corpus")
	}
	var files []string
	if dir := filepath.Join(root, filepath.FromSlash(corpusStreamDir)); dirExists(dir) {
		files = streamsIn(f, dir)
	}
	for _, p := range files {
		data, _ := os.ReadFile(p)
		if msgs := splitIPC(data); len(msgs) >= 2 {
			f.Add(msgs[0][0], msgs[1][0], msgs[1][1])
		}
	}
	f.Fuzz(func(t *testing.T, schemaHeader, header, body []byte) {
		decodeAll(memory.DefaultAllocator, [][2][]byte{{schemaHeader, nil}, {header, body}})
	})
}

// TestCheckMessageRegression: the fuzzer's schema that claimed billions of fields is refused by
// the pre-check (internal/ipcguard, which tests it in depth), on every path that decodes client
// IPC: DoPut frames and Flight SQL.
func TestCheckMessageRegression(t *testing.T) {
	data, err := os.ReadFile("testdata/fuzz/FuzzDecoder/cf53d021f1340d99")
	if err != nil {
		t.Fatal(err)
	}
	// The corpus file holds the fuzz arguments as Go literals: the first is the schema header.
	lines := strings.Split(string(data), "\n")
	var schemaHeader []byte
	for _, l := range lines {
		if strings.HasPrefix(l, "[]byte(") {
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(l, "[]byte("), ")"))
			if err != nil {
				t.Fatal(err)
			}
			schemaHeader = []byte(s)
			break
		}
	}
	if _, err := newDecoder(schemaHeader, memory.DefaultAllocator); !errors.Is(err, ipcguard.ErrMalformed) {
		t.Errorf("newDecoder(the schema that made arrow-go allocate without bound) = %v; want ipcguard.ErrMalformed", err)
	}
	rs := &replayStream{first: &flight.FlightData{DataHeader: schemaHeader}}
	if _, err := rs.Recv(); err == nil || !strings.Contains(err.Error(), "not a valid IPC message") {
		t.Errorf("Flight SQL screen = %v; want it refused", err)
	}
}

func dirExists(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}
