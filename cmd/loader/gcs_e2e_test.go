package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/gcstest"
)

// TestGCSEmulatorLoad loads Parquet objects from fake-gcs-server (`make test-emulators`) into the
// embedded sink with the manifest kept in the bucket, reads the values back, and re-runs: the bucket
// manifest says every unit is loaded, so nothing loads twice.
func TestGCSEmulatorLoad(t *testing.T) {
	dir := t.TempDir()
	objects := map[string][]byte{"pq/_SUCCESS": nil}
	for i := range 2 {
		p := filepath.Join(dir, fmt.Sprintf("part-%d.parquet", i))
		if err := fixture.WriteParquet(p, int64(i)*1000, 1000, 250); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		objects[fmt.Sprintf("pq/part-%d.parquet", i)] = b
	}
	gcstest.Start(t, objects)

	wh := t.TempDir()
	mustLoader(t, "table", "create", "main.default.pq", "--warehouse", wh, "--columns", fixture.TableColumns)
	args := []string{"load", "--table", "main.default.pq", "--warehouse", wh, "--json", "--manifest-dir", "gs://data/manifests/", "gs://data/pq/"}
	s := parseSummary(t, mustLoader(t, args...).stdout)
	if s.Files != 2 || s.Rows != 2000 || s.ObjectRequests <= 0 || s.ObjectBytes <= 0 {
		t.Errorf("summary %+v; want 2 files, 2000 rows, object requests and bytes counted", s)
	}
	if diffs := fixture.Diff(scanTable(t, wh, "main.default.pq"), fixture.IDs(0, 2000), fixture.Expected, 10); len(diffs) > 0 {
		t.Errorf("table differs:\n%s", strings.Join(diffs, "\n"))
	}
	if again := parseSummary(t, mustLoader(t, args...).stdout); again.Rows != 0 || again.SkippedUnits != 8 {
		t.Errorf("re-run with the manifest in the bucket: %+v; want nothing loaded, 8 units skipped", again)
	}
	r := loader(t, "load", "--table", "main.default.pq", "--warehouse", wh, "gs://data/missing.parquet")
	if r.code == 0 || !strings.Contains(r.stderr, "gs://data/missing.parquet") {
		t.Errorf("load of a missing object: exit %d, stderr %q; want a failure naming it", r.code, r.stderr)
	}
}
