package sink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/loaderproject/loader/internal/fsutil"
)

// The payload of a write-ahead log record:
//
//	[0]      format version (1)
//	[1:8]    zero
//	[8:16]   rows        int64 LE
//	[16:20]  meta length uint32 LE   (empty, or the JSON unit id and kept ranges of a tagged frame: units.go)
//	[20:24]  schema length uint32 LE (the stream's IPC Schema message flatbuffer, as received)
//	[24:28]  header length uint32 LE (the frame's IPC RecordBatch message flatbuffer, as received)
//	[28:32]  zero
//	[32:40]  body length uint64 LE   (the frame's body, as received: compressed buffers stay so)
//	then meta, schema, header and body.
const (
	recordVersion = 1
	recordPrefix  = 40
)

var errBadRecord = errors.New("malformed write-ahead log record")

// walRecord is a decoded log record; its slices alias the payload.
type walRecord struct {
	rows   int64
	meta   []byte
	schema []byte
	header []byte
	body   []byte
}

// recordParts returns the pieces whose concatenation is the payload, without copying the frame.
func recordParts(rows int64, meta, schema, header, body []byte) [][]byte {
	p := make([]byte, recordPrefix)
	p[0] = recordVersion
	binary.LittleEndian.PutUint64(p[8:16], uint64(rows))
	binary.LittleEndian.PutUint32(p[16:20], uint32(len(meta)))
	binary.LittleEndian.PutUint32(p[20:24], uint32(len(schema)))
	binary.LittleEndian.PutUint32(p[24:28], uint32(len(header)))
	binary.LittleEndian.PutUint64(p[32:40], uint64(len(body)))
	return [][]byte{p, meta, schema, header, body}
}

func parseRecord(payload []byte) (walRecord, error) {
	if len(payload) < recordPrefix {
		return walRecord{}, fmt.Errorf("%w: %d bytes", errBadRecord, len(payload))
	}
	if payload[0] != recordVersion {
		return walRecord{}, fmt.Errorf("%w: format version %d, want %d", errBadRecord, payload[0], recordVersion)
	}
	r := walRecord{rows: int64(binary.LittleEndian.Uint64(payload[8:16]))}
	lens := []uint64{
		uint64(binary.LittleEndian.Uint32(payload[16:20])),
		uint64(binary.LittleEndian.Uint32(payload[20:24])),
		uint64(binary.LittleEndian.Uint32(payload[24:28])),
		binary.LittleEndian.Uint64(payload[32:40]),
	}
	rest := payload[recordPrefix:]
	var total uint64
	for _, l := range lens {
		total += l
		if l > uint64(len(rest)) || total > uint64(len(rest)) {
			return walRecord{}, fmt.Errorf("%w: section lengths exceed the %d-byte payload", errBadRecord, len(payload))
		}
	}
	if total != uint64(len(rest)) {
		return walRecord{}, fmt.Errorf("%w: %d trailing bytes", errBadRecord, uint64(len(rest))-total)
	}
	parts := make([][]byte, 4)
	for i, l := range lens {
		parts[i], rest = rest[:l:l], rest[l:]
	}
	r.meta, r.schema, r.header, r.body = parts[0], parts[1], parts[2], parts[3]
	if r.rows < 0 {
		return walRecord{}, fmt.Errorf("%w: negative row count", errBadRecord)
	}
	return r, nil
}

// recordRows reads only the row count of a payload.
func recordRows(payload []byte) (int64, error) {
	r, err := parseRecord(payload)
	return r.rows, err
}

// writeIPCStream writes the record as a self-contained Arrow IPC stream (schema, batch, end
// marker), the form rejected records are kept in.
func writeIPCStream(w io.Writer, r walRecord) error {
	for _, m := range []struct{ meta, body []byte }{{r.schema, nil}, {r.header, r.body}} {
		padded := (len(m.meta) + 7) &^ 7
		var pre [8]byte
		binary.LittleEndian.PutUint32(pre[0:4], 0xFFFFFFFF)
		binary.LittleEndian.PutUint32(pre[4:8], uint32(padded))
		if _, err := w.Write(pre[:]); err != nil {
			return err
		}
		if _, err := w.Write(m.meta); err != nil {
			return err
		}
		if _, err := w.Write(make([]byte, padded-len(m.meta))); err != nil {
			return err
		}
		if _, err := w.Write(m.body); err != nil {
			return err
		}
	}
	_, err := w.Write([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0})
	return err
}

// saveRejected durably keeps a record the table can no longer take as
// <table>/_sink/rejected/<seq>.arrows: once it returns, the record may leave the log.
func saveRejected(tableDir string, seq uint64, r walRecord) (string, error) {
	dir := filepath.Join(tableDir, "_sink", "rejected")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%020d.arrows", seq))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := writeIPCStream(f, r); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	// The file's entry in rejected, and rejected's in _sink (which the log's creation made durable).
	if err := fsutil.SyncDir(dir); err != nil {
		return "", err
	}
	return path, fsutil.SyncDir(filepath.Dir(dir))
}

func walDir(tableDir string) string { return filepath.Join(tableDir, "_sink", "wal") }
