package load

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loaderproject/loader/readers"
)

// quarantine is a run's dead-letter folder: rows.ndjson holds bad CSV rows, files.ndjson failed
// files. Nothing is created until something is written. It is safe for concurrent use.
type quarantine struct {
	dir string

	mu    sync.Mutex
	rows  *ndjson
	files *ndjson
}

// quarantinedRow is one line of rows.ndjson. Fields holds the row's raw values: the dead-letter file
// is the one place they are kept, so they can be fixed and loaded again.
type quarantinedRow struct {
	File   string   `json:"file"`
	Line   int64    `json:"line"`
	Column string   `json:"column,omitempty"`
	Reason string   `json:"reason"`
	Fields []string `json:"fields"`
}

func newQuarantine(root, table string, now time.Time) *quarantine {
	return &quarantine{dir: filepath.Join(root, table+"-"+now.UTC().Format("20060102T150405.000Z"))}
}

func (q *quarantine) row(r readers.BadRow) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.write(&q.rows, "rows.ndjson", quarantinedRow{File: r.File, Line: r.Line, Column: r.Column, Reason: r.Reason, Fields: r.Fields})
}

func (q *quarantine) file(f FileFailure) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.write(&q.files, "files.ndjson", f)
}

func (q *quarantine) write(w **ndjson, name string, v any) error {
	if *w == nil {
		if err := os.MkdirAll(q.dir, 0o755); err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(q.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
		*w = &ndjson{f: f, buf: bufio.NewWriter(f)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	if _, err := (*w).buf.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	return nil
}

// used reports whether anything was written, so the summary can point at the folder.
func (q *quarantine) used() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rows != nil || q.files != nil
}

// close flushes, fsyncs and closes the files: a dead letter must not be lost either.
func (q *quarantine) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var errs []error
	for _, w := range []*ndjson{q.rows, q.files} {
		if w != nil {
			errs = append(errs, w.close())
		}
	}
	return errors.Join(errs...)
}

type ndjson struct {
	f   *os.File
	buf *bufio.Writer
}

func (n *ndjson) close() error {
	err := n.buf.Flush()
	if err == nil {
		err = n.f.Sync()
	}
	return errors.Join(err, n.f.Close())
}
