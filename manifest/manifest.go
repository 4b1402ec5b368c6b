package manifest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/loaderproject/loader/internal/fsutil"
)

// ErrLocked means another process holds the manifest.
var ErrLocked = errors.New("manifest is in use by another loader")

// ErrCorrupt means the manifest file holds a line that is not a valid record and is not a torn tail.
// Removing the file (or the whole manifest directory) makes the next run start from scratch.
var ErrCorrupt = errors.New("manifest is corrupt")

// ErrClosed is returned by every method of a closed manifest.
var ErrClosed = errors.New("manifest is closed")

// formatVersion is the header line's version. Format 1 (no epoch, layouts, intents or duplicate
// ranges) is read too, and rewritten as format 2 when opened.
const formatVersion = 2

// Compaction: Open rewrites a file larger than compactMinBytes whose line count is above
// compactRatio times the lines a rewrite would hold.
const (
	compactMinBytes = 1 << 20
	compactRatio    = 4
)

// FileID identifies one version of a source file.
type FileID struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	ModTimeNano int64  `json:"mtime_ns"`
	// ETag is an object-store source's version tag (ETag or GCS generation); "" for local files.
	ETag   string `json:"etag,omitempty"`
	Schema string `json:"schema"` // fingerprint of the file's Arrow schema
	// Layout fingerprints how the reader splits the file into units (their count and byte sizes), so
	// a run that would split it differently (other CSV split points) does not reuse unit numbers that
	// mean other rows. Empty in format 1 manifests; such a file matches any layout.
	Layout string `json:"layout,omitempty"`
}

// Range is a half-open row range [From, To) within a unit.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Manifest is an open manifest. It is safe for concurrent use.
type Manifest struct {
	path string
	lock *os.File

	mu      sync.Mutex
	epoch   int64 // bumped by Reset (loader load --force)
	version int   // the header's format, while replaying
	// target and table label the manifest in its header, for loader status.
	target, table string
	// dupRows sums the rows of every Duplicate record (overlaps counted each time); reported sums
	// what Reported was told. Their difference is what no run's summary has counted yet.
	dupRows, reported int64
	f                 *os.File
	w                 *bufio.Writer
	files             fileIndex
	nfiles            int   // the next file number
	err               error // sticky write error
	closed            bool
	// written counts flushes that wrote bytes; synced is the last count made durable.
	written uint64

	syncMu sync.Mutex
	synced uint64

	// replica, when set, gets every byte made durable (WithReplica); tail holds those written since
	// the last sync handed them over.
	replica Replica
	tail    bytes.Buffer
}

// Path returns the manifest file for a target and table inside dir: a readable, collision-free name.
// The name is the target and table with every character outside [A-Za-z0-9._-] replaced, shortened,
// plus a hash of the exact pair, e.g. "grpc_127.0.0.1_7070__main.sales.orders-3fa9c2d1e0b4.jsonl".
func Path(dir, target, table string) string {
	sum := sha256.Sum256([]byte(target + "\x00" + table))
	name := sanitize(target, 60) + "__" + sanitize(table, 80) + "-" + hex.EncodeToString(sum[:6]) + ".jsonl"
	return filepath.Join(dir, name)
}

func sanitize(s string, limit int) string {
	var b strings.Builder
	under := false
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
		if !ok || r == '_' {
			if !under && b.Len() > 0 {
				b.WriteByte('_')
			}
			under = true
			continue
		}
		under = false
		b.WriteRune(r)
	}
	out := strings.Trim(b.String(), "_.")
	if len(out) > limit {
		out = out[:limit]
	}
	if out == "" {
		out = "x"
	}
	return out
}

