package main_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderproject/loader/internal/azuritetest"
	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/objstore"
)

// TestAzureEmulatorLoad loads Parquet and Arrow IPC blobs from Azurite (`make test-emulators`) into
// the embedded sink with the manifest kept in the container, reads the values back, and re-runs:
// the bucket manifest says every unit is loaded, so nothing loads twice, and a rewritten blob loads
// as new.
func TestAzureEmulatorLoad(t *testing.T) {
	srv := azuritetest.Start(t)
	srv.Env(t)
	srv.CreateContainer(t, "lake")
	dir := t.TempDir()
	write := func(name string, fn func(string) error) string {
		p := filepath.Join(dir, name)
		if err := fn(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i := int64(0); i < 2; i++ {
		srv.PutFile(t, "lake", "pq/part-"+string(rune('0'+i))+".parquet",
			write("p.parquet", func(p string) error { return fixture.WriteParquet(p, i*1000, 1000, 250) }))
	}
	srv.Put(t, "lake", "pq/_SUCCESS", nil)
	srv.PutFile(t, "lake", "ipc/b.arrow", write("b.arrow", func(p string) error { return fixture.WriteIPC(p, 0, 1500, 300, false) }))

	wh := t.TempDir()
	mustLoader(t, "table", "create", "main.default.pq", "--warehouse", wh, "--columns", fixture.TableColumns)
	mustLoader(t, "table", "create", "main.default.ipc", "--warehouse", wh, "--columns", fixture.TableColumns)
	manifests := "azblob://lake/manifests/"
	for _, c := range []struct {
		table, src string
		files      int
		ids        []int64
	}{
		{"main.default.pq", "azblob://lake/pq/", 2, fixture.IDs(0, 2000)},
		{"main.default.ipc", "azblob://lake/ipc/b.arrow", 1, fixture.IDs(0, 1500)},
	} {
		s := parseSummary(t, mustLoader(t, "load", "--table", c.table, "--warehouse", wh, "--json", "--manifest-dir", manifests, c.src).stdout)
		if s.Files != c.files || s.Rows != int64(len(c.ids)) || s.ObjectRequests <= 0 || s.ObjectBytes <= 0 {
			t.Errorf("%s: summary %+v; want %d files, %d rows, object requests and bytes counted", c.src, s, c.files, len(c.ids))
		}
		if diffs := fixture.Diff(scanTable(t, wh, c.table), c.ids, fixture.Expected, 10); len(diffs) > 0 {
			t.Errorf("%s: table differs:\n%s", c.src, strings.Join(diffs, "\n"))
		}
	}
	st := objstore.New()
	defer func() { _ = st.Close() }()
	// The URL names the emulator: gocloud's azureblob reads the environment once per process, and a
	// repeated run of this test (-count) has an emulator of its own.
	loc, err := objstore.Parse(manifests + "?domain=" + srv.Host)
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	if err := st.Walk(context.Background(), loc, nil, func(o objstore.Object) error {
		stored = append(stored, o.Loc.Key)
		return nil
	}); err != nil || len(stored) == 0 {
		t.Fatalf("the manifest in the container: %v, %v; want its objects", stored, err)
	}
	args := []string{"load", "--table", "main.default.pq", "--warehouse", wh, "--json", "--manifest-dir", manifests, "azblob://lake/pq/"}
	if again := parseSummary(t, mustLoader(t, args...).stdout); again.Rows != 0 || again.SkippedUnits != 8 {
		t.Errorf("re-run with the manifest in the container: %+v; want nothing loaded, 8 units skipped", again)
	}
	srv.PutFile(t, "lake", "pq/part-0.parquet", write("p.parquet", func(p string) error { return fixture.WriteParquet(p, 2000, 1000, 250) }))
	if third := parseSummary(t, mustLoader(t, args...).stdout); third.Rows != 1000 || third.SkippedUnits != 4 {
		t.Errorf("after rewriting part-0: %+v; want its 1000 new rows loaded, 4 units skipped", third)
	}
	if diffs := fixture.Diff(scanTable(t, wh, "main.default.pq"), fixture.IDs(0, 3000), fixture.Expected, 10); len(diffs) > 0 {
		t.Errorf("after the rewrite: table differs:\n%s", strings.Join(diffs, "\n"))
	}
	// A missing container or blob fails naming the URL and the provider's cause.
	for _, c := range []struct{ src, want string }{
		{"azblob://nocontainer/x/", "ContainerNotFound"},
		{"azblob://lake/missing.parquet", "azblob://lake/missing.parquet"},
	} {
		r := loader(t, "load", "--table", "main.default.pq", "--warehouse", wh, c.src)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("load %s: exit %d, stderr %q; want a failure naming %q", c.src, r.code, r.stderr, c.want)
		}
	}
}
