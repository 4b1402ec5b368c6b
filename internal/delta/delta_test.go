package delta_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderproject/loader/internal/delta"
	"github.com/loaderproject/loader/internal/fixture"
)

func TestVersionFileName(t *testing.T) {
	tests := []struct {
		v    int64
		name string
	}{{0, "00000000000000000000.json"}, {42, "00000000000000000042.json"}, {1<<63 - 1, "09223372036854775807.json"}}
	for _, tt := range tests {
		if got := delta.VersionFileName(tt.v); got != tt.name {
			t.Errorf("VersionFileName(%d) = %s; want %s", tt.v, got, tt.name)
		}
	}
}

func TestWriteVersionOnce(t *testing.T) {
	dir := t.TempDir()
	errs := fixture.Concurrently(16, func(i int) error {
		return delta.WriteVersion(dir, 3, []byte(strings.Repeat("x", i+1)))
	})
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Errorf("writers %d and %d both created version 3", won, i)
			}
			won = i
		case !errors.Is(err, delta.ErrVersionExists):
			t.Errorf("WriteVersion: %v", err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, delta.VersionFileName(3)))
	if err != nil || won < 0 || len(data) != won+1 {
		t.Errorf("version 3 holds %d bytes (%v); want the winner's %d", len(data), err, won+1)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("log dir holds %d entries; want only the version (temporary files removed)", len(entries))
	}
}

func TestStateReplay(t *testing.T) {
	dir := t.TempDir()
	commits := []string{
		`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":[],"configuration":{}}}`,
		`{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":3}"}}
{"add":{"path":"b","partitionValues":{},"size":2,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":4}"}}
{"txn":{"appId":"w","version":1}}
{"someFutureAction":{"x":1}}`,
		`{"remove":{"path":"a","dataChange":true}}
{"add":{"path":"c","partitionValues":{},"size":3,"modificationTime":1,"dataChange":true}}
{"add":{"path":"b","partitionValues":{},"size":5,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":6}"}}
{"txn":{"appId":"w","version":2}}`,
	}
	for v, c := range commits {
		if err := delta.WriteVersion(dir, int64(v), []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	s := delta.NewState()
	if n, err := s.Update(dir); err != nil || n != 3 {
		t.Fatalf("Update() = %d, %v; want 3 versions", n, err)
	}
	files := s.Files()
	if len(files) != 2 || files[0].Path != "c" || files[0].NumRecords != -1 || files[1].Path != "b" || files[1].Size != 5 {
		t.Errorf("Files() = %+v; want c (no stats) then b (re-added)", files)
	}
	if s.Version != 2 || s.NumRecords != 6 || s.FilesWithoutStats != 1 || s.Txns["w"] != 2 {
		t.Errorf("state = version %d, %d records, %d without stats, txns %v", s.Version, s.NumRecords, s.FilesWithoutStats, s.Txns)
	}
	// Many removes compact the file list; the index still finds every live file afterwards.
	var adds, removes []delta.Action
	for i := range 200 {
		adds = append(adds, delta.Action{Add: &delta.Add{Path: fmt.Sprintf("f%03d", i), Stats: `{"numRecords":1}`}})
		if i%10 != 0 {
			removes = append(removes, delta.Action{Remove: &delta.Remove{Path: fmt.Sprintf("f%03d", i)}})
		}
	}
	removes = append(removes, delta.Action{Remove: &delta.Remove{Path: "c"}})
	for _, v := range [][]delta.Action{adds, removes, {{Remove: &delta.Remove{Path: "f050"}}}} {
		if err := s.Apply(v); err != nil {
			t.Fatal(err)
		}
	}
	var live []string
	for _, f := range s.Files() {
		live = append(live, f.Path)
	}
	want := []string{"b"}
	for i := 0; i < 200; i += 10 {
		if i != 50 {
			want = append(want, fmt.Sprintf("f%03d", i))
		}
	}
	if !slices.Equal(live, want) || s.NumRecords != 6+19 || s.FilesWithoutStats != 0 || s.Version != 5 {
		t.Errorf("after compaction: files %v, %d records, %d without stats, version %d; want %v, 25, 0, 5",
			live, s.NumRecords, s.FilesWithoutStats, s.Version, want)
	}
	// A first version without protocol and metaData is refused.
	if err := delta.NewState().Apply(nil); !errors.Is(err, delta.ErrCorrupt) {
		t.Errorf("Apply(no protocol) = %v; want ErrCorrupt", err)
	}
}

func TestCheckProtocol(t *testing.T) {
	md := &delta.MetaData{Configuration: map[string]string{}}
	tests := []struct {
		p              delta.Protocol
		read, write    bool
		columnMappings bool
	}{
		{delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, true, true, false},
		{delta.ProtocolFor(true), true, true, false},
		{delta.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, false, false, false},
		{delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, true, false, false},
		{delta.Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, false, false, true},
		{delta.Protocol{MinReaderVersion: 4, MinWriterVersion: 8}, false, false, false},
	}
	for _, tt := range tests {
		m := md
		if tt.columnMappings {
			m = &delta.MetaData{Configuration: map[string]string{"delta.columnMapping.mode": "name"}}
		}
		if err := delta.CheckReadable(&tt.p, m); (err == nil) != tt.read {
			t.Errorf("CheckReadable(%+v) = %v; want readable %t", tt.p, err, tt.read)
		}
		if err := delta.CheckWritable(&tt.p); (err == nil) != tt.write {
			t.Errorf("CheckWritable(%+v) = %v; want writable %t", tt.p, err, tt.write)
		}
	}
}

func TestEncodeParseRoundTrip(t *testing.T) {
	ms := int64(5)
	in := []delta.Action{
		{CommitInfo: &delta.CommitInfo{Timestamp: 1, Operation: "WRITE", OperationParameters: map[string]any{"mode": "Append"}}},
		{Txn: &delta.Txn{AppID: "a<b>&", Version: 3, LastUpdated: &ms}},
		{Add: &delta.Add{Path: "p%20q.parquet", PartitionValues: map[string]string{}, Size: 9, DataChange: true, Stats: `{"numRecords":1}`}},
	}
	data, err := delta.EncodeCommit(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), "\n") != 3 || strings.Contains(string(data), `\u003c`) {
		t.Errorf("EncodeCommit() = %s; want 3 lines without HTML escaping", data)
	}
	out, err := delta.ParseCommit("x", data)
	if err != nil || len(out) != 3 || out[1].Txn.AppID != "a<b>&" || out[2].Add.Path != "p%20q.parquet" {
		t.Errorf("ParseCommit() = %+v, %v", out, err)
	}
}
