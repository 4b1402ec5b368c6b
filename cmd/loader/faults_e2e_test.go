package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// bgLoad is a `loader load` running in the background.
type bgLoad struct {
	cmd       *exec.Cmd
	out, errb bytes.Buffer
	done      chan error
}

func startLoad(t *testing.T, args ...string) *bgLoad {
	t.Helper()
	l := &bgLoad{cmd: exec.Command(binary, args...), done: make(chan error, 1)}
	l.cmd.Stdout, l.cmd.Stderr = &l.out, &l.errb
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.done <- l.cmd.Wait() }()
	t.Cleanup(func() {
		if l.cmd.ProcessState == nil {
			_ = l.cmd.Process.Kill()
			<-l.done
		}
	})
	return l
}

// kill9 kills the load with SIGKILL (no chance to flush anything) and reaps it.
func (l *bgLoad) kill9(t *testing.T) {
	t.Helper()
	_ = l.cmd.Process.Kill()
	<-l.done
}

// wait waits for the load to end and returns its summary, failing the test unless it exits 0.
func (l *bgLoad) wait(t *testing.T) load.Summary {
	t.Helper()
	select {
	case err := <-l.done:
		if err != nil {
			t.Fatalf("load: %v\nstdout: %s\nstderr: %s", err, l.out.String(), l.errb.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("load did not end within 3 minutes\nstderr: %s", l.errb.String())
	}
	return parseSummary(t, l.out.String())
}

// waitRows polls the table's count (acknowledged rows included) until it reaches n, or the load
// ends.
func waitRows(t *testing.T, addr string, n int64, l *bgLoad) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		r := loader(t, "table", "count", tableName, "--endpoint", "grpc://"+addr)
		if r.code == 0 && lastLineInt(t, r.stdout) >= n {
			return
		}
		select {
		case err := <-l.done:
			l.done <- err
			t.Fatalf("load ended (%v) before the table held %d rows\nstdout: %s\nstderr: %s", err, n, l.out.String(), l.errb.String())
		default:
		}
	}
	t.Fatalf("the table did not reach %d rows within 2 minutes", n)
}

// tableIDs reads the table back from the warehouse and counts each id.
func tableIDs(t *testing.T, wh string) map[int64]int {
	t.Helper()
	w, err := warehouse.Open(wh)
	if err != nil {
		t.Fatal(err)
	}
	name, err := tableschema.ParseTableName(tableName)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := w.Table(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]int{}
	err = tbl.Scan(context.Background(), func(rec arrow.RecordBatch) error {
		col := rec.Column(int(rec.Schema().FieldIndices("id")[0])).(*array.Int64)
		for i := range col.Len() {
			ids[col.Value(i)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// dupsAndMissing compares the table's ids with [0, n).
func dupsAndMissing(ids map[int64]int, n int64) (dups, missing int64) {
	for id := range n {
		switch c := ids[id]; {
		case c == 0:
			missing++
		case c > 1:
			dups += int64(c - 1)
		}
	}
	return dups, missing
}

// killRun is the experiment in small: the loader is killed with SIGKILL twice and the sink
// once, and each time the same command runs again. It returns the final table's duplicates and
// missing ids and the possibly_duplicated_rows the runs reported in all.
func killRun(t *testing.T, serveArgs ...string) (dups, missing, reported int64, last load.Summary, manifests string) {
	const files, perFile = 4, 3000
	const total = files * perFile
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	srv := serve(t, wh, append([]string{"--fault-ack-delay", "40ms"}, serveArgs...)...)
	data := writeParquetParts(t, files, perFile)
	manifests = t.TempDir()
	args := []string{"load", "--table", tableName, "--endpoint", "grpc://" + srv.addr, "--json", "--streams", "2",
		"--max-frame-bytes", "16KiB", "--max-inflight-bytes", "64KiB", "--manifest-dir", manifests,
		"--retries", "20", "--retry-backoff", "100ms", data}

	// Two loader kills.
	for _, at := range []int64{total / 6, total / 3} {
		l := startLoad(t, args...)
		waitRows(t, srv.addr, at, l)
		l.kill9(t)
	}
	// A sink kill, restarted on the same address while the loader retries.
	l := startLoad(t, args...)
	waitRows(t, srv.addr, total/2, l)
	addr := srv.addr
	_ = srv.cmd.Process.Kill()
	<-srv.done
	srv = serve(t, wh, append([]string{"--listen", addr}, serveArgs...)...)
	last = l.wait(t)
	reported = last.PossiblyDuplicatedRows
	// A last run finds everything done.
	again := parseSummary(t, mustLoader(t, args...).stdout)
	reported += again.PossiblyDuplicatedRows
	if again.Rows != 0 {
		t.Errorf("a run after the load completed sent %d rows; want 0", again.Rows)
	}
	srv.stop(t)
	dups, missing = dupsAndMissing(tableIDs(t, wh), total)
	return dups, missing, reported, last, manifests
}

// TestKill9ExactlyOnceEmbedded: against the embedded sink, SIGKILLs of the loader and the sink leave
// each source row in the table exactly once.
func TestKill9ExactlyOnceEmbedded(t *testing.T) {
	dups, missing, reported, last, _ := killRun(t)
	if !last.Deduplicated {
		t.Errorf("summary says the sink does not deduplicate: %+v", last)
	}
	if dups != 0 || missing != 0 || reported != 0 {
		t.Errorf("table has %d duplicate and %d missing ids, %d rows reported possibly duplicated; want 0, 0, 0", dups, missing, reported)
	}
}

// TestKill9AtLeastOnceReported: against a sink that does not deduplicate (as Zerobus), nothing is
// lost and every duplicate the table holds is covered by possibly_duplicated_rows.
func TestKill9AtLeastOnceReported(t *testing.T) {
	dups, missing, reported, last, manifests := killRun(t, "--unit-ids=false")
	if last.Deduplicated {
		t.Errorf("summary says the sink deduplicates: %+v", last)
	}
	if missing != 0 {
		t.Errorf("table misses %d ids", missing)
	}
	if dups > reported {
		t.Errorf("table holds %d duplicate rows but the runs reported %d possibly duplicated", dups, reported)
	}
	t.Logf("duplicates %d, reported possibly duplicated %d", dups, reported)
	// loader status lists the same ranges by file.
	var infos []manifest.Info
	if err := json.Unmarshal([]byte(mustLoader(t, "status", "--table", tableName, "--manifest-dir", manifests, "--json").stdout), &infos); err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Table != tableName || infos[0].PossiblyDuplicatedRows != reported {
		t.Fatalf("status = %+v; want one manifest of %s with %d rows possibly duplicated", infos, tableName, reported)
	}
	var listed int64
	for _, f := range infos[0].Files {
		for _, u := range f.Units {
			if !u.Done || len(u.Pending) > 0 {
				t.Errorf("status: %s unit %d done %v, pending %v; want done", f.Path, u.Unit, u.Done, u.Pending)
			}
			for _, r := range u.Duplicated {
				listed += r.To - r.From
			}
		}
	}
	if listed == 0 || listed > reported {
		t.Errorf("status lists %d possibly duplicated rows in ranges; want some, at most the %d counted", listed, reported)
	}
	human := mustLoader(t, "status", "--table", tableName, "--manifest-dir", manifests).stdout
	if m := fixture.Missing(human, "possibly duplicated", "UNITS DONE", "part-0.parquet"); len(m) > 0 {
		t.Errorf("status output lacks %q:\n%s", m, human)
	}
}

