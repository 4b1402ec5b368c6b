package readers

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCorruptVariadicCount patches a string_view batch to claim 2^40 variadic buffers: arrow-go
// would size a slice by it (a fatal out-of-memory); the message check refuses it first.
func TestCorruptVariadicCount(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.StringView, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), s)
	b.Field(0).(*array.StringViewBuilder).Append(strings.Repeat("long enough to need a data buffer ", 3))
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	data := buf.Bytes()

	// walk to the record batch message and patch its first variadic count
	patched := false
	for pos := 0; pos+8 <= len(data) && !patched; {
		l := int(binary.LittleEndian.Uint32(data[pos+4:]))
		if l == 0 {
			break
		}
		meta := data[pos+8 : pos+8+l]
		f := &fbuf{b: meta}
		root, _ := f.u32(0)
		msg, err := f.table(root)
		if err != nil {
			t.Fatal(err)
		}
		ht, _ := msg.u8(1)
		body, _ := msg.i64(3)
		if ht == 3 {
			h, _, _ := msg.child(2)
			start, n, err := h.vector(4, 8)
			if err != nil || n == 0 {
				t.Fatalf("no variadic counts in the batch (%v)", err)
			}
			binary.LittleEndian.PutUint64(meta[start:], 1<<40)
			patched = true
		}
		pos += 8 + l + int(body)
	}
	if !patched {
		t.Fatal("no record batch message found")
	}
	path := filepath.Join(t.TempDir(), "bad.arrows")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src, err := Open(context.Background(), File{Path: path})
	if err == nil {
		err = src.ReadUnit(context.Background(), 0, func(arrow.RecordBatch) error { return nil })
		src.Close()
	}
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "variadic buffers") {
		t.Errorf("read = %v; want ErrCorrupt about the variadic count", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("allocated %d bytes", n)
	}
}
