package tableschema

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is the kind of a Databricks SQL type.
type Kind int

// The kinds a table column can have.
const (
	TinyInt Kind = iota + 1
	SmallInt
	Int
	BigInt
	Float
	Double
	Boolean
	String
	Binary
	Date
	Timestamp
	TimestampNTZ
	Decimal
	Array
	Map
	Struct
)

var kindSQL = map[Kind]string{
	TinyInt: "TINYINT", SmallInt: "SMALLINT", Int: "INT", BigInt: "BIGINT", Float: "FLOAT",
	Double: "DOUBLE", Boolean: "BOOLEAN", String: "STRING", Binary: "BINARY", Date: "DATE",
	Timestamp: "TIMESTAMP", TimestampNTZ: "TIMESTAMP_NTZ", Decimal: "DECIMAL", Array: "ARRAY",
	Map: "MAP", Struct: "STRUCT",
}

// MaxDecimalPrecision is the largest DECIMAL precision Delta supports.
const MaxDecimalPrecision = 38

// ErrInvalid is the base of every error this package returns for a malformed name, type or schema.
var ErrInvalid = errors.New("invalid table schema")

// Type is a Databricks SQL type. Only the fields that belong to its Kind are set.
type Type struct {
	Kind Kind

	// Precision and Scale are set for Decimal.
	Precision, Scale int

	// Elem and ElemNullable are set for Array (Delta's elementType and containsNull).
	Elem         *Type
	ElemNullable bool

	// Key, Value and ValueNullable are set for Map (Delta's keyType, valueType, valueContainsNull).
	Key, Value    *Type
	ValueNullable bool

	// Fields is set for Struct.
	Fields []Field
}

// Field is a named column or struct member.
type Field struct {
	Name     string
	Type     Type
	Nullable bool
}

// Schema is the ordered list of a table's columns.
type Schema struct {
	Fields []Field
}

// Primitive returns the Type of a kind that has no parameters. It panics for Decimal, Array, Map and
// Struct, which need their parts.
func Primitive(k Kind) Type {
	switch k {
	case Decimal, Array, Map, Struct:
		panic(fmt.Sprintf("tableschema: Primitive(%v) needs parameters", k))
	}
	return Type{Kind: k}
}

// DecimalOf returns DECIMAL(precision, scale).
func DecimalOf(precision, scale int) Type {
	return Type{Kind: Decimal, Precision: precision, Scale: scale}
}

// ArrayOf returns ARRAY<elem>.
func ArrayOf(elem Type, elemNullable bool) Type {
	return Type{Kind: Array, Elem: &elem, ElemNullable: elemNullable}
}

// MapOf returns MAP<key, value>.
func MapOf(key, value Type, valueNullable bool) Type {
	return Type{Kind: Map, Key: &key, Value: &value, ValueNullable: valueNullable}
}

// StructOf returns STRUCT<fields...>.
func StructOf(fields ...Field) Type { return Type{Kind: Struct, Fields: fields} }

// String returns the kind's SQL keyword.
func (k Kind) String() string {
	if s, ok := kindSQL[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// SQL renders the type as Databricks SQL, e.g. "ARRAY<STRING>" or "STRUCT<a: INT NOT NULL>". Array
// element and map value nullability is not part of SQL syntax and is not shown.
func (t Type) SQL() string {
	switch t.Kind {
	case Decimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", t.Precision, t.Scale)
	case Array:
		return "ARRAY<" + t.Elem.SQL() + ">"
	case Map:
		return "MAP<" + t.Key.SQL() + ", " + t.Value.SQL() + ">"
	case Struct:
		parts := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			parts[i] = f.Name + ": " + f.Type.SQL()
			if !f.Nullable {
				parts[i] += " NOT NULL"
			}
		}
		return "STRUCT<" + strings.Join(parts, ", ") + ">"
	}
	return t.Kind.String()
}

// String is SQL.
func (t Type) String() string { return t.SQL() }

// Equal reports whether two types are the same, nested nullability included.
func (t Type) Equal(o Type) bool {
	if t.Kind != o.Kind {
		return false
	}
	switch t.Kind {
	case Decimal:
		return t.Precision == o.Precision && t.Scale == o.Scale
	case Array:
		return t.ElemNullable == o.ElemNullable && t.Elem.Equal(*o.Elem)
	case Map:
		return t.ValueNullable == o.ValueNullable && t.Key.Equal(*o.Key) && t.Value.Equal(*o.Value)
	case Struct:
		return fieldsEqual(t.Fields, o.Fields)
	}
	return true
}

func fieldsEqual(a, b []Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Nullable != b[i].Nullable || !a[i].Type.Equal(b[i].Type) {
			return false
		}
	}
	return true
}

