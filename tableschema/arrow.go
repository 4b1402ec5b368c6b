package tableschema

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// ErrNoDeltaType is the base of errors for Arrow types no Delta column can hold without loss.
var ErrNoDeltaType = errors.New("no Delta type")

// ListItemName is the canonical name of a list's element field, as Zerobus expects it. (Map children
// are "entries", "key" and "value": arrow-go always names them so, renaming them when it reads IPC.)
const ListItemName = "item"

// Arrow returns the canonical Arrow schema of the table (see the package comment).
func (s *Schema) Arrow() *arrow.Schema { return s.arrowSchema(false) }

// StorageArrow returns the Arrow schema of the table's values as stored: the canonical types, except
// that DECIMAL(p,s) is decimal128(p,s) rather than text. FromArrow maps it back to the same schema,
// which it does not for Arrow (a DECIMAL's text reads as STRING), so it is the schema that describes
// the table to clients (Flight SQL's GetTables).
func (s *Schema) StorageArrow() *arrow.Schema { return s.arrowSchema(true) }

func (s *Schema) arrowSchema(storage bool) *arrow.Schema {
	fields := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		fields[i] = f.arrowField(storage)
	}
	return arrow.NewSchema(fields, nil)
}

// Arrow returns the canonical Arrow field of the column.
func (f Field) Arrow() arrow.Field { return f.arrowField(false) }

func (f Field) arrowField(storage bool) arrow.Field {
	return arrow.Field{Name: f.Name, Type: f.Type.arrowType(storage), Nullable: f.Nullable}
}

// Arrow returns the canonical Arrow type for t.
func (t Type) Arrow() arrow.DataType { return t.arrowType(false) }

// arrowType is the canonical type, or with storage the stored one (see Schema.StorageArrow).
func (t Type) arrowType(storage bool) arrow.DataType {
	switch t.Kind {
	case TinyInt:
		return arrow.PrimitiveTypes.Int8
	case SmallInt:
		return arrow.PrimitiveTypes.Int16
	case Int:
		return arrow.PrimitiveTypes.Int32
	case BigInt:
		return arrow.PrimitiveTypes.Int64
	case Float:
		return arrow.PrimitiveTypes.Float32
	case Double:
		return arrow.PrimitiveTypes.Float64
	case Boolean:
		return arrow.FixedWidthTypes.Boolean
	case Decimal:
		if storage {
			return &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}
		}
		return arrow.BinaryTypes.LargeString
	case String:
		return arrow.BinaryTypes.LargeString
	case Binary:
		return arrow.BinaryTypes.LargeBinary
	case Date:
		return arrow.FixedWidthTypes.Date32
	case Timestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	case TimestampNTZ:
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case Array:
		return arrow.ListOfField(arrow.Field{Name: ListItemName, Type: t.Elem.arrowType(storage), Nullable: t.ElemNullable})
	case Map:
		return arrow.MapOfFields(
			arrow.Field{Name: "key", Type: t.Key.arrowType(storage)},
			arrow.Field{Name: "value", Type: t.Value.arrowType(storage), Nullable: t.ValueNullable})
	case Struct:
		fields := make([]arrow.Field, len(t.Fields))
		for i, f := range t.Fields {
			fields[i] = f.arrowField(storage)
		}
		return arrow.StructOf(fields...)
	}
	panic(fmt.Sprintf("tableschema: Arrow() of unknown kind %d", int(t.Kind)))
}

