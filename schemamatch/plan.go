package schemamatch

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/tableschema"
)

// kind is what a node does to its input array.
type kind int

const (
	kShare      kind = iota // the input is already the output type: shared
	kRetype                 // same buffers, new type (zone change, child renames of a leaf)
	kNull                   // the source is the Null type: an all-null array of the output type
	kExtension              // unwrap an extension array to its storage, then child 0
	kDict                   // unpack a dictionary to its values, then child 0
	kInt                    // integer widening
	kFloat                  // float16/float32/small ints -> float32/float64
	kTimestamp              // timestamp unit change (and zone relabel)
	kDate64                 // date64 -> date32
	kDateTs                 // date32/date64 -> timestamp[us] (TIMESTAMP_NTZ)
	kLargeOffs              // utf8 -> large_utf8, binary -> large_binary: widen offsets, share data
	kView                   // string_view/binary_view -> large: copy
	kFixedBin               // fixed_size_binary -> large_binary: offsets over the shared data
	kDecText                // decimal -> decimal text at the table's scale
	kIntDecText             // integer -> decimal text
	kTextDec                // text -> validated decimal text at the table's scale
	kList                   // list-like -> list with child "item"
	kMap                    // map -> canonical map
	kStruct                 // struct by field name, with fill and reorder
	kBinText                // binary kinds -> large_utf8 after a UTF-8 check (WithBinaryAsString)
)

// node converts one array (a column or a nested child) to its canonical type.
type node struct {
	kind     kind
	path     string         // dotted column path, for errors
	src      arrow.DataType // source type at this level
	out      arrow.DataType // canonical output type
	notNull  bool           // the table forbids nulls here but the source allows them: checked per batch
	children []*node        // kExtension/kDict: [values]; kList: [elem]; kMap: [key, value]; kStruct: per output field (nil = fill)
	fill     []bool         // kStruct: output field i is filled with nulls
	childSrc []int          // kStruct: source child index of output field i
	// numeric parameters
	mul, div   int64 // kTimestamp: multiply or floor-divide to reach microseconds
	srcScale   int32 // kDecText
	dstScale   int32 // kDecText, kIntDecText, kTextDec
	dstPrec    int32
	fallible   bool // this node or a descendant can fail on values (needs row mapping)
	descendant bool // a descendant (not this node) can fail
}

// colPlan is one output column.
type colPlan struct {
	name string
	src  int   // source column index; -1 fills nulls
	node *node // nil with src >= 0 means share the source column as it is
}

type planner struct {
	cfg      config
	problems []Problem
}

func (pl *planner) problem(col, expected, actual, reason string) {
	pl.problems = append(pl.problems, Problem{Column: col, Expected: expected, Actual: actual, Reason: reason})
}

func expectedOf(t tableschema.Type, nullable bool) string {
	if nullable {
		return t.SQL()
	}
	return t.SQL() + " NOT NULL"
}

