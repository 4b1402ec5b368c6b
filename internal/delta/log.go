package delta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/loaderproject/loader/internal/fsutil"
)

// LogDirName is the name of a table's log directory.
const LogDirName = "_delta_log"

// Errors callers test with errors.Is.
var (
	// ErrVersionExists means another writer created the version first.
	ErrVersionExists = errors.New("delta: version already exists")
	// ErrCheckpointUnsupported means the log has a checkpoint, which this package cannot read.
	ErrCheckpointUnsupported = errors.New("delta: checkpoints are not supported")
	// ErrNotDurable means a commit file was created (the version is visible) but the log directory
	// could not be fsync'd afterwards.
	ErrNotDurable = errors.New("delta: version created but not synced")
	// ErrCorrupt is the base of errors for a commit file that is not valid Delta JSON.
	ErrCorrupt = errors.New("delta: malformed commit file")
)

// VersionFileName returns the name of a commit file: the version as 20 digits plus ".json".
func VersionFileName(version int64) string {
	return fmt.Sprintf("%020d.json", version)
}

// ReadVersion reads and parses one commit file. A missing file gives an error wrapping fs.ErrNotExist;
// a malformed one an error wrapping ErrCorrupt that names the file and line.
func ReadVersion(logDir string, version int64) ([]Action, error) {
	path := filepath.Join(logDir, VersionFileName(version))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCommit(path, data)
}

// ParseCommit parses the content of a commit file; name is used in errors. Every non-empty line must
// be a JSON object with exactly one known or unknown action (unknown actions are skipped, as the
// protocol asks readers to do).
func ParseCommit(name string, data []byte) ([]Action, error) {
	actions := make([]Action, 0, bytes.Count(data, []byte{'\n'})+1)
	line := 0
	for len(data) > 0 {
		line++
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		var a Action
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %w", ErrCorrupt, name, line, err)
		}
		n := 0
		for _, set := range []bool{a.CommitInfo != nil, a.Protocol != nil, a.MetaData != nil, a.Add != nil, a.Remove != nil, a.Txn != nil} {
			if set {
				n++
			}
		}
		if n > 1 {
			return nil, fmt.Errorf("%w: %s line %d: %d actions on one line", ErrCorrupt, name, line, n)
		}
		if n == 0 {
			if raw[0] != '{' {
				return nil, fmt.Errorf("%w: %s line %d: not a JSON object", ErrCorrupt, name, line)
			}
			continue // an action this package does not know (cdc, domainMetadata, ...)
		}
		if err := a.check(); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %w", ErrCorrupt, name, line, err)
		}
		actions = append(actions, a)
	}
	return actions, nil
}

func (a *Action) check() error {
	switch {
	case a.Add != nil:
		if a.Add.Path == "" {
			return errors.New("add without a path")
		}
		if a.Add.Size < 0 {
			return errors.New("add with a negative size")
		}
	case a.Remove != nil:
		if a.Remove.Path == "" {
			return errors.New("remove without a path")
		}
	case a.Txn != nil:
		if a.Txn.AppID == "" {
			return errors.New("txn without an appId")
		}
	case a.MetaData != nil:
		if a.MetaData.SchemaString == "" {
			return errors.New("metaData without a schemaString")
		}
		if a.MetaData.Format.Provider != "" && a.MetaData.Format.Provider != "parquet" {
			return fmt.Errorf("metaData format %q is not parquet", a.MetaData.Format.Provider)
		}
	case a.Protocol != nil:
		if a.Protocol.MinReaderVersion < 1 || a.Protocol.MinWriterVersion < 1 {
			return errors.New("protocol without reader or writer version")
		}
	}
	return nil
}

// EncodeCommit renders actions as a commit file: one JSON object per line.
func EncodeCommit(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range actions {
		if err := enc.Encode(&actions[i]); err != nil { // Encode appends '\n'
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// WriteVersion durably creates the commit file for version with content data: it writes a temporary
// file in logDir, fsyncs it, hard-links it to the version's name (which fails if that name exists),
// removes the temporary name and fsyncs logDir. If the version exists it returns an error wrapping
// ErrVersionExists and leaves the log unchanged. An error wrapping ErrNotDurable means the version
// was created; any other error means it was not.
func WriteVersion(logDir string, version int64, data []byte) error {
	tmp := filepath.Join(logDir, "."+VersionFileName(version)+"."+uuid.NewString()+".tmp")
	if err := writeFileSync(tmp, data); err != nil {
		return fmt.Errorf("delta: write %s: %w", tmp, err)
	}
	defer os.Remove(tmp)
	final := filepath.Join(logDir, VersionFileName(version))
	if err := os.Link(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrVersionExists, final)
		}
		return fmt.Errorf("delta: create %s: %w", final, err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("%w: %s: remove %s: %w", ErrNotDurable, final, tmp, err)
	}
	if err := fsutil.SyncDir(logDir); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotDurable, final, err)
	}
	return nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CheckNoCheckpoint returns an error wrapping ErrCheckpointUnsupported if logDir holds a
// _last_checkpoint file or a checkpoint.
func CheckNoCheckpoint(logDir string) error {
	_, err := os.Stat(filepath.Join(logDir, "_last_checkpoint"))
	switch {
	case err == nil:
		return fmt.Errorf("%w: %s has a _last_checkpoint file", ErrCheckpointUnsupported, logDir)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return err
	}
}