// FromArrow derives a table schema from an Arrow schema with the canonical mapping, as `loader table
// create --like` does. Besides the canonical types it maps:
//
//	Utf8, StringView                      STRING
//	Binary, BinaryView, FixedSizeBinary   BINARY
//	UInt8, UInt16, UInt32                 SMALLINT, INT, BIGINT (the next wider signed type)
//	UInt64                                DECIMAL(20,0), as Spark reads Parquet UINT_64 (no signed
//	                                      type holds every uint64)
//	Float16                               FLOAT
//	Date64                                DATE
//	Timestamp in any unit                 TIMESTAMP with a time zone, TIMESTAMP_NTZ without
//	Decimal32/64/128/256 with p <= 38     DECIMAL(p,s)
//	LargeList, FixedSizeList, ListView,   ARRAY
//	LargeListView
//	Dictionary, RunEndEncoded             the type of its values
//	Extension                             the type of its storage
//	Null                                  STRING (a column of nulls says nothing about its type)
//
// Decimals wider than 38 digits, TIME, DURATION, INTERVAL and unions have no Delta type; every such
// column is reported in one error wrapping [ErrNoDeltaType].
func FromArrow(s *arrow.Schema) (*Schema, error) {
	var errs []error
	fields := fromArrowFields("", s.Fields(), &errs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := &Schema{Fields: fields}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

func fromArrowFields(prefix string, in []arrow.Field, errs *[]error) []Field {
	out := make([]Field, len(in))
	for i, f := range in {
		out[i] = Field{Name: f.Name, Type: fromArrowType(prefix+f.Name, f.Type, errs), Nullable: f.Nullable}
	}
	return out
}

// TypeFromArrow maps one Arrow type as [FromArrow] does; path names the column in errors.
func TypeFromArrow(path string, dt arrow.DataType) (Type, error) {
	var errs []error
	t := fromArrowType(path, dt, &errs)
	return t, errors.Join(errs...)
}

func fromArrowType(path string, dt arrow.DataType, errs *[]error) Type {
	noType := func(why string) Type {
		*errs = append(*errs, fmt.Errorf("column %q: %w for %s%s", path, ErrNoDeltaType, dt, why))
		return Type{Kind: String}
	}
	switch dt := dt.(type) {
	case *arrow.Int8Type:
		return Type{Kind: TinyInt}
	case *arrow.Int16Type, *arrow.Uint8Type:
		return Type{Kind: SmallInt}
	case *arrow.Int32Type, *arrow.Uint16Type:
		return Type{Kind: Int}
	case *arrow.Int64Type, *arrow.Uint32Type:
		return Type{Kind: BigInt}
	case *arrow.Uint64Type:
		return DecimalOf(20, 0)
	case *arrow.Float16Type, *arrow.Float32Type:
		return Type{Kind: Float}
	case *arrow.Float64Type:
		return Type{Kind: Double}
	case *arrow.BooleanType:
		return Type{Kind: Boolean}
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType, *arrow.NullType:
		return Type{Kind: String}
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return Type{Kind: Binary}
	case *arrow.Date32Type, *arrow.Date64Type:
		return Type{Kind: Date}
	case *arrow.TimestampType:
		if dt.TimeZone == "" {
			return Type{Kind: TimestampNTZ}
		}
		return Type{Kind: Timestamp}
	case arrow.DecimalType:
		if dt.GetPrecision() > MaxDecimalPrecision {
			return noType(fmt.Sprintf(" (Delta decimals hold at most %d digits)", MaxDecimalPrecision))
		}
		return DecimalOf(int(dt.GetPrecision()), int(dt.GetScale()))
	case *arrow.MapType:
		key := fromArrowType(path+".key", dt.KeyType(), errs)
		val := fromArrowType(path+".value", dt.ItemType(), errs)
		return MapOf(key, val, dt.ItemField().Nullable)
	case arrow.ListLikeType: // List, LargeList, FixedSizeList, ListView, LargeListView (Map handled above)
		ef := dt.ElemField()
		return ArrayOf(fromArrowType(path+".element", ef.Type, errs), ef.Nullable)
	case *arrow.StructType:
		if dt.NumFields() == 0 {
			return noType(" (a struct without fields)")
		}
		return StructOf(fromArrowFields(path+".", dt.Fields(), errs)...)
	case *arrow.DictionaryType:
		return fromArrowType(path, dt.ValueType, errs)
	case *arrow.RunEndEncodedType:
		return fromArrowType(path, dt.Encoded(), errs)
	case arrow.ExtensionType:
		return fromArrowType(path, dt.StorageType(), errs)
	}
	return noType("")
}