// asciiFold lower-cases ASCII letters only, so that case-insensitive matching never folds
// non-ASCII names together.
func asciiFold(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// matchFields matches source fields to target names. It returns, for each target field, the source
// index or -1, and the source indexes that matched nothing. Duplicate matches are reported as
// problems under prefix.
func (pl *planner) matchFields(prefix string, src []arrow.Field, dst []string) (byDst []int, unmatched []int) {
	byDst = make([]int, len(dst))
	for i := range byDst {
		byDst[i] = -1
	}
	exact := make(map[string]int, len(dst))
	folded := make(map[string]int, len(dst))
	for i, n := range dst {
		exact[n] = i
		if _, dup := folded[asciiFold(n)]; !dup {
			folded[asciiFold(n)] = i
		}
	}
	for si, f := range src {
		di, ok := exact[f.Name]
		if !ok && pl.cfg.caseInsensitive {
			di, ok = folded[asciiFold(f.Name)]
		}
		if !ok {
			unmatched = append(unmatched, si)
			continue
		}
		if prev := byDst[di]; prev >= 0 {
			pl.problem(prefix+f.Name, "", f.Type.String(),
				fmt.Sprintf("source column %q matches table column %q, as does source column %q", f.Name, dst[di], src[prev].Name))
			continue
		}
		byDst[di] = si
	}
	return byDst, unmatched
}

func build(cfg config, source *arrow.Schema, target *tableschema.Schema) (*Plan, error) {
	pl := &planner{cfg: cfg}
	p := &Plan{cfg: cfg, source: source, target: target, schema: target.Arrow()}

	rescueIdx := -1
	if cfg.rescue != "" {
		rescueIdx = target.FieldIndex(cfg.rescue)
		switch {
		case rescueIdx < 0:
			pl.problem(cfg.rescue, "", "", "the rescue column is not in the table")
		case target.Fields[rescueIdx].Type.Kind != tableschema.String || !target.Fields[rescueIdx].Nullable:
			pl.problem(cfg.rescue, expectedOf(target.Fields[rescueIdx].Type, target.Fields[rescueIdx].Nullable), "",
				"the rescue column must be a nullable STRING")
			rescueIdx = -1
		}
	}

	names := make([]string, len(target.Fields))
	for i, f := range target.Fields {
		names[i] = f.Name
	}
	srcFields := source.Fields()
	if rescueIdx >= 0 {
		// The rescue column is filled by the plan; a source column of that name is rescued like
		// any other column the table lacks.
		names[rescueIdx] = "\x00rescue"
	}
	byDst, unmatched := pl.matchFields("", srcFields, names)

	for di, f := range target.Fields {
		if di == rescueIdx {
			p.cols = append(p.cols, colPlan{name: f.Name, src: -1})
			p.steps = append(p.steps, Step{Column: f.Name, Action: "rescue: JSON of unknown columns and uncastable values"})
			p.anyCast = true
			continue
		}
		si := byDst[di]
		if si < 0 {
			if !f.Nullable {
				pl.problem(f.Name, expectedOf(f.Type, false), "", "missing NOT NULL column")
				continue
			}
			p.cols = append(p.cols, colPlan{name: f.Name, src: -1})
			p.steps = append(p.steps, Step{Column: f.Name, Action: "fill nulls"})
			p.anyCast = true
			continue
		}
		sf := srcFields[si]
		n := pl.node(f.Name, sf.Type, sf.Nullable, f.Type, f.Nullable)
		if n == nil {
			continue
		}
		action := describe(n)
		if sf.Name != f.Name {
			action = fmt.Sprintf("match source column %q; %s", sf.Name, action)
		}
		p.steps = append(p.steps, Step{Column: f.Name, Action: action})
		if n.kind == kShare && !n.notNull {
			p.cols = append(p.cols, colPlan{name: f.Name, src: si})
			continue
		}
		p.anyCast = true
		p.cols = append(p.cols, colPlan{name: f.Name, src: si, node: n})
	}

	if rescueIdx >= 0 {
		p.rescue = &rescuePlan{col: rescueIdx}
		for _, si := range unmatched {
			p.rescue.unknown = append(p.rescue.unknown, si)
			p.steps = append(p.steps, Step{Column: cfg.rescue,
				Action: fmt.Sprintf("rescue source column %q (%s)", srcFields[si].Name, srcFields[si].Type)})
		}
		// the rescue column's index among output columns
		for i, c := range p.cols {
			if c.name == target.Fields[rescueIdx].Name {
				p.rescue.col = i
			}
		}
	} else {
		for _, si := range unmatched {
			sf := srcFields[si]
			reason := "not in table"
			for _, tf := range target.Fields {
				if strings.EqualFold(tf.Name, sf.Name) {
					reason = fmt.Sprintf("not in table (the table has %q; use case-insensitive matching)", tf.Name)
				}
			}
			pl.problem(sf.Name, "", sf.Type.String(), reason)
		}
	}

	if len(pl.problems) > 0 {
		return nil, &MismatchError{Source: cfg.source, Problems: pl.problems}
	}
	cfg.logger.Debug("schemamatch: plan built", "source", cfg.source, "identity", !p.anyCast)
	return p, nil
}

// describe renders a node for Steps.
func describe(n *node) string {
	check := ""
	if n.notNull || hasNotNullBelow(n) {
		check = " (check NOT NULL)"
	}
	switch {
	case n.kind == kShare:
		return "copy" + check
	case isRenameOnly(n):
		return fmt.Sprintf("rename %s -> %s (no copy)%s", n.src, n.out, check)
	}
	extra := ""
	if n.kind == kTimestamp && n.div > 1 {
		extra = " (sub-microsecond digits truncated)"
	}
	if n.kind == kDate64 {
		extra = " (time of day dropped)"
	}
	return fmt.Sprintf("cast %s -> %s%s%s", n.src, n.out, extra, check)
}

func hasNotNullBelow(n *node) bool {
	for _, c := range n.children {
		if c != nil && (c.notNull || hasNotNullBelow(c)) {
			return true
		}
	}
	return false
}

// isRenameOnly reports whether the node only changes types without touching values.
func isRenameOnly(n *node) bool {
	switch n.kind {
	case kShare, kRetype:
		return true
	case kTimestamp:
		return n.mul == 1 && n.div == 1
	case kList:
		if _, ok := n.src.(*arrow.ListType); !ok {
			return false
		}
	case kMap:
	case kStruct:
		for _, f := range n.fill {
			if f {
				return false
			}
		}
		for i, c := range n.childSrc {
			if c != i {
				return false
			}
		}
	default:
		return false
	}
	for _, c := range n.children {
		if c != nil && !isRenameOnly(c) {
			return false
		}
	}
	return true
}

// intInfo describes an integer type: signed, bits.
func intInfo(dt arrow.DataType) (signed bool, bits int, ok bool) {
	switch dt.ID() {
	case arrow.INT8:
		return true, 8, true
	case arrow.INT16:
		return true, 16, true
	case arrow.INT32:
		return true, 32, true
	case arrow.INT64:
		return true, 64, true
	case arrow.UINT8:
		return false, 8, true
	case arrow.UINT16:
		return false, 16, true
	case arrow.UINT32:
		return false, 32, true
	case arrow.UINT64:
		return false, 64, true
	}
	return false, 0, false
}

// intDigits is the number of decimal digits the largest value of an integer type has.
func intDigits(signed bool, bits int) int {
	switch bits {
	case 8:
		return 3
	case 16:
		return 5
	case 32:
		return 10
	}
	if signed {
		return 19
	}
	return 20
}

var tableIntBits = map[tableschema.Kind]int{
	tableschema.TinyInt: 8, tableschema.SmallInt: 16, tableschema.Int: 32, tableschema.BigInt: 64,
}

// noDeltaType reports source types no Delta column can hold.
func noDeltaType(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.TIME32, arrow.TIME64, arrow.DURATION, arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME,
		arrow.INTERVAL_MONTH_DAY_NANO, arrow.SPARSE_UNION, arrow.DENSE_UNION:
		return true
	}
	return false
}

