// Package tableschema describes the columns of a target table in Databricks SQL terms and maps them to
// and from Arrow.
//
// A table's schema is a list of [Field]s whose [Type]s are the Databricks SQL types a Delta table can
// hold: TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, BOOLEAN, STRING, BINARY, DATE, TIMESTAMP,
// TIMESTAMP_NTZ, DECIMAL(p,s), ARRAY<t>, MAP<k,v> and STRUCT<...>. The package
//
//   - parses the column lists users type (`id BIGINT NOT NULL, tags ARRAY<STRING>`), see [ParseColumns];
//   - reads and writes the Delta protocol's JSON schema string, see [ParseDeltaSchema] and [Schema.DeltaJSON];
//   - gives the canonical Arrow schema a Zerobus endpoint expects for a table, see [Schema.Arrow];
//   - derives a table schema from an Arrow schema, see [FromArrow].
//   - reads DECIMAL text exactly, never rounding, for every package that takes decimals as text
//     (CSV files, text casts, the warehouse's canonical text), see [ParseDecimal] and [AppendDecimal].
//
// # Canonical Arrow mapping
//
// The mapping follows Databricks' Zerobus Arrow Flight table (see the project's
// reference/zerobus-arrow-flight.md, section 5):
//
//	Databricks SQL   Arrow
//	TINYINT          Int8
//	SMALLINT         Int16
//	INT              Int32
//	BIGINT           Int64
//	FLOAT            Float32
//	DOUBLE           Float64
//	BOOLEAN          Boolean
//	STRING           LargeUtf8
//	BINARY           LargeBinary
//	DECIMAL(p,s)     LargeUtf8 holding the value as text, e.g. "19.99"
//	DATE             Date32
//	TIMESTAMP        Timestamp(Microsecond, "UTC")
//	TIMESTAMP_NTZ    Timestamp(Microsecond)
//	ARRAY<t>         List, element field "item"
//	MAP<k,v>         Map, entries field "entries" with children "key"/"value" named "keys"/"values"
//	STRUCT<...>      Struct
//
// Array elements, map values and struct fields carry their own nullability, which must match on the
// Arrow side too. Map keys are never null.
//
// All values are immutable once built; a Schema may be shared between goroutines.
package tableschema
