// Package schemamatch reconciles a source file's Arrow schema with a target table: it matches columns
// by name, reorders them to the table, applies the safe casts real files need to reach the table's
// canonical Arrow types, fills omitted nullable columns with nulls, and reports everything that does
// not fit in one error.
//
// A Plan is built once per distinct source schema and applied to every batch; building does the
// matching and type checks, applying only casts. A Plan is safe for concurrent use.
package schemamatch
