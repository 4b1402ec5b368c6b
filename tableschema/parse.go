package tableschema

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseColumns parses a Databricks SQL column list such as
//
//	id BIGINT NOT NULL, name STRING, price DECIMAL(10,2), tags ARRAY<STRING>,
//	attrs MAP<STRING, INT>, point STRUCT<x: DOUBLE NOT NULL, y: DOUBLE>
//
// Keywords are case-insensitive; column names may be quoted with backticks. The aliases BYTE, SHORT,
// INTEGER, LONG, REAL, DEC, NUMERIC, VARCHAR(n) and CHAR(n) are accepted; DECIMAL alone is
// DECIMAL(10,0) as in Databricks. Array elements and map values are nullable. The result is validated
// with [Schema.Validate].
func ParseColumns(s string) (*Schema, error) {
	p := &parser{src: s}
	p.next()
	var fields []Field
	for {
		f, err := p.field(false)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
		if p.tok == "," {
			p.next()
			continue
		}
		if p.tok != "" {
			return nil, p.errorf("expected ',' or end of list, found %q", p.tok)
		}
		break
	}
	sch := &Schema{Fields: fields}
	if err := sch.Validate(); err != nil {
		return nil, err
	}
	return sch, nil
}

type parser struct {
	src    string
	pos    int // byte offset after tok
	tok    string
	tokPos int
	quoted bool // tok came from `backticks`
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: column list at byte %d: %s", ErrInvalid, p.tokPos, fmt.Sprintf(format, args...))
}

// next advances to the next token: an identifier or number, a `quoted name`, or one punctuation rune.
// At the end of input tok is "".
func (p *parser) next() {
	for p.pos < len(p.src) && strings.ContainsRune(" \t\r\n", rune(p.src[p.pos])) {
		p.pos++
	}
	p.tokPos, p.quoted = p.pos, false
	if p.pos >= len(p.src) {
		p.tok = ""
		return
	}
	c := p.src[p.pos]
	switch {
	case c == '`':
		end := strings.IndexByte(p.src[p.pos+1:], '`')
		if end < 0 {
			p.tok, p.pos = p.src[p.pos:], len(p.src)
			return
		}
		p.tok, p.quoted = p.src[p.pos+1:p.pos+1+end], true
		p.pos += end + 2
	case isWordByte(c):
		start := p.pos
		for p.pos < len(p.src) && isWordByte(p.src[p.pos]) {
			p.pos++
		}
		p.tok = p.src[start:p.pos]
	default:
		p.tok = p.src[p.pos : p.pos+1]
		p.pos++
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *parser) keyword(kw string) bool { return !p.quoted && strings.EqualFold(p.tok, kw) }

func (p *parser) expect(tok string) error {
	if p.tok != tok {
		if p.tok == "" {
			return p.errorf("expected %q, found end of input", tok)
		}
		return p.errorf("expected %q, found %q", tok, p.tok)
	}
	p.next()
	return nil
}

// field parses "name type [NOT NULL]"; inside a STRUCT the name may be followed by ':'.
func (p *parser) field(inStruct bool) (Field, error) {
	if p.tok == "" {
		return Field{}, p.errorf("expected a column name, found end of input")
	}
	if !p.quoted && !isWordByte(p.tok[0]) {
		return Field{}, p.errorf("expected a column name, found %q", p.tok)
	}
	name := p.tok
	p.next()
	if inStruct && p.tok == ":" {
		p.next()
	}
	t, err := p.typ()
	if err != nil {
		return Field{}, fmt.Errorf("column %q: %w", name, err)
	}
	f := Field{Name: name, Type: t, Nullable: true}
	if p.keyword("NOT") {
		p.next()
		if !p.keyword("NULL") {
			return Field{}, p.errorf("column %q: expected NULL after NOT, found %q", name, p.tok)
		}
		p.next()
		f.Nullable = false
	}
	return f, nil
}

var simpleTypes = map[string]Kind{
	"TINYINT": TinyInt, "BYTE": TinyInt,
	"SMALLINT": SmallInt, "SHORT": SmallInt,
	"INT": Int, "INTEGER": Int,
	"BIGINT": BigInt, "LONG": BigInt,
	"FLOAT": Float, "REAL": Float,
	"DOUBLE":    Double,
	"BOOLEAN":   Boolean,
	"STRING":    String,
	"BINARY":    Binary,
	"DATE":      Date,
	"TIMESTAMP": Timestamp, "TIMESTAMP_LTZ": Timestamp,
	"TIMESTAMP_NTZ": TimestampNTZ,
}

func (p *parser) typ() (Type, error) {
	if p.tok == "" {
		return Type{}, p.errorf("expected a type, found end of input")
	}
	word := strings.ToUpper(p.tok)
	if p.quoted {
		return Type{}, p.errorf("expected a type, found %q", p.tok)
	}
	if k, ok := simpleTypes[word]; ok {
		p.next()
		return Type{Kind: k}, nil
	}
	p.next()
	switch word {
	case "VARCHAR", "CHAR":
		if p.tok == "(" {
			p.next()
			if _, err := p.int(); err != nil {
				return Type{}, err
			}
			if err := p.expect(")"); err != nil {
				return Type{}, err
			}
		}
		return Type{Kind: String}, nil
	case "DECIMAL", "DEC", "NUMERIC":
		t := Type{Kind: Decimal, Precision: 10}
		if p.tok != "(" {
			return t, nil
		}
		p.next()
		var err error
		if t.Precision, err = p.int(); err != nil {
			return Type{}, err
		}
		if p.tok == "," {
			p.next()
			if t.Scale, err = p.int(); err != nil {
				return Type{}, err
			}
		}
		if err := p.expect(")"); err != nil {
			return Type{}, err
		}
		return t, nil
	case "ARRAY":
		if err := p.expect("<"); err != nil {
			return Type{}, err
		}
		elem, err := p.typ()
		if err != nil {
			return Type{}, err
		}
		if err := p.expect(">"); err != nil {
			return Type{}, err
		}
		return ArrayOf(elem, true), nil
	case "MAP":
		if err := p.expect("<"); err != nil {
			return Type{}, err
		}
		key, err := p.typ()
		if err != nil {
			return Type{}, err
		}
		if err := p.expect(","); err != nil {
			return Type{}, err
		}
		val, err := p.typ()
		if err != nil {
			return Type{}, err
		}
		if err := p.expect(">"); err != nil {
			return Type{}, err
		}
		return MapOf(key, val, true), nil
	case "STRUCT":
		if err := p.expect("<"); err != nil {
			return Type{}, err
		}
		var fields []Field
		for p.tok != ">" {
			f, err := p.field(true)
			if err != nil {
				return Type{}, err
			}
			fields = append(fields, f)
			if p.tok == "," {
				p.next()
				continue
			}
			if p.tok != ">" {
				return Type{}, p.errorf("expected ',' or '>' in STRUCT, found %q", p.tok)
			}
		}
		p.next()
		return StructOf(fields...), nil
	}
	return Type{}, fmt.Errorf("%w: unknown type %q (want TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, BOOLEAN, STRING, BINARY, DATE, TIMESTAMP, TIMESTAMP_NTZ, DECIMAL(p,s), ARRAY<t>, MAP<k,v> or STRUCT<...>)", ErrInvalid, word)
}

func (p *parser) int() (int, error) {
	n, err := strconv.Atoi(p.tok)
	if err != nil || n < 0 || n > 1000 {
		return 0, p.errorf("expected a small non-negative integer, found %q", p.tok)
	}
	p.next()
	return n, nil
}