// node plans the conversion of one source type into one table type at path. It returns nil after
// recording problems when the pair is refused.
func (pl *planner) node(path string, src arrow.DataType, srcNullable bool, dst tableschema.Type, dstNullable bool) *node {
	n := pl.typeNode(path, src, dst, dstNullable)
	if n == nil {
		return nil
	}
	// Nullability is metadata on the field, not the array: nothing is rebuilt for it, but a nullable
	// source going into a NOT NULL column is checked for nulls.
	if srcNullable && !dstNullable {
		n.notNull = true
		n.fallible = true
	}
	return n
}

func (pl *planner) refuse(path string, src arrow.DataType, dst tableschema.Type, dstNullable bool, reason string) *node {
	pl.problem(path, expectedOf(dst, dstNullable), src.String(), reason)
	return nil
}

func (pl *planner) typeNode(path string, src arrow.DataType, dst tableschema.Type, dstNullable bool) *node {
	out := dst.Arrow()
	n := &node{path: path, src: src, out: out}

	if noDeltaType(src) {
		return pl.refuse(path, src, dst, dstNullable, "no Delta type for "+src.String())
	}

	// Exact canonical type: shared as it is. DECIMAL's canonical type is text, which is still
	// validated and normalised.
	if dst.Kind != tableschema.Decimal && sameType(src, out) {
		n.kind = kShare
		return n
	}

	strict := pl.cfg.mode == ModeStrict
	strictRefuse := func() *node {
		return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("strict schema mode requires the canonical type %s", out))
	}
	// cast makes n a cast of kind k, which strict mode refuses.
	cast := func(k kind) *node {
		if strict {
			return strictRefuse()
		}
		n.kind = k
		return n
	}

	switch s := src.(type) {
	case *arrow.NullType:
		if !dstNullable {
			return pl.refuse(path, src, dst, dstNullable, "the source column has the null type (all nulls) but the table column is NOT NULL")
		}
		n.kind = kNull
		return n
	case arrow.ExtensionType:
		if strict {
			return strictRefuse()
		}
		c := pl.typeNode(path, s.StorageType(), dst, dstNullable)
		if c == nil {
			return nil
		}
		n.kind, n.children = kExtension, []*node{c}
		n.fallible, n.descendant = c.fallible, c.fallible
		return n
	case *arrow.DictionaryType:
		if strict {
			return strictRefuse()
		}
		c := pl.typeNode(path, s.ValueType, dst, dstNullable)
		if c == nil {
			return nil
		}
		n.kind, n.children = kDict, []*node{c}
		n.fallible, n.descendant = c.fallible, c.fallible
		return n
	case *arrow.RunEndEncodedType:
		return pl.refuse(path, src, dst, dstNullable, "run-end encoded columns are not supported; decode them first")
	case *arrow.ListViewType, *arrow.LargeListViewType:
		return pl.refuse(path, src, dst, dstNullable, "list views are not supported; write lists instead")
	}

	switch dst.Kind {
	case tableschema.TinyInt, tableschema.SmallInt, tableschema.Int, tableschema.BigInt:
		signed, bits, ok := intInfo(src)
		if !ok {
			return pl.incompatible(path, src, dst, dstNullable)
		}
		want := tableIntBits[dst.Kind]
		if bits > want || (!signed && bits >= want) {
			if !signed && bits == 64 {
				return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("narrowing uint64 to %s (no signed integer type holds every uint64; use DECIMAL(20,0))", dst.SQL()))
			}
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("narrowing %s to %s", src, dst.SQL()))
		}
		return cast(kInt)
	case tableschema.Float, tableschema.Double:
		wantBits := 32
		if dst.Kind == tableschema.Double {
			wantBits = 64
		}
		switch src.ID() {
		case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
			if src.ID() == arrow.FLOAT64 && wantBits == 32 {
				return pl.refuse(path, src, dst, dstNullable, "narrowing double to FLOAT")
			}
			return cast(kFloat)
		}
		if signed, bits, ok := intInfo(src); ok {
			// Exact only when the float's mantissa holds every value: 24 bits for FLOAT, 53 for DOUBLE.
			mant := 24
			if wantBits == 64 {
				mant = 53
			}
			need := bits
			if signed {
				need = bits - 1
			}
			if need > mant {
				return pl.refuse(path, src, dst, dstNullable,
					fmt.Sprintf("%s to %s may lose precision (not every %s is exact in a %d-bit float)", src, dst.SQL(), src, wantBits))
			}
			return cast(kFloat)
		}
		if _, ok := src.(arrow.DecimalType); ok {
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("%s to %s may lose precision", src, dst.SQL()))
		}
		return pl.incompatible(path, src, dst, dstNullable)
	case tableschema.Boolean:
		return pl.incompatible(path, src, dst, dstNullable)
	case tableschema.String:
		switch src.ID() {
		case arrow.STRING:
			return cast(kLargeOffs)
		case arrow.STRING_VIEW:
			return cast(kView)
		case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
			if !pl.cfg.binaryAsString {
				return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("cannot cast %s to STRING (bytes need not be UTF-8; allow it with binary-as-string)", src))
			}
			n.fallible = true
			return cast(kBinText)
		}
		return pl.incompatible(path, src, dst, dstNullable)
	case tableschema.Binary:
		switch src.ID() {
		case arrow.BINARY:
			return cast(kLargeOffs)
		case arrow.BINARY_VIEW:
			return cast(kView)
		case arrow.FIXED_SIZE_BINARY:
			return cast(kFixedBin)
		}
		return pl.incompatible(path, src, dst, dstNullable)
	case tableschema.Date:
		if src.ID() == arrow.DATE64 {
			n.fallible = true
			return cast(kDate64)
		}
		return pl.incompatible(path, src, dst, dstNullable)
	case tableschema.Timestamp, tableschema.TimestampNTZ:
		switch s := src.(type) {
		case *arrow.TimestampType:
			switch s.Unit {
			case arrow.Second:
				n.mul, n.div = 1_000_000, 1
			case arrow.Millisecond:
				n.mul, n.div = 1_000, 1
			case arrow.Microsecond:
				n.mul, n.div = 1, 1
			case arrow.Nanosecond:
				n.mul, n.div = 1, 1_000
			}
			if strict && (n.mul != 1 || n.div != 1) {
				return strictRefuse()
			}
			if strict && s.TimeZone != "" != (dst.Kind == tableschema.Timestamp) {
				return strictRefuse()
			}
			if n.mul == 1 && n.div == 1 {
				n.kind = kRetype
				return n
			}
			n.kind = kTimestamp
			n.fallible = n.mul > 1
			return n
		case *arrow.Date32Type, *arrow.Date64Type:
			if dst.Kind != tableschema.TimestampNTZ {
				return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("%s to TIMESTAMP needs a time zone; only TIMESTAMP_NTZ takes dates", src))
			}
			n.fallible = true
			return cast(kDateTs)
		}
		return pl.incompatible(path, src, dst, dstNullable)
	case tableschema.Decimal:
		return pl.decimalNode(n, src, dst, dstNullable)
	case tableschema.Array:
		var elem arrow.Field
		switch s := src.(type) {
		case *arrow.ListType:
			elem = s.ElemField()
		case *arrow.LargeListType:
			elem = s.ElemField()
		case *arrow.FixedSizeListType:
			elem = s.ElemField()
		default:
			return pl.incompatible(path, src, dst, dstNullable)
		}
		if strict && src.ID() != arrow.LIST {
			return strictRefuse()
		}
		c := pl.node(path+"."+tableschema.ListItemName, elem.Type, elem.Nullable, *dst.Elem, dst.ElemNullable)
		if c == nil {
			return nil
		}
		n.kind, n.children = kList, []*node{c}
		if src.ID() == arrow.LARGE_LIST {
			n.fallible = true // offsets may not fit int32
		}
		n.descendant = c.fallible
		n.fallible = n.fallible || c.fallible
		return n
	case tableschema.Map:
		s, ok := src.(*arrow.MapType)
		if !ok {
			return pl.incompatible(path, src, dst, dstNullable)
		}
		k := pl.node(path+".key", s.KeyType(), s.KeyField().Nullable, *dst.Key, false)
		v := pl.node(path+".value", s.ItemType(), s.ItemField().Nullable, *dst.Value, dst.ValueNullable)
		if k == nil || v == nil {
			return nil
		}
		n.kind, n.children = kMap, []*node{k, v}
		n.descendant = k.fallible || v.fallible
		n.fallible = n.descendant
		return n
	case tableschema.Struct:
		s, ok := src.(*arrow.StructType)
		if !ok {
			return pl.incompatible(path, src, dst, dstNullable)
		}
		names := make([]string, len(dst.Fields))
		for i, f := range dst.Fields {
			names[i] = f.Name
		}
		byDst, unmatched := pl.matchFields(path+".", s.Fields(), names)
		for _, si := range unmatched {
			pl.problem(path+"."+s.Field(si).Name, "", s.Field(si).Type.String(), "struct field not in table")
		}
		n.kind = kStruct
		n.children = make([]*node, len(dst.Fields))
		n.fill = make([]bool, len(dst.Fields))
		n.childSrc = byDst
		failed := len(unmatched) > 0
		for i, f := range dst.Fields {
			si := byDst[i]
			if si < 0 {
				if !f.Nullable {
					pl.problem(path+"."+f.Name, expectedOf(f.Type, false), "", "missing NOT NULL struct field")
					failed = true
				}
				n.fill[i] = true
				continue
			}
			sf := s.Field(si)
			c := pl.node(path+"."+f.Name, sf.Type, sf.Nullable, f.Type, f.Nullable)
			if c == nil {
				failed = true
				continue
			}
			n.children[i] = c
			n.descendant = n.descendant || c.fallible
		}
		if failed {
			return nil
		}
		if strict {
			for i := range n.fill {
				if n.fill[i] || n.childSrc[i] != i {
					return pl.refuse(path, src, dst, dstNullable, "strict schema mode requires struct fields in the table's order, all present")
				}
			}
		}
		n.fallible = n.descendant
		return n
	}
	return pl.incompatible(path, src, dst, dstNullable)
}

