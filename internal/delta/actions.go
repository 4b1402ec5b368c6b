package delta

import (
	"fmt"
	"slices"
)

// Action is one line of a commit file: exactly one of its fields is set.
type Action struct {
	CommitInfo *CommitInfo `json:"commitInfo,omitempty"`
	Protocol   *Protocol   `json:"protocol,omitempty"`
	MetaData   *MetaData   `json:"metaData,omitempty"`
	Add        *Add        `json:"add,omitempty"`
	Remove     *Remove     `json:"remove,omitempty"`
	Txn        *Txn        `json:"txn,omitempty"`
}

// Protocol is the protocol action. Reader and writer features are set only for reader version 3 and
// writer version 7 (table features).
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// FeatureTimestampNTZ is the table feature a table with TIMESTAMP_NTZ columns needs.
const FeatureTimestampNTZ = "timestampNtz"

// ProtocolFor returns the protocol a table needs: reader 1 / writer 2, or reader 3 / writer 7 with the
// timestampNtz feature when the schema uses TIMESTAMP_NTZ.
func ProtocolFor(usesTimestampNTZ bool) Protocol {
	if usesTimestampNTZ {
		return Protocol{
			MinReaderVersion: 3, MinWriterVersion: 7,
			ReaderFeatures: []string{FeatureTimestampNTZ}, WriterFeatures: []string{FeatureTimestampNTZ},
		}
	}
	return Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
}

// HasFeature reports whether the protocol lists the feature for both readers and writers.
func (p Protocol) HasFeature(name string) bool {
	return slices.Contains(p.ReaderFeatures, name) && slices.Contains(p.WriterFeatures, name)
}

// Format is metaData.format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// MetaData is the metaData action.
type MetaData struct {
	ID               string            `json:"id"`
	Name             *string           `json:"name,omitempty"`
	Description      *string           `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// NewMetaData returns a metaData action for an unpartitioned Parquet table.
func NewMetaData(id, schemaString string, createdMillis int64) *MetaData {
	return &MetaData{
		ID:               id,
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     schemaString,
		PartitionColumns: []string{},
		Configuration:    map[string]string{},
		CreatedTime:      &createdMillis,
	}
}

// Add is the add action.
type Add struct {
	Path             string            `json:"path"`
	PartitionValues  map[string]string `json:"partitionValues"`
	Size             int64             `json:"size"`
	ModificationTime int64             `json:"modificationTime"`
	DataChange       bool              `json:"dataChange"`
	Stats            string            `json:"stats,omitempty"`
}

// Remove is the remove action.
type Remove struct {
	Path                 string            `json:"path"`
	DeletionTimestamp    *int64            `json:"deletionTimestamp,omitempty"`
	DataChange           bool              `json:"dataChange"`
	ExtendedFileMetadata bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]string `json:"partitionValues,omitempty"`
	Size                 *int64            `json:"size,omitempty"`
}

// Txn is the txn (SetTransaction) action.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// CommitInfo is the commitInfo action. Delta gives it no fixed schema; these are the fields Delta
// writers commonly write.
type CommitInfo struct {
	Timestamp           int64             `json:"timestamp"`
	Operation           string            `json:"operation"`
	OperationParameters map[string]any    `json:"operationParameters"`
	ReadVersion         *int64            `json:"readVersion,omitempty"`
	IsolationLevel      string            `json:"isolationLevel,omitempty"`
	IsBlindAppend       bool              `json:"isBlindAppend"`
	OperationMetrics    map[string]string `json:"operationMetrics,omitempty"`
	EngineInfo          string            `json:"engineInfo,omitempty"`
	TxnID               string            `json:"txnId,omitempty"`
}

// Stats is the JSON an add action carries in its stats string. MinValues, MaxValues and NullCount
// mirror the table's columns: nested structs are nested objects.
type Stats struct {
	NumRecords int64          `json:"numRecords"`
	MinValues  map[string]any `json:"minValues,omitempty"`
	MaxValues  map[string]any `json:"maxValues,omitempty"`
	NullCount  map[string]any `json:"nullCount,omitempty"`
}

// Features this package can honour.
var (
	readableFeatures = map[string]bool{FeatureTimestampNTZ: true}
	writableFeatures = map[string]bool{FeatureTimestampNTZ: true, "appendOnly": true}
)

// CheckReadable returns an error naming what a reader of this package cannot honour: a reader version
// above 3, an unknown reader feature, or column mapping.
func CheckReadable(p *Protocol, m *MetaData) error {
	if mode := m.Configuration["delta.columnMapping.mode"]; mode != "" && mode != "none" {
		return fmt.Errorf("column mapping mode %q is not supported", mode)
	}
	switch {
	case p.MinReaderVersion <= 2:
		return nil
	case p.MinReaderVersion == 3:
		for _, f := range p.ReaderFeatures {
			if !readableFeatures[f] {
				return fmt.Errorf("reader feature %q is not supported", f)
			}
		}
		return nil
	}
	return fmt.Errorf("reader version %d is not supported", p.MinReaderVersion)
}

// CheckWritable returns an error naming what a writer of this package cannot honour: writer versions
// 3 to 6 (constraints, generated and identity columns, column mapping, ...), unknown writer features,
// and versions above 7.
func CheckWritable(p *Protocol) error {
	switch {
	case p.MinWriterVersion <= 2:
		return nil
	case p.MinWriterVersion == 7:
		for _, f := range p.WriterFeatures {
			if !writableFeatures[f] {
				return fmt.Errorf("writer feature %q is not supported", f)
			}
		}
		return nil
	}
	return fmt.Errorf("writer version %d is not supported", p.MinWriterVersion)
}

// AppendOnly reports whether the table's configuration forbids removing data.
func (m *MetaData) AppendOnly() bool { return m.Configuration["delta.appendOnly"] == "true" }
