// Package zerobus holds the wire contract of Databricks Zerobus Ingest's Arrow Flight endpoint, shared
// by the loader's client and the embedded sink: header names, the JSON carried in app_metadata, the
// schema rules and the error shapes. Everything here follows the project's
// reference/zerobus-arrow-flight.md; where the reference says a detail is unknown, the choice made is
// written beside it.
//
// The package does no I/O and keeps no state; every function is safe for concurrent use.
package zerobus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// gRPC metadata keys on a DoPut call.
const (
	// HeaderTableName carries the target table as "catalog.schema.table".
	HeaderTableName = "x-databricks-zerobus-table-name"
	// HeaderAuthorization carries "Bearer <token>".
	HeaderAuthorization = "authorization"
)

// MaxMessageBytes is the server's limit on one gRPC message ("10MB", reference section 4). We read it
// as 10 MiB, the larger reading; clients keep frames far below it (the SDKs split at 2 MiB, as
// partitioner.DefaultMaxFrameBytes does).
const MaxMessageBytes = 10 << 20

// ReadyOffset is the ack_up_to_offset of the READY message that ends a successful setup.
const ReadyOffset = -1

// ErrProtocol is the base of errors for app_metadata that breaks the contract.
var ErrProtocol = errors.New("zerobus protocol violation")

// FrameMetadata returns the app_metadata of data frame number offset: {"offset_id":N}.
func FrameMetadata(offset int64) []byte {
	b := make([]byte, 0, 24)
	b = append(b, `{"offset_id":`...)
	b = strconv.AppendInt(b, offset, 10)
	return append(b, '}')
}

// ParseFrameMetadata reads the offset_id of a data frame's app_metadata. It must be a JSON object with
// a non-negative integer offset_id; other keys are ignored.
func ParseFrameMetadata(b []byte) (int64, error) {
	var m struct {
		OffsetID json.RawMessage `json:"offset_id"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, fmt.Errorf("%w: data frame without app_metadata, want {\"offset_id\":N}", ErrProtocol)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, fmt.Errorf("%w: data frame app_metadata is not a JSON object: %w", ErrProtocol, err)
	}
	if isNull(m.OffsetID) {
		return 0, fmt.Errorf("%w: data frame app_metadata lacks offset_id", ErrProtocol)
	}
	n, err := strconv.ParseInt(string(m.OffsetID), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: offset_id %s is not a non-negative integer", ErrProtocol, m.OffsetID)
	}
	return n, nil
}

// Ack is the server's cumulative acknowledgement on a DoPut, carried as JSON in PutResult.app_metadata.
type Ack struct {
	// Offset is the highest frame offset made durable on this DoPut; ReadyOffset in READY. The
	// client uses it for diagnostics only.
	Offset int64
	// Records is the number of rows made durable on this DoPut so far: the authoritative watermark.
	Records int64
	// CloseStreamAfterMs, when set, asks the client to rotate to a new DoPut within that many
	// milliseconds.
	CloseStreamAfterMs *uint64
}

// Ready returns the READY ack: {"ack_up_to_offset":-1,"ack_up_to_records":0}.
func Ready() Ack { return Ack{Offset: ReadyOffset} }

// IsReady reports whether a is the READY sentinel.
func (a Ack) IsReady() bool {
	return a.Offset == ReadyOffset && a.Records == 0 && a.CloseStreamAfterMs == nil
}

// Marshal encodes the ack as the wire JSON.
func (a Ack) Marshal() []byte {
	b := make([]byte, 0, 80)
	b = append(b, `{"ack_up_to_offset":`...)
	b = strconv.AppendInt(b, a.Offset, 10)
	b = append(b, `,"ack_up_to_records":`...)
	b = strconv.AppendInt(b, a.Records, 10)
	if a.CloseStreamAfterMs != nil {
		b = append(b, `,"close_stream_duration_ms":`...)
		b = strconv.AppendUint(b, *a.CloseStreamAfterMs, 10)
	}
	return append(b, '}')
}

// ParseAck decodes an ack. ack_up_to_offset and ack_up_to_records are required integers (records
// non-negative, offset >= -1); close_stream_duration_ms is optional and an explicit null means absent.
// Unknown keys are ignored, as the reference says the format is additive.
func ParseAck(b []byte) (Ack, error) {
	var m struct {
		Offset  json.RawMessage `json:"ack_up_to_offset"`
		Records json.RawMessage `json:"ack_up_to_records"`
		Close   json.RawMessage `json:"close_stream_duration_ms"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Ack{}, fmt.Errorf("%w: ack %q is not a JSON object: %w", ErrProtocol, clip(b), err)
	}
	if isNull(m.Offset) || isNull(m.Records) {
		return Ack{}, fmt.Errorf("%w: ack %q lacks ack_up_to_offset or ack_up_to_records", ErrProtocol, clip(b))
	}
	var a Ack
	var err error
	if a.Offset, err = strconv.ParseInt(string(m.Offset), 10, 64); err != nil || a.Offset < ReadyOffset {
		return Ack{}, fmt.Errorf("%w: ack_up_to_offset %s is not an integer >= -1", ErrProtocol, m.Offset)
	}
	if a.Records, err = strconv.ParseInt(string(m.Records), 10, 64); err != nil || a.Records < 0 {
		return Ack{}, fmt.Errorf("%w: ack_up_to_records %s is not a non-negative integer", ErrProtocol, m.Records)
	}
	if !isNull(m.Close) {
		ms, err := strconv.ParseUint(string(m.Close), 10, 64)
		if err != nil {
			return Ack{}, fmt.Errorf("%w: close_stream_duration_ms %s is not a non-negative integer", ErrProtocol, m.Close)
		}
		a.CloseStreamAfterMs = &ms
	}
	return a, nil
}

// isNull reports whether a JSON value is absent or null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func clip(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