// Open opens (creating if needed) the manifest at path and takes an exclusive lock on it. It replays
// the file, drops a torn last line and compacts the file when it has grown large. It fails with
// ErrLocked when another process (or another Open in this process) holds the manifest, and with an
// error wrapping ErrCorrupt when the file is not a manifest.
func Open(path string, opts ...Option) (*Manifest, error) {
	if err := fsutil.MkdirAllSync(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	lock, err := fsutil.Lock(path + ".lock")
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("manifest %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	m := &Manifest{path: path, lock: lock}
	for _, o := range opts {
		o(m)
	}
	if err := m.load(); err != nil {
		if m.f != nil {
			m.f.Close()
		}
		lock.Close()
		return nil, err
	}
	return m, nil
}

// load replays the file and leaves m.f open for appending.
func (m *Manifest) load() error {
	f, err := os.OpenFile(m.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("manifest %s: %w", m.path, err)
	}
	m.f = f
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("manifest %s: read: %w", m.path, err)
	}
	good, lines, version, err := m.replay(data)
	if err != nil {
		return err
	}
	if good == 0 {
		// New (or only a torn header): start with a header.
		if err := m.truncateToHeader(); err != nil {
			return fmt.Errorf("manifest %s: write header: %w", m.path, err)
		}
		if err := fsutil.SyncDir(filepath.Dir(m.path)); err != nil {
			return fmt.Errorf("manifest %s: %w", m.path, err)
		}
		good = int64(len(m.headerLine()))
	} else if good < int64(len(data)) {
		if err := f.Truncate(good); err != nil {
			return fmt.Errorf("manifest %s: cut torn tail: %w", m.path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("manifest %s: fsync: %w", m.path, err)
		}
	}
	if version != formatVersion || good >= compactMinBytes && lines > compactRatio*m.liveLines() {
		if err := m.compact(); err != nil {
			return err
		}
	} else if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("manifest %s: %w", m.path, err)
	}
	m.w = bufio.NewWriterSize(m.sink(), 64<<10)
	return m.resetReplica()
}

// Option configures Open.
type Option func(*Manifest)

// WithLabel names the target and the table the manifest is about in its header, where loader status
// finds them. A manifest created without a label keeps the one its header has, if any.
func WithLabel(target, table string) Option {
	return func(m *Manifest) { m.target, m.table = target, table }
}

func (m *Manifest) headerLine() []byte {
	b := []byte(`{"manifest":` + strconv.Itoa(formatVersion) + `,"epoch":` + strconv.FormatInt(m.epoch, 10))
	if m.target != "" || m.table != "" {
		b = append(b, `,"target":`...)
		b = appendJSONString(b, m.target)
		b = append(b, `,"table":`...)
		b = appendJSONString(b, m.table)
	}
	return append(b, "}\n"...)
}

// truncateToHeader empties f down to the header line, durably, and leaves its offset at the end.
func (m *Manifest) truncateToHeader() error {
	f := m.f
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(m.headerLine(), 0); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	return f.Sync()
}

// record is any manifest line.
type record struct {
	Manifest *int   `json:"manifest"`
	Epoch    *int64 `json:"epoch"`
	Target   string `json:"target"`
	Table    string `json:"table"`

	File *int `json:"file"`
	FileID

	F    *int   `json:"f"`
	U    *int   `json:"u"`
	From *int64 `json:"from"`
	To   *int64 `json:"to"`
	Rows *int64 `json:"rows"`
	Sent *Range `json:"sent"`
	Dup  *Range `json:"dup"`
	// DupExtra adds to the duplicated row total (a compaction's merged ranges count overlaps once);
	// Reported adds to the reported total.
	DupExtra *int64 `json:"dup_extra"`
	Reported *int64 `json:"reported"`
	// Failed, with F, records why a run gave up the file.
	Failed *string `json:"failed"`
}

// replay applies every complete line of data. It returns the length of the valid prefix and the
// number of lines in it. Invalid lines at the end (a torn write) are left out of the prefix; an invalid
// line followed by a valid one is corruption.
func (m *Manifest) replay(data []byte) (good int64, lines, version int, err error) {
	byIdx := map[int]*fileState{}
	var (
		off     int64
		lineNo  int
		badLine int // first bad line, 0 if none
		badWhy  error
	)
	for len(data) > 0 {
		lineNo++
		nl := bytes.IndexByte(data, '\n')
		var line []byte
		if nl < 0 {
			line, data = data, nil
		} else {
			line, data = data[:nl], data[nl+1:]
		}
		n := int64(len(line))
		if nl >= 0 {
			n++
		}
		var why error
		if nl < 0 {
			why = errors.New("line without a newline")
		} else {
			why = m.apply(line, lineNo, byIdx)
		}
		if why != nil && lineNo == 1 {
			if hdr := []byte(`{"manifest":`); nl < 0 && (bytes.HasPrefix(line, hdr) || bytes.HasPrefix(hdr, line)) {
				return 0, 0, formatVersion, nil // a header torn by a crash while creating the file
			}
			return 0, 0, 0, fmt.Errorf("manifest %s: %w: %w", m.path, ErrCorrupt, why)
		}
		if why != nil {
			if badLine == 0 {
				badLine, badWhy = lineNo, why
			}
			off += n
			continue
		}
		if badLine != 0 {
			return 0, 0, 0, fmt.Errorf("manifest %s: line %d: %w: %w (a valid line %d follows it; remove the file to start over)",
				m.path, badLine, ErrCorrupt, badWhy, lineNo)
		}
		off += n
		good = off
		lines++
	}
	return good, lines, m.version, nil
}

// apply applies one line.
func (m *Manifest) apply(line []byte, lineNo int, byIdx map[int]*fileState) error {
	var r record
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return fmt.Errorf("not a manifest record: %w", err)
	}
	if lineNo == 1 {
		if r.Manifest == nil {
			return errors.New(`the first line is not a manifest header {"manifest":N}`)
		}
		if *r.Manifest != 1 && *r.Manifest != formatVersion {
			return fmt.Errorf("manifest format %d, this loader reads formats 1 and %d", *r.Manifest, formatVersion)
		}
		m.version = *r.Manifest
		if r.Epoch != nil {
			m.epoch = *r.Epoch
		}
		if m.target == "" && m.table == "" {
			m.target, m.table = r.Target, r.Table
		}
		return nil
	}
	switch {
	case r.DupExtra != nil && r.File == nil && r.F == nil && r.Reported == nil:
		m.dupRows += *r.DupExtra
		return nil
	case r.Reported != nil && r.File == nil && r.F == nil && r.DupExtra == nil:
		m.reported += *r.Reported
		return nil
	case r.File != nil:
		fs := &fileState{idx: *r.File}
		if _, dup := byIdx[fs.idx]; dup || fs.idx < 0 {
			return fmt.Errorf("file number %d declared twice or negative", fs.idx)
		}
		if m.files.get(r.FileID) != nil {
			return fmt.Errorf("file %q declared twice", r.Path)
		}
		byIdx[fs.idx] = fs
		m.files.add(r.FileID, fs)
		m.nfiles = max(m.nfiles, fs.idx+1)
		return nil
	case r.F != nil && r.Failed != nil && r.U == nil:
		fs := byIdx[*r.F]
		if fs == nil {
			return fmt.Errorf("file number %d is not declared", *r.F)
		}
		m.files.setFailed(fs, *r.Failed)
		return nil
	case r.F != nil && r.U != nil:
		fs := byIdx[*r.F]
		if fs == nil {
			return fmt.Errorf("file number %d is not declared", *r.F)
		}
		if *r.U < 0 {
			return fmt.Errorf("unit %d is negative", *r.U)
		}
		u := fs.unit(*r.U)
		switch {
		case r.From != nil && r.To != nil && r.Rows == nil:
			if *r.From < 0 || *r.To <= *r.From {
				return fmt.Errorf("range [%d,%d) is empty or negative", *r.From, *r.To)
			}
			u.ack(Range{*r.From, *r.To})
			return nil
		case r.Sent != nil && r.From == nil && r.Rows == nil && r.Dup == nil:
			if r.Sent.From < 0 || r.Sent.To <= r.Sent.From {
				return fmt.Errorf("sent range [%d,%d) is empty or negative", r.Sent.From, r.Sent.To)
			}
			u.sent(*r.Sent)
			return nil
		case r.Dup != nil && r.From == nil && r.Rows == nil && r.Sent == nil:
			if r.Dup.From < 0 || r.Dup.To <= r.Dup.From {
				return fmt.Errorf("duplicate range [%d,%d) is empty or negative", r.Dup.From, r.Dup.To)
			}
			u.duplicated(*r.Dup)
			m.dupRows += r.Dup.To - r.Dup.From
			return nil
		case r.Rows != nil && r.From == nil && r.To == nil:
			if *r.Rows < 0 {
				return fmt.Errorf("row count %d is negative", *r.Rows)
			}
			u.setRows(*r.Rows)
			return nil
		}
	}
	return errors.New("unknown record")
}