func (pl *planner) incompatible(path string, src arrow.DataType, dst tableschema.Type, dstNullable bool) *node {
	if _, _, ok := intInfo(src); ok {
		switch dst.Kind {
		case tableschema.String, tableschema.Binary, tableschema.Boolean, tableschema.Date, tableschema.Timestamp, tableschema.TimestampNTZ:
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("no implicit cast from %s to %s", src, dst.SQL()))
		}
	}
	return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("cannot cast %s to %s", src, dst.SQL()))
}

func (pl *planner) decimalNode(n *node, src arrow.DataType, dst tableschema.Type, dstNullable bool) *node {
	path := n.path
	n.dstPrec, n.dstScale = int32(dst.Precision), int32(dst.Scale)
	strict := pl.cfg.mode == ModeStrict
	switch s := src.(type) {
	case arrow.DecimalType:
		ps, ss := s.GetPrecision(), s.GetScale()
		if ss < 0 {
			return pl.refuse(path, src, dst, dstNullable, "negative decimal scales are not supported")
		}
		if ss > n.dstScale {
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("precision loss: scale %d does not fit DECIMAL(%d,%d) (scale %d)", ss, dst.Precision, dst.Scale, dst.Scale))
		}
		if ps-ss > n.dstPrec-n.dstScale {
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("precision loss: %d integer digits do not fit DECIMAL(%d,%d) (%d integer digits)", ps-ss, dst.Precision, dst.Scale, dst.Precision-dst.Scale))
		}
		if strict {
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("strict schema mode requires the canonical type %s (decimal text)", n.out))
		}
		n.kind = kDecText
		n.srcScale = ss
		n.fallible = true // a value may exceed its declared precision
		return n
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		if strict && src.ID() != arrow.LARGE_STRING {
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("strict schema mode requires the canonical type %s", n.out))
		}
		n.kind = kTextDec
		n.fallible = true
		return n
	}
	if signed, bits, ok := intInfo(src); ok {
		d := intDigits(signed, bits)
		if int32(d) > n.dstPrec-n.dstScale {
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("precision loss: %s needs %d integer digits, DECIMAL(%d,%d) has %d", src, d, dst.Precision, dst.Scale, dst.Precision-dst.Scale))
		}
		if strict {
			return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("strict schema mode requires the canonical type %s (decimal text)", n.out))
		}
		n.kind = kIntDecText
		return n
	}
	switch src.ID() {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return pl.refuse(path, src, dst, dstNullable, fmt.Sprintf("%s to %s may lose precision (binary floats are not exact decimals)", src, dst.SQL()))
	}
	return pl.incompatible(path, src, dst, dstNullable)
}

// sameType reports whether got is exactly want: same ids, parameters, nested field names and
// nested nullability.
func sameType(got, want arrow.DataType) bool {
	if got.ID() != want.ID() {
		return false
	}
	switch w := want.(type) {
	case *arrow.TimestampType:
		g := got.(*arrow.TimestampType)
		return g.Unit == w.Unit && g.TimeZone == w.TimeZone
	case *arrow.ListType:
		g := got.(*arrow.ListType)
		return sameField(g.ElemField(), w.ElemField())
	case *arrow.MapType:
		g := got.(*arrow.MapType)
		// the entries struct holds the key and item fields
		return g.KeysSorted == w.KeysSorted && sameField(g.ElemField(), w.ElemField())
	case *arrow.StructType:
		g := got.(*arrow.StructType)
		if g.NumFields() != w.NumFields() {
			return false
		}
		for i := range w.Fields() {
			if !sameField(g.Field(i), w.Field(i)) {
				return false
			}
		}
		return true
	}
	return arrow.TypeEqual(got, want)
}

func sameField(g, w arrow.Field) bool {
	return g.Name == w.Name && g.Nullable == w.Nullable && sameType(g.Type, w.Type)
}
