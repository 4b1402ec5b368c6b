package arrowcheck

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestValidateColumnMatchesArrow: on string columns, top-level and nested in lists, maps and
// structs, corrupted in every way a frame can corrupt them (any byte of any buffer: values,
// offsets, validity bitmaps; null counts; windows of the array), the fast check gives the same
// verdict as array.ValidateFull.
func TestValidateColumnMatchesArrow(t *testing.T) {
	words := []string{"", "a", "héllo", "日本語", "🙂x", "plain ascii text", "ß",
		"a longer plain value, past the 32 bytes checked at a time", "and one that ends in 32 bytes: é"}
	types := []arrow.DataType{
		arrow.BinaryTypes.String,
		arrow.BinaryTypes.LargeString,
		arrow.ListOf(arrow.BinaryTypes.LargeString),
		arrow.LargeListOf(arrow.BinaryTypes.String),
		arrow.StructOf(arrow.Field{Name: "os", Type: arrow.BinaryTypes.LargeString, Nullable: true},
			arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int32, Nullable: true}),
		arrow.MapOf(arrow.BinaryTypes.LargeString, arrow.BinaryTypes.LargeString),
		arrow.ListOf(arrow.StructOf(arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true})),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range types {
		var valid, invalid int
		for iter := range 2000 {
			n := 1 + rng.IntN(10)
			data := randomColumn(t, rng, dt, n, words)
			if iter%4 != 0 { // keep a quarter intact
				corruptTree(rng, data)
			}
			if rng.IntN(3) == 0 && n > 2 { // a window of the array
				off := rng.IntN(n / 2)
				sub := array.NewSliceData(data, int64(off), int64(off+1+rng.IntN(n-off-1)))
				data.Release()
				data = sub.(*array.Data)
			}
			var arr arrow.Array
			if safeValidate(func() error { arr = array.MakeFromData(data); return nil }) != nil {
				data.Release() // arrow refuses to make the array at all: the decoder fails before validating
				continue
			}
			want := safeValidate(func() error { return array.ValidateFull(arr) })
			got := safeValidate(func() error { return Full(arr) })
			if (want == nil) != (got == nil) {
				t.Fatalf("%s iter %d: Full = %v; array.ValidateFull = %v", dt, iter, got, want)
			}
			if want == nil {
				valid++
			} else {
				invalid++
			}
			arr.Release()
			data.Release()
		}
		if valid < 300 || invalid < 300 {
			t.Errorf("%s: only %d valid and %d invalid cases: the corruptions do not cover both verdicts", dt, valid, invalid)
		}
	}
}

func safeValidate(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

// randomColumn builds n random values of dt and returns a deep copy of the array's data, whose
// buffers the test may corrupt.
func randomColumn(t *testing.T, rng *rand.Rand, dt arrow.DataType, n int, words []string) *array.Data {
	t.Helper()
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	for range n {
		appendRandom(rng, b, words)
	}
	arr := b.NewArray()
	defer arr.Release()
	return deepCopy(arr.Data().(*array.Data))
}

func appendRandom(rng *rand.Rand, b array.Builder, words []string) {
	if rng.IntN(5) == 0 {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(words[rng.IntN(len(words))])
	case *array.LargeStringBuilder:
		b.Append(words[rng.IntN(len(words))])
	case *array.Int32Builder:
		b.Append(rng.Int32())
	case *array.MapBuilder:
		b.Append(true)
		for range rng.IntN(3) {
			b.KeyBuilder().(*array.LargeStringBuilder).Append(words[rng.IntN(len(words))])
			appendRandom(rng, b.ItemBuilder(), words)
		}
	case *array.ListBuilder:
		b.Append(true)
		for range rng.IntN(4) {
			appendRandom(rng, b.ValueBuilder(), words)
		}
	case *array.LargeListBuilder:
		b.Append(true)
		for range rng.IntN(4) {
			appendRandom(rng, b.ValueBuilder(), words)
		}
	case *array.StructBuilder:
		b.Append(true)
		for i := range b.NumField() {
			appendRandom(rng, b.FieldBuilder(i), words)
		}
	default:
		panic("unexpected builder")
	}
}

func deepCopy(d *array.Data) *array.Data {
	bufs := make([]*memory.Buffer, len(d.Buffers()))
	for i, buf := range d.Buffers() {
		if buf != nil {
			bufs[i] = memory.NewBufferBytes(append([]byte(nil), buf.Bytes()...))
		}
	}
	var children []arrow.ArrayData
	for _, c := range d.Children() {
		cc := deepCopy(c.(*array.Data))
		children = append(children, cc)
		defer cc.Release()
	}
	return array.NewData(d.DataType(), d.Len(), bufs, children, d.NullN(), d.Offset())
}

// nodes lists d and its descendants.
func nodes(d *array.Data) []*array.Data {
	out := []*array.Data{d}
	for _, c := range d.Children() {
		out = append(out, nodes(c.(*array.Data))...)
	}
	return out
}

// corruptTree changes one thing somewhere in the tree: a byte of a buffer, or a null count.
func corruptTree(rng *rand.Rand, root *array.Data) {
	all := nodes(root)
	d := all[rng.IntN(len(all))]
	if rng.IntN(6) == 0 {
		d.SetNullN(d.NullN() + 1)
		return
	}
	var bufs []*memory.Buffer
	for _, b := range d.Buffers() {
		if b != nil && b.Len() > 0 {
			bufs = append(bufs, b)
		}
	}
	if len(bufs) == 0 {
		d.SetNullN(d.NullN() + 1)
		return
	}
	b := bufs[rng.IntN(len(bufs))].Bytes()
	i := rng.IntN(len(b))
	switch rng.IntN(3) {
	case 0:
		b[i] = []byte{0x80, 0xC3, 0xE6, 0xF0, 0xFF, 'z'}[rng.IntN(6)]
	case 1:
		b[i] ^= 1 << rng.IntN(8)
	default:
		b[i] += byte(rng.IntN(5)) - 2
	}
}

// TestASCII checks ascii against a byte loop for every length up to 100 and every position of one
// byte at or above 0x80.
func TestASCII(t *testing.T) {
	naive := func(b []byte) bool {
		for _, c := range b {
			if c >= 0x80 {
				return false
			}
		}
		return true
	}
	for n := range 101 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		if !ascii(b) {
			t.Fatalf("ascii(%d ASCII bytes) = false", n)
		}
		for i := range n {
			for _, c := range []byte{0x80, 0xC3, 0xFF} {
				b[i] = c
				if got, want := ascii(b), naive(b); got != want {
					t.Fatalf("ascii(%d bytes, %#x at %d) = %v; want %v", n, c, i, got, want)
				}
				b[i] = 'x'
			}
		}
	}
}

// BenchmarkFullStrings checks a column of 65,536 strings of 36 ASCII characters, as event ids.
func BenchmarkFullStrings(b *testing.B) {
	bld := array.NewLargeStringBuilder(memory.DefaultAllocator)
	for i := range 65536 {
		bld.Append(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919))
	}
	arr := bld.NewArray()
	bld.Release()
	defer arr.Release()
	b.SetBytes(int64(len(arr.(*array.LargeString).ValueBytes())))
	for b.Loop() {
		if err := Full(arr); err != nil {
			b.Fatal(err)
		}
	}
}