// liveLines is the number of lines a compact rewrite holds.
func (m *Manifest) liveLines() int {
	n := 1
	for _, fs := range m.files.byKey {
		n++
		for _, u := range fs.units {
			n += len(u.pending()) + len(u.dup())
			switch {
			case u.r != nil:
				n += len(u.r.acked)
			case u.rows > 0:
				n++ // the ack of a finished unit
			}
			if u.rows >= 0 {
				n++
			}
		}
	}
	return n
}

// compact rewrites the file with one line per live fact, renumbering files, and reopens it.
func (m *Manifest) compact() error {
	tmp := m.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("manifest %s: compact: %w", m.path, err)
	}
	w := bufio.NewWriter(f)
	// werr keeps the first write error; the writes after it are skipped.
	var werr error
	write := func(b []byte) {
		if werr == nil {
			_, werr = w.Write(b)
		}
	}
	write(m.headerLine())
	var merged int64
	for _, fs := range m.files.byKey {
		for _, u := range fs.units {
			for _, r := range u.dup() {
				merged += r.To - r.From
			}
		}
	}
	if extra := m.dupRows - merged; extra != 0 {
		write([]byte(`{"dup_extra":` + strconv.FormatInt(extra, 10) + "}\n"))
	}
	if m.reported != 0 {
		write([]byte(`{"reported":` + strconv.FormatInt(m.reported, 10) + "}\n"))
	}
	files := m.files.inOrder()
	var buf []byte
	for i, e := range files {
		fs := e.fs
		fs.idx = i
		buf = appendFileLine(buf[:0], i, m.files.id(e.key))
		write(buf)
		if why := m.files.failed[fs]; why != "" {
			write(appendFailedLine(buf[:0], i, why))
		}
		for _, us := range fs.units {
			u := us.unit
			if us.rows >= 0 {
				write(appendRowsLine(buf[:0], i, u, us.rows))
			}
			for _, r := range us.acked() {
				write(appendAckLine(buf[:0], i, u, r))
			}
			// Intents already acknowledged are not kept (nor in memory): only the pending ones matter.
			for _, r := range us.pending() {
				write(appendRangeLine(buf[:0], i, u, "sent", r))
			}
			for _, r := range us.dup() {
				write(appendRangeLine(buf[:0], i, u, "dup", r))
			}
		}
	}
	m.nfiles = len(files)
	m.version = formatVersion
	if werr == nil {
		werr = w.Flush()
	}
	if err := werr; err != nil {
		f.Close()
		return fmt.Errorf("manifest %s: compact: %w", m.path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("manifest %s: compact: fsync: %w", m.path, err)
	}
	if err := os.Rename(tmp, m.path); err != nil {
		f.Close()
		return fmt.Errorf("manifest %s: compact: %w", m.path, err)
	}
	if err := fsutil.SyncDir(filepath.Dir(m.path)); err != nil {
		f.Close()
		return fmt.Errorf("manifest %s: compact: %w", m.path, err)
	}
	m.f.Close()
	m.f = f
	return nil
}

