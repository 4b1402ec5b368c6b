package zerobus

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/tableschema"
)

// ValidateSchema checks a stream's Arrow schema against a table by the reference's rules (section 5):
// fields match columns by exact name; the stream keeps the table's column order; nullable columns may
// be left out but NOT NULL ones may not; nullability must match; and each type must be the column's
// canonical Arrow type (tableschema's mapping), nested names and nullability included. It returns nil
// when the stream is acceptable, else a *SchemaError naming every offending field.
//
// Causes are chosen as follows: a stream field with no column is FIELD_NOT_IN_TABLE; a NOT NULL column
// without a field is MISSING_REQUIRED_COLUMN; a field after one that comes later in the table is
// FIELD_OUT_OF_ORDER; a wrong type or nullability is TYPE_INCOMPATIBLE; more fields than columns, or a
// name given twice, is FIELD_COUNT_MISMATCH.
func ValidateSchema(table *tableschema.Schema, stream *arrow.Schema) *SchemaError {
	e := &SchemaError{ErrorCode: ErrorCodeSchemaValidation}
	fields := stream.Fields()
	if len(fields) > len(table.Fields) {
		e.add(CauseFieldCountMismatch, "stream has %d fields but the table has %d columns", len(fields), len(table.Fields))
	}
	seen := make(map[string]bool, len(fields))
	lastIdx, lastName := -1, ""
	for _, f := range fields {
		if seen[f.Name] {
			e.add(CauseFieldCountMismatch, "field %q appears more than once", f.Name)
			continue
		}
		seen[f.Name] = true
		idx := table.FieldIndex(f.Name)
		if idx < 0 {
			hint := ""
			for _, c := range table.Fields {
				if strings.EqualFold(c.Name, f.Name) {
					hint = fmt.Sprintf(" (the table has %q; names are matched exactly)", c.Name)
				}
			}
			e.add(CauseFieldNotInTable, "field %q is not in the table%s", f.Name, hint)
			continue
		}
		col := table.Fields[idx]
		if idx < lastIdx {
			e.add(CauseFieldOutOfOrder, "field %q comes after %q but precedes it in the table", f.Name, lastName)
		} else {
			lastIdx, lastName = idx, f.Name
		}
		if f.Nullable != col.Nullable {
			e.add(CauseTypeIncompatible, "field %q: nullable=%t, but column %s is %s", f.Name, f.Nullable, col.Name, nullWord(col.Nullable))
		}
		if diff := TypeDiff(f.Name, f.Type, col.Type.Arrow()); diff != "" {
			e.add(CauseTypeIncompatible, "field %q: column is %s, want Arrow %s, got %s", f.Name, col.Type.SQL(), col.Type.Arrow(), diff)
		}
	}
	for _, col := range table.Fields {
		if !col.Nullable && !seen[col.Name] {
			e.add(CauseMissingRequiredColumn, "required column %q (%s NOT NULL) is missing", col.Name, col.Type.SQL())
		}
	}
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}

func nullWord(nullable bool) string {
	if nullable {
		return "nullable"
	}
	return "NOT NULL"
}

// TypeDiff compares the Arrow type of column name against the canonical one and returns "" when they
// are the same, else a short description of the first difference, naming the nested path
// ("name.field.item") when the difference is below the top. Field
// names inside lists (the element must be called "item") and structs count, as do nested nullability,
// timestamp units and time zones. Map child names are not compared: arrow-go always calls them "key"
// and "value".
func TypeDiff(name string, got, want arrow.DataType) string {
	return typeDiff(name, false, got, want)
}

// typeDiff compares got with want at path; nested is false at the top of the column.
func typeDiff(path string, nested bool, got, want arrow.DataType) string {
	at := func(s string) string {
		if !nested {
			return s
		}
		return s + " at " + path
	}
	join := func(name string) string { return path + "." + name }
	if got.ID() != want.ID() {
		return at(got.String())
	}
	switch w := want.(type) {
	case *arrow.TimestampType:
		g := got.(*arrow.TimestampType)
		if g.Unit != w.Unit || g.TimeZone != w.TimeZone {
			return at(g.String())
		}
	case *arrow.ListType:
		g := got.(*arrow.ListType)
		gf, wf := g.ElemField(), w.ElemField()
		if gf.Name != wf.Name {
			return at(fmt.Sprintf("list element named %q (want %q)", gf.Name, wf.Name))
		}
		if gf.Nullable != wf.Nullable {
			return at(fmt.Sprintf("list element nullable=%t", gf.Nullable))
		}
		return typeDiff(join(wf.Name), true, gf.Type, wf.Type)
	case *arrow.MapType:
		g := got.(*arrow.MapType)
		if g.ItemField().Nullable != w.ItemField().Nullable {
			return at(fmt.Sprintf("map value nullable=%t", g.ItemField().Nullable))
		}
		if d := typeDiff(join("key"), true, g.KeyType(), w.KeyType()); d != "" {
			return d
		}
		return typeDiff(join("value"), true, g.ItemType(), w.ItemType())
	case *arrow.StructType:
		g := got.(*arrow.StructType)
		if g.NumFields() != w.NumFields() {
			return at(fmt.Sprintf("struct with %d fields (want %d)", g.NumFields(), w.NumFields()))
		}
		for i, wf := range w.Fields() {
			gf := g.Field(i)
			p := join(wf.Name)
			if gf.Name != wf.Name {
				return at(fmt.Sprintf("struct field %d named %q (want %q)", i, gf.Name, wf.Name))
			}
			if gf.Nullable != wf.Nullable {
				return fmt.Sprintf("nullable=%t at %s", gf.Nullable, p)
			}
			if d := typeDiff(p, true, gf.Type, wf.Type); d != "" {
				return d
			}
		}
	}
	return ""
}
