// Package sinkapi is the small contract between the embedded sink's Flight server and the loader's
// client for what Flight itself does not say: the custom actions the sink serves and their JSON
// bodies, and the ticket form of DoGet. A real Zerobus endpoint answers these actions Unimplemented,
// which clients must treat as "the target cannot do this".
package sinkapi

// Custom DoAction types served by the embedded sink. Each takes the table name ("catalog.schema.table")
// as its body, except ActionFaults.
const (
	// ActionCount returns a CountResult.
	ActionCount = "loader.count"
	// ActionFlush commits every acknowledged row of the table now, then returns a CountResult.
	ActionFlush = "loader.flush"
	// ActionDescribe returns a TableInfo.
	ActionDescribe = "loader.describe"
	// ActionFaults takes a JSON-encoded fault set (see sink.Faults) and installs it; tests use it to
	// steer a sink running in another process. It returns the installed set.
	ActionFaults = "loader.faults"
	// ActionUnitIDs asks whether the sink deduplicates by unit id (see UnitMeta). It returns a
	// UnitIDsResult; a server that does not know it answers Unimplemented, and the client then sends
	// no unit ids.
	ActionUnitIDs = "loader.unit-ids"
)

// UnitIDsResult is the body of an ActionUnitIDs result.
type UnitIDsResult struct {
	Table string `json:"table"`
	// UnitIDs is true when the sink records the unit ids of data frames with their rows and
	// acknowledges a frame whose rows it already holds without storing them again.
	UnitIDs bool `json:"unit_ids"`
}

// UnitMeta is what a data frame's app_metadata JSON carries, next to its offset_id, once the sink
// accepted ActionUnitIDs: the frame holds rows [From, To) of the source unit Unit. A unit id is
// stable across runs of the same load (it names the source file's version, the unit and the
// manifest's epoch), so the sink can tell a range it already holds.
type UnitMeta struct {
	Unit string `json:"unit,omitempty"`
	From int64  `json:"from,omitempty"`
	To   int64  `json:"to,omitempty"`
}

// CountResult is the body of ActionCount and ActionFlush results.
type CountResult struct {
	Table string `json:"table"`
	// Committed is the number of rows visible in the Delta table.
	Committed int64 `json:"committed"`
	// Acknowledged is the number of rows acknowledged (durable in the write-ahead log) but not yet
	// committed to the table.
	Acknowledged int64 `json:"acknowledged"`
	// Version is the Delta table version Committed was read at.
	Version int64 `json:"version"`
}

// TableInfo is the body of an ActionDescribe result.
type TableInfo struct {
	Table string `json:"table"`
	// ID is the Delta table id (metaData.id); it changes when a table is dropped and created again.
	ID string `json:"id"`
	// Columns is the table's column list in Databricks SQL, as tableschema.ParseColumns reads it.
	Columns string `json:"columns"`
	// DeltaSchema is the Delta schemaString.
	DeltaSchema string `json:"delta_schema"`
}