func appendFileLine(b []byte, idx int, id FileID) []byte {
	b = append(b, `{"file":`...)
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, id.Path)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, id.Size, 10)
	b = append(b, `,"mtime_ns":`...)
	b = strconv.AppendInt(b, id.ModTimeNano, 10)
	if id.ETag != "" {
		b = append(b, `,"etag":`...)
		b = appendJSONString(b, id.ETag)
	}
	b = append(b, `,"schema":`...)
	b = appendJSONString(b, id.Schema)
	if id.Layout != "" {
		b = append(b, `,"layout":`...)
		b = appendJSONString(b, id.Layout)
	}
	return append(b, "}\n"...)
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendUnitLine appends the start of a line about unit u of file f: `{"f":F,"u":U`.
func appendUnitLine(b []byte, f, u int) []byte {
	b = append(b, `{"f":`...)
	b = strconv.AppendInt(b, int64(f), 10)
	b = append(b, `,"u":`...)
	return strconv.AppendInt(b, int64(u), 10)
}

func appendAckLine(b []byte, f, u int, r Range) []byte {
	b = appendUnitLine(b, f, u)
	b = append(b, `,"from":`...)
	b = strconv.AppendInt(b, r.From, 10)
	b = append(b, `,"to":`...)
	b = strconv.AppendInt(b, r.To, 10)
	return append(b, "}\n"...)
}

