package tableschema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// deltaField and deltaType mirror the Delta protocol's schema serialization
// (PROTOCOL.md "Schema Serialization Format").
type deltaField struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
	Metadata map[string]any  `json:"metadata"`
}

type deltaStruct struct {
	Type   string       `json:"type"`
	Fields []deltaField `json:"fields"`
}

type deltaArray struct {
	Type         string          `json:"type"`
	ElementType  json.RawMessage `json:"elementType"`
	ContainsNull bool            `json:"containsNull"`
}

type deltaMap struct {
	Type              string          `json:"type"`
	KeyType           json.RawMessage `json:"keyType"`
	ValueType         json.RawMessage `json:"valueType"`
	ValueContainsNull bool            `json:"valueContainsNull"`
}

var deltaPrimitive = map[Kind]string{
	TinyInt: "byte", SmallInt: "short", Int: "integer", BigInt: "long", Float: "float", Double: "double",
	Boolean: "boolean", String: "string", Binary: "binary", Date: "date", Timestamp: "timestamp",
	TimestampNTZ: "timestamp_ntz",
}

var deltaPrimitiveKind = func() map[string]Kind {
	m := make(map[string]Kind, len(deltaPrimitive))
	for k, v := range deltaPrimitive {
		m[v] = k
	}
	return m
}()

var deltaDecimal = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)

// DeltaJSON returns the schema as the Delta protocol's schemaString: a JSON struct type.
func (s *Schema) DeltaJSON() string {
	b, err := json.Marshal(deltaStructOf(s.Fields))
	if err != nil { // only plain data is marshalled
		panic(err)
	}
	return string(b)
}

func deltaStructOf(fields []Field) deltaStruct {
	out := deltaStruct{Type: "struct", Fields: make([]deltaField, len(fields))}
	for i, f := range fields {
		out.Fields[i] = deltaField{Name: f.Name, Type: mustJSON(f.Type.deltaValue()), Nullable: f.Nullable, Metadata: map[string]any{}}
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (t Type) deltaValue() any {
	switch t.Kind {
	case Decimal:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	case Array:
		return deltaArray{Type: "array", ElementType: mustJSON(t.Elem.deltaValue()), ContainsNull: t.ElemNullable}
	case Map:
		return deltaMap{Type: "map", KeyType: mustJSON(t.Key.deltaValue()), ValueType: mustJSON(t.Value.deltaValue()), ValueContainsNull: t.ValueNullable}
	case Struct:
		return deltaStructOf(t.Fields)
	}
	return deltaPrimitive[t.Kind]
}

// ParseDeltaSchema parses a Delta schemaString. Column metadata is ignored.
func ParseDeltaSchema(schemaString string) (*Schema, error) {
	t, err := parseDeltaType([]byte(schemaString))
	if err != nil {
		return nil, err
	}
	if t.Kind != Struct {
		return nil, fmt.Errorf("%w: delta schema is a %s, want a struct", ErrInvalid, t.SQL())
	}
	return &Schema{Fields: t.Fields}, nil
}

func parseDeltaType(raw json.RawMessage) (Type, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		if k, ok := deltaPrimitiveKind[name]; ok {
			return Type{Kind: k}, nil
		}
		if m := deltaDecimal.FindStringSubmatch(name); m != nil {
			p, _ := strconv.Atoi(m[1])
			s, _ := strconv.Atoi(m[2])
			return DecimalOf(p, s), nil
		}
		return Type{}, fmt.Errorf("%w: unsupported delta type %q", ErrInvalid, name)
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Type{}, fmt.Errorf("%w: delta type %s: %w", ErrInvalid, truncate(raw), err)
	}
	switch head.Type {
	case "struct":
		var st deltaStruct
		if err := json.Unmarshal(raw, &st); err != nil {
			return Type{}, fmt.Errorf("%w: delta struct: %w", ErrInvalid, err)
		}
		fields := make([]Field, len(st.Fields))
		for i, f := range st.Fields {
			ft, err := parseDeltaType(f.Type)
			if err != nil {
				return Type{}, fmt.Errorf("field %q: %w", f.Name, err)
			}
			fields[i] = Field{Name: f.Name, Type: ft, Nullable: f.Nullable}
		}
		return StructOf(fields...), nil
	case "array":
		var a deltaArray
		if err := json.Unmarshal(raw, &a); err != nil {
			return Type{}, fmt.Errorf("%w: delta array: %w", ErrInvalid, err)
		}
		elem, err := parseDeltaType(a.ElementType)
		if err != nil {
			return Type{}, err
		}
		return ArrayOf(elem, a.ContainsNull), nil
	case "map":
		var m deltaMap
		if err := json.Unmarshal(raw, &m); err != nil {
			return Type{}, fmt.Errorf("%w: delta map: %w", ErrInvalid, err)
		}
		key, err := parseDeltaType(m.KeyType)
		if err != nil {
			return Type{}, err
		}
		val, err := parseDeltaType(m.ValueType)
		if err != nil {
			return Type{}, err
		}
		return MapOf(key, val, m.ValueContainsNull), nil
	}
	return Type{}, fmt.Errorf("%w: unsupported delta type %s", ErrInvalid, truncate(raw))
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// UsesTimestampNTZ reports whether any column, at any depth, is TIMESTAMP_NTZ: such a table needs the
// Delta timestampNtz reader and writer feature.
func (s *Schema) UsesTimestampNTZ() bool {
	var walk func(t Type) bool
	walk = func(t Type) bool {
		switch t.Kind {
		case TimestampNTZ:
			return true
		case Array:
			return walk(*t.Elem)
		case Map:
			return walk(*t.Key) || walk(*t.Value)
		case Struct:
			for _, f := range t.Fields {
				if walk(f.Type) {
					return true
				}
			}
		}
		return false
	}
	return walk(StructOf(s.Fields...))
}
