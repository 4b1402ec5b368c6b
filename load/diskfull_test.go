//go:build linux

package load_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// TestSinkDiskFull: the sink's warehouse is on a small tmpfs that fills up mid-load. The sink refuses
// with a clear error and acknowledges nothing it did not store; once the tmpfs is grown, a re-run
// completes and the table holds each row once.
func TestSinkDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	dir := filepath.Join(mnt, "wh")
	wh, err := warehouse.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := tableschema.ParseColumns(fixture.TableColumns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wh.CreateTable(context.Background(), table, schema); err != nil {
		t.Fatal(err)
	}
	_, endpoint := startSink(t, wh)
	src := filepath.Join(t.TempDir(), "a.parquet")
	if err := fixture.WriteParquet(src, 0, 20000, 1000); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(t, memory.DefaultAllocator, src)
	cfg.Endpoint, cfg.Streams, cfg.Retries, cfg.RetryBackoff = endpoint, 2, 2, time.Millisecond
	sum, err := load.Run(context.Background(), cfg)
	if err == nil {
		t.Fatalf("load into a full disk succeeded: %+v", sum)
	}
	t.Logf("full disk: %v", err)
	if sum == nil || sum.Rows >= 20000 {
		t.Fatalf("summary %+v; want fewer than 20000 rows acknowledged", sum)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=256m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	again := run(t, cfg)
	if sum.Rows+again.Rows < 20000 {
		t.Errorf("runs acknowledged %d + %d rows; want at least 20000", sum.Rows, again.Rows)
	}
	checkTable(t, dir, fixture.IDs(0, 20000), fixture.Expected)
}