// Equal reports whether two schemas have the same columns in the same order.
func (s *Schema) Equal(o *Schema) bool { return fieldsEqual(s.Fields, o.Fields) }

// SQL renders the column list in the form ParseColumns reads.
func (s *Schema) SQL() string {
	parts := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		parts[i] = f.Name + " " + f.Type.SQL()
		if !f.Nullable {
			parts[i] += " NOT NULL"
		}
	}
	return strings.Join(parts, ", ")
}

// FieldIndex returns the index of the column with exactly this name, or -1.
func (s *Schema) FieldIndex(name string) int {
	for i, f := range s.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// Validate checks names (non-empty ASCII letters, digits and underscores, unique case-insensitively
// within one struct level, as Delta requires) and decimal bounds, and returns every problem at once.
func (s *Schema) Validate() error {
	if len(s.Fields) == 0 {
		return fmt.Errorf("%w: a table needs at least one column", ErrInvalid)
	}
	var errs []error
	validateFields("", s.Fields, &errs)
	return errors.Join(errs...)
}

func validateFields(prefix string, fields []Field, errs *[]error) {
	seen := map[string]string{}
	for _, f := range fields {
		path := prefix + f.Name
		if !ValidName(f.Name) {
			*errs = append(*errs, fmt.Errorf("%w: column name %q: use ASCII letters, digits and underscores", ErrInvalid, path))
		}
		if prev, dup := seen[strings.ToLower(f.Name)]; dup {
			*errs = append(*errs, fmt.Errorf("%w: column %q duplicates %q (names are case-insensitive)", ErrInvalid, path, prefix+prev))
		}
		seen[strings.ToLower(f.Name)] = f.Name
		validateType(path, f.Type, errs)
	}
}

func validateType(path string, t Type, errs *[]error) {
	switch t.Kind {
	case Decimal:
		if t.Precision < 1 || t.Precision > MaxDecimalPrecision || t.Scale < 0 || t.Scale > t.Precision {
			*errs = append(*errs, fmt.Errorf("%w: column %q: DECIMAL(%d,%d) needs 1 <= precision <= %d and 0 <= scale <= precision",
				ErrInvalid, path, t.Precision, t.Scale, MaxDecimalPrecision))
		}
	case Array:
		validateType(path+".element", *t.Elem, errs)
	case Map:
		validateType(path+".key", *t.Key, errs)
		validateType(path+".value", *t.Value, errs)
	case Struct:
		if len(t.Fields) == 0 {
			*errs = append(*errs, fmt.Errorf("%w: column %q: a STRUCT needs at least one field", ErrInvalid, path))
		}
		validateFields(path+".", t.Fields, errs)
	default:
		if _, ok := kindSQL[t.Kind]; !ok {
			*errs = append(*errs, fmt.Errorf("%w: column %q: unknown type kind %d", ErrInvalid, path, int(t.Kind)))
		}
	}
}

// ValidName reports whether s is a non-empty run of ASCII letters, digits and underscores, the rule for
// table-name parts and column names.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// TableName is a three-part Unity Catalog name.
type TableName struct {
	Catalog, Schema, Table string
}

// ParseTableName parses "catalog.schema.table": three non-empty parts of ASCII letters, digits and
// underscores.
func ParseTableName(s string) (TableName, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || !ValidName(parts[0]) || !ValidName(parts[1]) || !ValidName(parts[2]) {
		return TableName{}, fmt.Errorf("%w: table name %q: want catalog.schema.table, three non-empty parts of ASCII letters, digits and underscores", ErrInvalid, s)
	}
	return TableName{Catalog: parts[0], Schema: parts[1], Table: parts[2]}, nil
}

// String returns "catalog.schema.table".
func (n TableName) String() string { return n.Catalog + "." + n.Schema + "." + n.Table }

// Parts returns the name as a three-element path, the form a Flight PATH descriptor carries.
func (n TableName) Parts() []string { return []string{n.Catalog, n.Schema, n.Table} }