func appendFailedLine(b []byte, f int, why string) []byte {
	b = append(b, `{"f":`...)
	b = strconv.AppendInt(b, int64(f), 10)
	b = append(b, `,"failed":`...)
	b = appendJSONString(b, why)
	return append(b, "}\n"...)
}

// Failed records why a run gave up the file (it is cleared when a later run finishes one of its
// units).
func (m *Manifest) Failed(f FileID, why string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(); err != nil {
		return err
	}
	if why == "" {
		why = "failed"
	}
	fs, isNew := m.fileLocked(f)
	if m.files.failed[fs] == why {
		return nil
	}
	if err := m.writeLocked(f, fs, isNew, appendFailedLine(nil, fs.idx, why)); err != nil {
		return err
	}
	m.files.setFailed(fs, why)
	return nil
}

// appendRangeLine appends `{"f":F,"u":U,"<key>":{"from":A,"to":B}}`.
func appendRangeLine(b []byte, f, u int, key string, r Range) []byte {
	b = appendUnitLine(b, f, u)
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":{"from":`...)
	b = strconv.AppendInt(b, r.From, 10)
	b = append(b, `,"to":`...)
	b = strconv.AppendInt(b, r.To, 10)
	return append(b, "}}\n"...)
}

func appendRowsLine(b []byte, f, u int, rows int64) []byte {
	b = appendUnitLine(b, f, u)
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, rows, 10)
	return append(b, "}\n"...)
}

// Reset forgets everything recorded (loader load --force) and starts a new epoch, so that targets
// which remember the units they stored (by ids that include the epoch) take them again. It is
// durable when it returns.
func (m *Manifest) Reset() error {
	m.syncMu.Lock() // no Sync hands the replica older bytes after this
	defer m.syncMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(); err != nil {
		return err
	}
	m.w.Reset(m.sink())
	m.epoch++
	m.dupRows, m.reported = 0, 0
	if err := m.truncateToHeader(); err != nil {
		return m.fail(fmt.Errorf("manifest %s: reset: %w", m.path, err))
	}
	if err := m.resetReplica(); err != nil {
		return m.fail(err)
	}
	m.files = fileIndex{}
	m.nfiles = 0
	return nil
}

// Epoch returns the manifest's epoch: 0 for a new one, plus one for every Reset.
func (m *Manifest) Epoch() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// Pending returns the unit's ranges sent but not acknowledged (sorted, merged; nil when none): after
// a crash or a fault, the target may or may not hold them.
func (m *Manifest) Pending(f FileID, unit int) []Range {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u := m.lookup(f, unit); u != nil {
		return slices.Clone(u.pending())
	}
	return nil
}

// Intent records that rows r of the unit are about to be sent. It is buffered like every record: the
// caller must Sync before sending, so that after a crash the range is known to be possibly in the
// target. Ranges already recorded as sent, or acknowledged, are not written again.
func (m *Manifest) Intent(f FileID, unit int, r Range) error {
	return m.recordRange(f, unit, r, "sent")
}

