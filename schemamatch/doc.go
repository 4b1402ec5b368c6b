// Package schemamatch reconciles a source file's Arrow schema with a target table: it matches columns
// by name, reorders them to the table, applies the safe casts real files need to reach the table's
// canonical Arrow types, fills omitted nullable columns with nulls, and reports everything that does
// not fit in one error.
//
// A Plan is built once per distinct source schema and applied to every batch; building does the
// matching and type checks, applying only casts. A Plan is safe for concurrent use.
//
// # Matching
//
// Source columns match table columns by exact name, or ignoring ASCII case with WithCaseInsensitive;
// struct fields match the same way, level by level. The output follows the table's column order.
// A table column the source lacks is filled with nulls when it is nullable and is a problem when it
// is NOT NULL. A source column the table lacks is a problem, unless WithRescueColumn names a STRING
// column that receives it as JSON. Two source columns matching one table column is a problem.
//
// # The table of rules
//
// Each row is a source Arrow type, the table types it may load into, and what Apply does. Every
// other pair is refused with the reason in the last part of this table. "exact" means every value
// converts without loss; "checked" means a value that cannot convert is a *ValueError naming the
// column and row (or goes to the rescue column). The canonical type of each table type is
// tableschema's mapping (STRING and DECIMAL are large_utf8, TIMESTAMP is timestamp[us, UTC],
// TIMESTAMP_NTZ is timestamp[us], ARRAY is list<item>, MAP is map<key, value>).
//
//	source                            table                   Apply
//	the canonical type itself         its column              shared, no copy (DECIMAL text is still checked and normalised)
//	int8                              SMALLINT INT BIGINT     widened, exact
//	int16                             INT BIGINT              widened, exact
//	int32                             BIGINT                  widened, exact
//	uint8, uint16, uint32             SMALLINT, INT, BIGINT   widened to the next signed type (or wider), exact
//	int8 int16 uint8 uint16           FLOAT DOUBLE            exact (a float32 holds every 16-bit integer)
//	int32 uint32                      DOUBLE                  exact (a float64 holds every 32-bit integer)
//	float16                           FLOAT DOUBLE            exact
//	float32                           DOUBLE                  exact
//	utf8                              STRING                  offsets widened to 64 bits, character data shared
//	string_view                       STRING                  copied
//	binary                            BINARY                  offsets widened, data shared
//	binary_view                       BINARY                  copied
//	fixed_size_binary(n)              BINARY                  offsets made, data shared
//	binary kinds (WithBinaryAsString) STRING                  each value checked to be UTF-8, bytes shared
//	date64                            DATE                    days = floor(ms / 86400000): a time of day is dropped
//	date32, date64                    TIMESTAMP_NTZ           midnight, checked for overflow
//	timestamp[s|ms|us|ns], any zone   TIMESTAMP               to microseconds UTC; a zone-less source is read as UTC
//	timestamp[s|ms|us|ns], any zone   TIMESTAMP_NTZ           to microseconds; a zoned source keeps its UTC wall time
//	                                                          s and ms are multiplied (checked for overflow); ns is
//	                                                          truncated toward the past (floor), as Databricks does;
//	                                                          same unit: the zone is relabelled, values shared
//	decimal32/64/128/256(p,s)         DECIMAL(P,S)            text with exactly S fractional digits, as
//	                                                          decimal128.Num.ToString(S) renders it; needs s <= S
//	                                                          and p-s <= P-S; a value beyond its own declared
//	                                                          precision is checked
//	int8..int64, uint8..uint32        DECIMAL(P,S)            text, when P-S holds the type's digits (3, 5, 10, 19)
//	uint64                            DECIMAL(P,S), P-S >= 20 text, exact: "18446744073709551615" (DECIMAL(20,0) is
//	                                                          what tableschema.FromArrow makes of uint64, as Spark
//	                                                          reads Parquet UINT_64)
//	utf8, large_utf8, string_view     DECIMAL(P,S)            parsed (sign, digits, point, exponent, spaces around),
//	                                                          checked to fit, normalised to S digits; extra
//	                                                          fractional digits must be zeros: never rounded
//	dictionary<_, v>                  what v loads into       unpacked to its values, then v's rule
//	extension<storage>                what storage loads into unwrapped to its storage, then its rule
//	null                              any nullable column     an all-null array of the column's type
//	list<e>, large_list<e>,           ARRAY<t>                list with child "item" (a rename costs no copy), e by
//	fixed_size_list<e>                                        t's rule; large_list offsets checked to fit 32 bits
//	map<k, v>                         MAP<K, V>               keys and values by their rules, canonical names,
//	                                                          no copy for a rename
//	struct<...>                       STRUCT<...>             fields by name, reordered, nullable ones filled
//
// Nullability: a nullable source into a NOT NULL column or field is allowed when planning and
// checked on every batch (a *ValueError names the column and the first null row); a null under a
// null parent (a struct field of a null struct, the elements of a null list) does not count. The
// output's nullability is always the table's, so every Plan.Schema() passes zerobus.ValidateSchema.
//
// Refused pairs, each reported with its reason:
//
//	narrowing                  int16 -> TINYINT, int64 -> INT, uint8 -> TINYINT, uint32 -> INT, float64 -> FLOAT
//	uint64 into an integer     no signed type holds every uint64: use DECIMAL(20,0)
//	precision loss             int32/uint32 -> FLOAT, int64/uint64 -> DOUBLE (Databricks treats these as unsafe;
//	                           only integers the float's mantissa holds convert), decimal -> FLOAT/DOUBLE,
//	                           float -> DECIMAL, decimal(p,s) -> DECIMAL(P,S) with s > S or p-s > P-S,
//	                           an integer type -> DECIMAL without room for its digits (uint64 -> DECIMAL(19,0),
//	                           DECIMAL(38,19): fewer than 20 integer digits)
//	no Delta type              time32, time64, duration, intervals, unions: "no Delta type for time64[us]"
//	unsupported encodings      list_view, large_list_view, run-end encoded: package readers decodes them to their
//	                           plain types (list, large_list, the values' type) before a plan sees them; a
//	                           batch built elsewhere must be decoded first
//	no implicit cast           integers -> STRING/BINARY/BOOLEAN/DATE/TIMESTAMP, utf8 -> INT and the like,
//	                           binary -> STRING (bytes need not be UTF-8; WithBinaryAsString allows it),
//	                           utf8 -> BINARY, bool -> numbers,
//	                           timestamps -> DATE, dates -> TIMESTAMP (a zone would have to be invented),
//	                           nested kinds into other kinds (list -> STRING, struct -> MAP, map -> ARRAY)
//	null type into NOT NULL    an all-null column cannot fill a NOT NULL column
//	missing NOT NULL column    and missing NOT NULL struct fields
//	unknown column             a source column or struct field the table lacks (unless rescued)
//
// Every problem of a schema is reported in one *MismatchError, each with its column (dotted for
// nested fields: "point.x", "tags.item", "attrs.value"), expected type, actual type and reason.
//
// # Modes
//
// ModeStrict (WithMode) refuses every cast: each source type must already be the canonical type,
// up to the names of nested children (a rename costs nothing). Matching by name, reordering and
// filling nullable columns still apply, as do NOT NULL checks; DECIMAL text is still validated.
//
// # Rescue
//
// WithRescueColumn names a nullable STRING column. Source columns the table lacks then go into it as
// a JSON object per row ({"col": value, ..., "_file_path": "..."}), and so do top-level values that
// fail a checked cast (the column then gets a null, which a NOT NULL column still refuses). Rows
// with nothing to rescue get a null. Values inside nested types are not rescued: their failures stay
// errors.
//
// # Memory
//
// Apply never modifies its input. Arrays that need no change are shared (retained) into the output;
// renames and zone relabels rebuild only the array metadata over the same buffers; widened offsets
// share the character data. Cast output comes from WithAllocator's allocator. The caller releases
// both the input and the output.
package schemamatch
