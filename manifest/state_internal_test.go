package manifest

import (
	"slices"
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		rs   []Range
		r    Range
		want []Range
	}{
		{"none", nil, Range{0, 10}, nil},
		{"all", []Range{{0, 10}}, Range{0, 10}, nil},
		{"more than all", []Range{{5, 10}}, Range{0, 20}, nil},
		{"before", []Range{{10, 20}}, Range{0, 10}, []Range{{10, 20}}},
		{"after", []Range{{10, 20}}, Range{20, 30}, []Range{{10, 20}}},
		{"head", []Range{{10, 20}}, Range{5, 15}, []Range{{15, 20}}},
		{"tail", []Range{{10, 20}}, Range{15, 25}, []Range{{10, 15}}},
		{"middle", []Range{{10, 20}}, Range{12, 18}, []Range{{10, 12}, {18, 20}}},
		{"across", []Range{{0, 10}, {20, 30}, {40, 50}}, Range{5, 45}, []Range{{0, 5}, {45, 50}}},
		{"one of many", []Range{{0, 10}, {20, 30}, {40, 50}}, Range{20, 30}, []Range{{0, 10}, {40, 50}}},
		{"in a gap", []Range{{0, 10}, {20, 30}}, Range{10, 20}, []Range{{0, 10}, {20, 30}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cut(slices.Clone(tt.rs), tt.r); !slices.Equal(got, tt.want) || got == nil != (tt.want == nil) {
				t.Errorf("cut(%v, %v) = %#v; want %#v", tt.rs, tt.r, got, tt.want)
			}
		})
	}
}

// TestUnitRangesLetGo: a unit keeps its ranges only while they are not those of a finished unit.
func TestUnitRangesLetGo(t *testing.T) {
	tests := []struct {
		name  string
		steps func(u *unitState)
		kept  bool
	}{
		{"new", func(*unitState) {}, false},
		{"sent", func(u *unitState) { u.sent(Range{0, 10}) }, true},
		{"rows known, nothing acked", func(u *unitState) { u.setRows(10) }, true},
		{"acked, rows unknown", func(u *unitState) { u.ack(Range{0, 10}) }, true},
		{"empty unit", func(u *unitState) { u.setRows(0) }, false},
		{"sent, rows, acked", func(u *unitState) { u.sent(Range{0, 10}); u.setRows(10); u.ack(Range{0, 10}) }, false},
		{"acked in two, then rows", func(u *unitState) { u.ack(Range{5, 10}); u.ack(Range{0, 5}); u.setRows(10) }, false},
		{"part acked", func(u *unitState) { u.setRows(10); u.ack(Range{0, 5}) }, true},
		{"sent past the rows", func(u *unitState) { u.sent(Range{0, 20}); u.setRows(10); u.ack(Range{0, 10}) }, true},
		{"finished, then duplicated", func(u *unitState) { u.setRows(10); u.ack(Range{0, 10}); u.duplicated(Range{0, 5}) }, true},
		{"finished, then sent again", func(u *unitState) { u.setRows(10); u.ack(Range{0, 10}); u.sent(Range{0, 10}) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unitState{rows: -1}
			tt.steps(u)
			if kept := u.r != nil; kept != tt.kept {
				t.Errorf("ranges kept = %t; want %t (rows %d, %+v)", kept, tt.kept, u.rows, u.r)
			}
		})
	}
}

// TestFileIndex: a FileID comes back whole from its key, and FileIDs that differ in any field, even
// where their fields joined would read the same, are different files.
func TestFileIndex(t *testing.T) {
	long := strings.Repeat("é/", 200)
	ids := []FileID{
		{},
		{Path: "data/a.parquet", Size: 1000, ModTimeNano: 1_700_000_000_000_000_000, Schema: "s1"},
		{Path: "data/a.parquet", Size: 1000, ModTimeNano: 1_700_000_000_000_000_000, Schema: "s1", Layout: "9f2c4be01d7a3e55"},
		{Path: "data/a.parquet", Size: 1001, ModTimeNano: 1_700_000_000_000_000_000, Schema: "s1"},
		{Path: "data/a.parquet", Size: 1000, ModTimeNano: 1_700_000_000_000_000_001, Schema: "s1"},
		{Path: "data/a.parquet", Size: 1000, ModTimeNano: 1_700_000_000_000_000_000, Schema: "s2"},
		{Path: "s3://b/k", Size: 5, ETag: `"d41d8cd98f00b204e9800998ecf8427e"`, Schema: "s1"},
		{Path: "s3://b/k", Size: 5, ETag: `"d41d8cd98f00b204e9800998ecf8427e-2"`, Schema: "s1"},
		{Path: "s3://b/k", Size: 5, ETag: "ab", Schema: "s1"},
		{Path: "s3://b/k", Size: 5, ETag: "a", Layout: "b", Schema: "s1"},
		{Path: "bs3://b/k", Size: 5, ETag: "a", Schema: "s1"},
		{Path: "s3://b/k", Size: -1, ModTimeNano: -1, Schema: ""},
		{Path: long, Size: 1 << 62, ETag: long, Layout: long, Schema: long},
		{Path: "\x00\xff", Schema: "\x00"},
	}
	var ix fileIndex
	for i, id := range ids {
		if ix.get(id) != nil {
			t.Fatalf("get(%+v) before add = a state; want nil (it matched an earlier FileID)", id)
		}
		ix.add(id, &fileState{idx: i})
	}
	if len(ix.byKey) != len(ids) {
		t.Errorf("%d files indexed; want %d", len(ix.byKey), len(ids))
	}
	for i, e := range ix.inOrder() {
		if e.fs.idx != i {
			t.Fatalf("inOrder()[%d] is file %d", i, e.fs.idx)
		}
		if got := ix.id(e.key); got != ids[i] {
			t.Errorf("id(key of %+v) = %+v", ids[i], got)
		}
		if fs := ix.get(ids[i]); fs != e.fs {
			t.Errorf("get(%+v) = %+v; want file %d", ids[i], fs, i)
		}
	}
	if len(ix.schemas) != 5 {
		t.Errorf("%d schemas kept; want 5, each once", len(ix.schemas))
	}
}