// Duplicate records that rows r of the unit were sent again while the fate of an earlier send was
// unknown: the target may hold them twice.
func (m *Manifest) Duplicate(f FileID, unit int, r Range) error {
	return m.recordRange(f, unit, r, "dup")
}

// recordRange records an intent (key "sent") or a duplicate ("dup").
func (m *Manifest) recordRange(f FileID, unit int, r Range, key string) error {
	if r.From == r.To && r.From >= 0 {
		return nil
	}
	if unit < 0 || r.From < 0 || r.To < r.From {
		return fmt.Errorf("manifest: %s unit %d: invalid row range [%d,%d)", f.Path, unit, r.From, r.To)
	}
	return m.recordUnit(f, unit, func(u *unitState, idx int, buf []byte) ([]byte, error) {
		if key == "sent" && u.intended(r) { // a duplicate counts every time
			return nil, nil
		}
		return appendRangeLine(buf, idx, unit, key, r), nil
	}, func(u *unitState) {
		if key == "sent" {
			u.sent(r)
			return
		}
		u.duplicated(r)
		m.dupRows += r.To - r.From
	})
}

// Unreported returns the rows recorded with Duplicate that no Reported call has counted: those of
// runs that were killed before they could print a summary.
func (m *Manifest) Unreported() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dupRows - m.reported
}

// Reported records that a run's summary counted n possibly duplicated rows.
func (m *Manifest) Reported(n int64) error {
	if n == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(); err != nil {
		return err
	}
	if _, err := m.w.WriteString(`{"reported":` + strconv.FormatInt(n, 10) + "}\n"); err != nil {
		return m.fail(fmt.Errorf("manifest %s: write: %w", m.path, err))
	}
	m.reported += n
	return nil
}

// UnitStatus is what the manifest says about one unit.
type UnitStatus struct {
	Unit int `json:"unit"`
	// Rows is the unit's row count, -1 when not known yet (the unit was never read to its end).
	Rows  int64   `json:"rows"`
	Acked []Range `json:"acked,omitempty"`
	// Pending are ranges sent but not acknowledged: the target may or may not hold them.
	Pending []Range `json:"pending,omitempty"`
	// Duplicated are ranges sent again while an earlier send's fate was unknown.
	Duplicated []Range `json:"possibly_duplicated,omitempty"`
	Done       bool    `json:"done"`
}

// FileStatus is what the manifest says about one source file.
type FileStatus struct {
	FileID
	// Failed is why the last run that read the file gave it up ("" if none did).
	Failed string       `json:"failed,omitempty"`
	Units  []UnitStatus `json:"units"`
}

// Status lists every file the manifest knows, in the order they were first recorded, with their
// units in order.
func (m *Manifest) Status() []FileStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	files := m.files.inOrder()
	out := make([]FileStatus, 0, len(files))
	for _, e := range files {
		fs := e.fs
		st := FileStatus{FileID: m.files.id(e.key), Failed: m.files.failed[fs]}
		for _, us := range fs.units {
			st.Units = append(st.Units, UnitStatus{
				Unit: us.unit, Rows: us.rows, Acked: slices.Clone(us.acked()), Pending: slices.Clone(us.pending()),
				Duplicated: slices.Clone(us.dup()), Done: us.done(),
			})
		}
		out = append(out, st)
	}
	return out
}

// Info is a manifest as Inspect reads it.
type Info struct {
	Path   string `json:"path"`
	Target string `json:"target,omitempty"` // from the header (WithLabel); empty for older manifests
	Table  string `json:"table,omitempty"`
	Epoch  int64  `json:"epoch"`
	// PossiblyDuplicatedRows sums every range recorded with Duplicate, across runs.
	PossiblyDuplicatedRows int64        `json:"possibly_duplicated_rows"`
	Files                  []FileStatus `json:"files"`
}

// Inspect reads the manifest at path without locking it (a running loader may hold it). A torn last
// line is ignored.
func Inspect(path string) (Info, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Info{}, fmt.Errorf("manifest %s: %w", path, err)
	}
	return InspectData(path, data)
}

