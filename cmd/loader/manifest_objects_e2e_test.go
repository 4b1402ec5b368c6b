package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/s3test"
	"github.com/loaderproject/loader/manifest"
)

// TestManifestInObjectStorage keeps the manifest in an S3-compatible bucket (versitygw) against a
// sink that does not deduplicate, so the manifest alone decides what is sent again: a second run on
// a live manifest fails on its lock; after SIGKILLs the next run takes the lock over and resumes;
// nothing is lost, every duplicate is reported, and loader status reads the bucket.
func TestManifestInObjectStorage(t *testing.T) {
	srv := s3test.Start(t)
	srv.Env(t, s3test.AccessKey, s3test.SecretKey)
	srv.CreateBucket(t, "state")
	const files, perFile = 4, 3000
	const total = files * perFile
	wh := t.TempDir()
	mustLoader(t, "table", "create", tableName, "--warehouse", wh, "--columns", fixture.TableColumns)
	sink := serve(t, wh, "--fault-ack-delay", "40ms", "--unit-ids=false")
	data := writeParquetParts(t, files, perFile)
	const dir = "s3://state/jobs/nightly/"
	args := []string{"load", "--table", tableName, "--endpoint", "grpc://" + sink.addr, "--json", "--streams", "2",
		"--max-frame-bytes", "16KiB", "--max-inflight-bytes", "64KiB", "--manifest-dir", dir,
		"--manifest-lock-timeout", "1500ms", data}

	first := startLoad(t, args...)
	waitRows(t, sink.addr, total/6, first)
	second := loader(t, args...)
	if second.code == 0 || !strings.Contains(second.stderr, manifest.ErrLocked.Error()) {
		t.Fatalf("a second run while the first holds the manifest: exit %d, stderr %q; want a failure on the lock", second.code, second.stderr)
	}
	first.kill9(t)

	again := startLoad(t, args...)
	waitRows(t, sink.addr, total/2, again)
	again.kill9(t)

	last := startLoad(t, args...).wait(t)
	reported := last.PossiblyDuplicatedRows
	done := parseSummary(t, mustLoader(t, args...).stdout)
	reported += done.PossiblyDuplicatedRows
	if done.Rows != 0 {
		t.Errorf("a run after the load completed sent %d rows; want 0", done.Rows)
	}
	sink.stop(t)
	dups, missing := dupsAndMissing(tableIDs(t, wh), total)
	if missing != 0 || dups > reported {
		t.Errorf("table misses %d ids and holds %d duplicates; %d reported possibly duplicated (want 0 missing, duplicates <= reported)", missing, dups, reported)
	}
	t.Logf("duplicates %d, reported %d", dups, reported)

	st := mustLoader(t, "status", "--table", tableName, "--manifest-dir", dir, "--json")
	var infos []manifest.Info
	if err := json.Unmarshal([]byte(st.stdout), &infos); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	if len(infos) != 1 || len(infos[0].Files) != files {
		t.Fatalf("status lists %d manifests (%+v); want one of %d files", len(infos), infos, files)
	}
	for _, f := range infos[0].Files {
		for _, u := range f.Units {
			if !u.Done {
				t.Errorf("status: %s unit %d not done", f.Path, u.Unit)
			}
		}
	}
}
