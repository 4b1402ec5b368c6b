package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/readers"
)

// corpusTimeout bounds one `loader` run on a corpus file: the files are a few KB, so anything near
// it is a hang.
const corpusTimeout = 60 * time.Second

// crashDump matches what the Go runtime prints when a panic or a fatal error ends the process. A
// decoder panic the loader recovers reads "decoder panic: ..." in an error naming the file instead.
var crashDump = regexp.MustCompile(`(?m)^(panic: |fatal error: )|goroutine \d+ \[`)

// corpusSlots bounds the corpus cases running at once (each runs loader processes), whatever
// -parallel says.
var corpusSlots = make(chan struct{}, 4)

// runBounded runs the binary with the corpus deadline and reports whether it ended by itself.
func runBounded(t *testing.T, args ...string) (r result, ended bool) {
	t.Helper()
	return runFor(t, corpusTimeout, args...)
}

// extensions name a corpus file's format, so the loader decodes it rather than refusing an unknown
// format (most fuzz cases have no extension and no intact magic).
var extensions = map[readers.Format]string{
	readers.FormatParquet:   ".parquet",
	readers.FormatIPCFile:   ".arrow",
	readers.FormatIPCStream: ".arrows",
}

// TestCorpusBadFilesFailClearly runs every corrupt or fuzzer-found corpus file, and every valid one
// arrow-go cannot read, through `loader load`: once with --create-table (which reads the schema
// from the file) and once into an existing table whose rescue column takes every column as JSON, so
// that every value is decoded. Each run must end within corpusTimeout, with the documented status
// (1, or 3 under skip-file; 0 when a fuzz case turns out to be a valid file), an error naming the
// file, and no crash dump.
func TestCorpusBadFilesFailClearly(t *testing.T) {
	files := corpus.Bad(t)
	for _, f := range corpus.Valid(t) {
		if _, ok := corpus.KnownUnreadable[f.Name()]; ok {
			files = append(files, f)
		}
	}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f.Path)) + "/" + f.Name()
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			corpusSlots <- struct{}{}
			defer func() { <-corpusSlots }()
			_, unreadable := corpus.KnownUnreadable[f.Name()]
			path := f.Path
			if ext := extensions[f.Format]; !strings.HasSuffix(path, ext) && !unreadable {
				b, err := os.ReadFile(f.Path)
				if err != nil {
					t.Fatal(err)
				}
				path = filepath.Join(t.TempDir(), f.Name()+ext)
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			check := func(variant string, r result, ended bool, failed int) {
				t.Helper()
				switch {
				case !ended:
					t.Errorf("%s: still running after %s\nstderr: %s", variant, corpusTimeout, r.stderr)
				case crashDump.MatchString(r.stderr):
					t.Errorf("%s: crashed (exit %d):\n%s", variant, r.code, r.stderr)
				case r.code == 0 && !unreadable:
					t.Logf("%s: loaded: a valid file", variant)
				case r.code != failed:
					t.Errorf("%s: exit %d; want %d\nstderr: %s", variant, r.code, failed, r.stderr)
				case !strings.Contains(r.stderr, path):
					t.Errorf("%s: stderr does not name %s:\n%s", variant, path, r.stderr)
				}
			}

			wh := t.TempDir()
			r, ended := runBounded(t, "load", "--table", "main.default.t", "--warehouse", wh, "--create-table", "--quiet", path)
			check("--create-table", r, ended, 1)

			wh = t.TempDir()
			mustLoader(t, "table", "create", "main.default.t", "--warehouse", wh, "--columns", "id BIGINT, _rescued STRING")
			r, ended = runBounded(t, "load", "--table", "main.default.t", "--warehouse", wh, "--rescue-column", "_rescued",
				"--on-error", "skip-file", "--quiet", path)
			check("--rescue-column --on-error skip-file", r, ended, 3)
		})
	}
}
