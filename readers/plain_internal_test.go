package readers

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/tableschema"
)

// TestPlainArraySlices decodes arrays arrow-go's IPC writer cannot write (a run-end encoded list
// element), and slices of every kind, which is how batches are decoded: each slice must decode to
// exactly its own rows.
func TestPlainArraySlices(t *testing.T) {
	tests := []struct {
		name string
		dt   arrow.DataType
		json string
	}{
		{"run-end encoded", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64), `[1, 1, 1, null, 2, 2, 3]`},
		{"run-end encoded strings", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String), `["a", "a", null, null, "b", "c", "c"]`},
		{"list of run-end encoded", arrow.ListOf(arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32)), ``}, // by hand
		{"run-end encoded list views", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.ListViewOf(arrow.BinaryTypes.StringView)),
			`[["a", "a string longer than twelve bytes"], ["a", "a string longer than twelve bytes"], null, [], [null], ["b"], ["b"]]`},
		{"large list view of structs", arrow.LargeListViewOf(arrow.StructOf(arrow.Field{Name: "x", Type: arrow.BinaryTypes.BinaryView, Nullable: true})),
			`[[{"x": "AA=="}], null, [{"x": null}, null], [], [{"x": "/w=="}], null, [{"x": ""}]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			var a arrow.Array
			if tt.json == "" {
				a = listOfRunEnds(t, mem)
			} else {
				var err error
				if a, _, err = array.FromJSON(mem, tt.dt, strings.NewReader(tt.json)); err != nil {
					t.Fatalf("FromJSON: %v", err)
				}
			}
			defer a.Release()
			out, changed := plainType(tt.dt)
			if !changed {
				t.Fatalf("plainType(%s) unchanged", tt.dt)
			}
			ct, err := tableschema.TypeFromArrow("c", tt.dt)
			if err != nil {
				t.Fatal(err)
			}
			ctx := compute.WithAllocator(context.Background(), mem)
			for _, r := range [][2]int{{0, 7}, {0, 2}, {1, 4}, {2, 3}, {3, 7}, {6, 7}, {4, 4}} {
				s := array.NewSlice(a, int64(r[0]), int64(r[1]))
				got, err := plainArray(ctx, s, out)
				if err != nil {
					s.Release()
					t.Fatalf("plainArray(rows %d-%d) = %v", r[0], r[1], err)
				}
				if !arrow.TypeEqual(got.DataType(), out) || got.Len() != s.Len() {
					t.Errorf("plainArray(rows %d-%d) = %s of %d rows; want %s of %d", r[0], r[1], got.DataType(), got.Len(), out, s.Len())
				}
				for i := 0; i < min(got.Len(), s.Len()); i++ {
					if g, w := fixture.Value(got, i), fixture.Canonical(s, i, ct); !fixtureEqual(g, w) {
						t.Errorf("rows %d-%d: row %d = %#v; want %#v", r[0], r[1], i, g, w)
					}
				}
				got.Release()
				s.Release()
			}
		})
	}
}

// listOfRunEnds builds list<run-end encoded<int16, int32>> rows [1 1 2], null, [], [null null], [3],
// [4 4], [5]. (arrow-go v18.8.0's run-end encoded builder makes invalid arrays inside a list builder.)
func listOfRunEnds(t *testing.T, mem memory.Allocator) arrow.Array {
	t.Helper()
	dt := arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32)
	child, _, err := array.FromJSON(mem, dt, strings.NewReader(`[1, 1, 2, null, null, 3, 4, 4, 5]`))
	if err != nil {
		t.Fatal(err)
	}
	defer child.Release()
	offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 3, 3, 3, 5, 6, 8, 9}))
	valid := memory.NewBufferBytes([]byte{0b1111101})
	d := array.NewData(arrow.ListOf(dt), 7, []*memory.Buffer{valid, offsets}, []arrow.ArrayData{child.Data()}, 1, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func fixtureEqual(a, b any) bool {
	return len(fixture.DiffRows([]fixture.Row{{"c": a}}, []fixture.Row{{"c": b}}, 1)) == 0
}