// InspectData is Inspect of a manifest's bytes read elsewhere (from object storage); path names it.
func InspectData(path string, data []byte) (Info, error) {
	m := &Manifest{path: path}
	if _, _, _, err := m.replay(data); err != nil {
		return Info{}, err
	}
	return Info{Path: path, Target: m.target, Table: m.table, Epoch: m.epoch, PossiblyDuplicatedRows: m.dupRows, Files: m.Status()}, nil
}

// Acked returns the unit's acknowledged row ranges, sorted and merged (nil when none).
func (m *Manifest) Acked(f FileID, unit int) []Range {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u := m.lookup(f, unit); u != nil {
		if acked := u.acked(); len(acked) > 0 {
			return slices.Clone(acked)
		}
	}
	return nil
}

// UnitRowCount returns the unit's row count recorded by UnitRows, and whether it was recorded.
func (m *Manifest) UnitRowCount(f FileID, unit int) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u := m.lookup(f, unit); u != nil && u.rows >= 0 {
		return u.rows, true
	}
	return 0, false
}

// UnitDone reports whether every row of the unit is acknowledged (its row count must have been
// recorded with UnitRows).
func (m *Manifest) UnitDone(f FileID, unit int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.lookup(f, unit)
	return u != nil && u.done()
}

func (m *Manifest) lookup(f FileID, unit int) *unitState {
	fs := m.fileOf(f)
	if fs == nil {
		return nil
	}
	return fs.find(unit)
}

// fileOf returns f's state, or that of the same file recorded without a layout (format 1).
func (m *Manifest) fileOf(f FileID) *fileState {
	if fs := m.files.get(f); fs != nil || f.Layout == "" {
		return fs
	}
	legacy := f
	legacy.Layout = ""
	return m.files.get(legacy)
}

// Ack records that rows r of the unit are acknowledged. Records are buffered; Sync makes them durable.
// An empty range is a no-op; a negative or reversed one, or one past the unit's recorded row count,
// is an error. Ranges already recorded are not written again.
func (m *Manifest) Ack(f FileID, unit int, r Range) error {
	if r.From == r.To && r.From >= 0 {
		return nil
	}
	if unit < 0 || r.From < 0 || r.To < r.From {
		return fmt.Errorf("manifest: %s unit %d: invalid row range [%d,%d)", f.Path, unit, r.From, r.To)
	}
	return m.recordUnit(f, unit, func(u *unitState, idx int, buf []byte) ([]byte, error) {
		if u.rows >= 0 && r.To > u.rows {
			return nil, fmt.Errorf("manifest: %s unit %d: rows [%d,%d) past the unit's %d rows", f.Path, unit, r.From, r.To, u.rows)
		}
		if covered(u.acked(), r) {
			return nil, nil
		}
		return appendAckLine(buf, idx, unit, r), nil
	}, func(u *unitState) { u.ack(r) })
}

// UnitRows records the unit's total row count, once the reader has seen all of it. Recording the same
// count again is a no-op; a different count, or one below rows already acknowledged, is an error.
func (m *Manifest) UnitRows(f FileID, unit int, rows int64) error {
	if unit < 0 || rows < 0 {
		return fmt.Errorf("manifest: %s unit %d: invalid row count %d", f.Path, unit, rows)
	}
	if err := m.clearFailed(f); err != nil {
		return err
	}
	return m.recordUnit(f, unit, func(u *unitState, idx int, buf []byte) ([]byte, error) {
		switch {
		case u.rows == rows:
			return nil, nil
		case u.rows >= 0:
			return nil, fmt.Errorf("manifest: %s unit %d: row count %d, but %d was recorded before", f.Path, unit, rows, u.rows)
		}
		if acked := u.acked(); len(acked) > 0 && acked[len(acked)-1].To > rows {
			return nil, fmt.Errorf("manifest: %s unit %d: row count %d, but rows up to %d were acknowledged", f.Path, unit, rows, acked[len(acked)-1].To)
		}
		return appendRowsLine(buf, idx, unit, rows), nil
	}, func(u *unitState) { u.setRows(rows) })
}

