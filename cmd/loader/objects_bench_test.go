package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBenchObjects is `make bench-objects`: it loads the same generated files from local disk and
// from versitygw on loopback into a discard sink, for each format, and reports the throughput
// ratio (bucket ÷ local, target ≥ 0.8), the requests per file and the read amplification (object
// bytes read ÷ object bytes). It runs only when LOADER_BENCH_OBJECTS is set (it is a benchmark,
// not a test: it asserts no timing), and writes the figures to $LOADER_BENCH_OBJECTS_OUT if set.
// LOADER_BENCH_OBJECTS_FORMATS (a comma-separated list, e.g. "ipc") measures only those formats.
func TestBenchObjects(t *testing.T) {
	if os.Getenv("LOADER_BENCH_OBJECTS") == "" {
		t.Skip("a benchmark: run `make bench-objects`")
	}
	rows := int64(1_000_000)
	if v := os.Getenv("LOADER_BENCH_OBJECTS_ROWS"); v != "" {
		rows, _ = strconv.ParseInt(v, 10, 64)
	}
	repeat := 3
	srv := objectsServer(t)
	wh := t.TempDir()
	formats := []string{"parquet", "csv", "ipc"}
	if v := os.Getenv("LOADER_BENCH_OBJECTS_FORMATS"); v != "" {
		formats = strings.Split(v, ",")
	}
	dirs := map[string]string{}
	for _, format := range append([]string{"parquet"}, formats...) {
		if dirs[format] != "" {
			continue
		}
		dir := filepath.Join(t.TempDir(), format)
		mustLoader(t, "generate", "--out", dir, "--rows", strconv.FormatInt(rows, 10), "--files", "8", "--format", format)
		dirs[format] = dir
		// every format's table is the Parquet files' (CSV gives no types of its own)
		mustLoader(t, "table", "create", "main.default.bench_"+format, "--warehouse", wh, "--like", firstFile(t, dirs["parquet"]))
		srv.PutDir(t, "lake", format+"/", dir)
	}
	sink := serve(t, wh, "--discard")
	type result struct {
		Format          string  `json:"format"`
		Files           int     `json:"files"`
		DatasetBytes    int64   `json:"dataset_bytes"`
		LocalRowsPerSec float64 `json:"local_rows_per_second"`
		S3RowsPerSec    float64 `json:"s3_rows_per_second"`
		Ratio           float64 `json:"s3_vs_local"`
		RequestsPerFile float64 `json:"requests_per_file"`
		Amplification   float64 `json:"read_amplification"`
	}
	var results []result
	for _, format := range formats {
		dir := dirs[format]
		var size int64
		var files int
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), ".") && !strings.HasPrefix(d.Name(), "_") {
				st, _ := d.Info()
				size += st.Size()
				files++
			}
			return err
		})
		table := "main.default.bench_" + format
		r := result{Format: format, Files: files, DatasetBytes: size}
		for i := 0; i < repeat; i++ {
			for _, src := range []string{dir, "s3://lake/" + format + "/"} {
				s := parseSummary(t, mustLoader(t, "load", "--table", table, "--endpoint", "grpc://"+sink.addr, "--json",
					"--manifest-dir", t.TempDir(), src).stdout)
				if s.Rows != rows {
					t.Fatalf("%s from %s loaded %d rows; want %d", format, src, s.Rows, rows)
				}
				if strings.HasPrefix(src, "s3://") {
					r.S3RowsPerSec = max(r.S3RowsPerSec, s.RowsPerSecond)
					r.RequestsPerFile = float64(s.ObjectRequests) / float64(files)
					r.Amplification = float64(s.ObjectBytes) / float64(size)
				} else {
					r.LocalRowsPerSec = max(r.LocalRowsPerSec, s.RowsPerSecond)
				}
			}
		}
		r.Ratio = r.S3RowsPerSec / r.LocalRowsPerSec
		results = append(results, r)
		t.Logf("%-8s %d files, %.1f MB: local %.0f rows/s, s3 %.0f rows/s, s3/local %.2f, %.1f requests/file, read amplification %.3f",
			format, files, float64(size)/1e6, r.LocalRowsPerSec, r.S3RowsPerSec, r.Ratio, r.RequestsPerFile, r.Amplification)
	}
	if out := os.Getenv("LOADER_BENCH_OBJECTS_OUT"); out != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func firstFile(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			return filepath.Join(dir, e.Name())
		}
	}
	t.Fatalf("no file in %s", dir)
	return ""
}