// clearFailed forgets a file's failure once a run finished one of its units.
func (m *Manifest) clearFailed(f FileID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs := m.fileOf(f)
	if fs == nil || m.files.failed[fs] == "" {
		return nil
	}
	if err := m.usable(); err != nil {
		return err
	}
	if err := m.writeLocked(f, fs, false, appendFailedLine(nil, fs.idx, "")); err != nil {
		return err
	}
	m.files.setFailed(fs, "")
	return nil
}

// recordUnit records something about a unit of f, under the lock and only while the manifest is
// usable: line returns the record's line for the file's index idx, appended to buf, or an error
// when the unit's state contradicts it, or a nil line when the state already holds it (nothing is
// written). Once the line is written, apply adds the record to the unit's state.
func (m *Manifest) recordUnit(f FileID, unit int, line func(u *unitState, idx int, buf []byte) ([]byte, error), apply func(u *unitState)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(); err != nil {
		return err
	}
	fs, isNew := m.fileLocked(f)
	u := fs.unit(unit)
	var buf [96]byte
	b, err := line(u, fs.idx, buf[:0])
	if err != nil || b == nil {
		return err
	}
	if err := m.writeLocked(f, fs, isNew, b); err != nil {
		return err
	}
	apply(u)
	return nil
}

// fileLocked returns f's state or, when the manifest has none, a new one for f (isNew), which
// writeLocked adds once it has written f's "file" line.
func (m *Manifest) fileLocked(f FileID) (fs *fileState, isNew bool) {
	if fs := m.fileOf(f); fs != nil {
		return fs, false
	}
	return &fileState{idx: m.nfiles}, true
}

// writeLocked buffers a record line about f. For a new state (from fileLocked) it writes f's "file"
// line first and adds the state to the manifest.
func (m *Manifest) writeLocked(f FileID, fs *fileState, isNew bool, line []byte) error {
	if isNew {
		line = append(appendFileLine(nil, fs.idx, f), line...)
	}
	if _, err := m.w.Write(line); err != nil {
		return m.fail(fmt.Errorf("manifest %s: write: %w", m.path, err))
	}
	if isNew {
		m.files.add(f, fs)
		m.nfiles++
	}
	return nil
}

func (m *Manifest) usable() error {
	if m.closed {
		return fmt.Errorf("manifest %s: %w", m.path, ErrClosed)
	}
	return m.err
}

// fail makes err sticky: after a failed write or fsync nothing more is written (the state of the file
// is unknown).
func (m *Manifest) fail(err error) error {
	if m.err == nil {
		m.err = err
	}
	return m.err
}

// Sync writes and fsyncs buffered records. Concurrent calls share fsyncs: a call returns once an fsync
// that started after its records were written has finished.
func (m *Manifest) Sync() error {
	m.mu.Lock()
	if err := m.usable(); err != nil {
		m.mu.Unlock()
		return err
	}
	if m.w.Buffered() > 0 {
		if err := m.w.Flush(); err != nil {
			err = m.fail(fmt.Errorf("manifest %s: write: %w", m.path, err))
			m.mu.Unlock()
			return err
		}
		m.written++
	}
	mine := m.written
	m.mu.Unlock()

	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	if m.synced >= mine {
		return nil
	}
	m.mu.Lock()
	target, f := m.written, m.f
	tail := m.takeTail()
	err := m.usable()
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		m.mu.Lock()
		err = m.fail(fmt.Errorf("manifest %s: fsync: %w", m.path, err))
		m.mu.Unlock()
		return err
	}
	if tail != nil {
		if err := m.replica.Append(tail); err != nil {
			m.mu.Lock()
			err = m.fail(fmt.Errorf("manifest %s: replica: %w", m.path, err))
			m.mu.Unlock()
			return err
		}
	}
	m.synced = target
	return nil
}

// Close syncs and releases the manifest. Closing twice is a no-op.
func (m *Manifest) Close() error {
	err := m.Sync() // ErrClosed when closed already, which the check below turns into a no-op
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if cerr := m.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("manifest %s: close: %w", m.path, cerr)
	}
	m.lock.Close() // releases the lock
	return err
}
