package tableschema

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// DecimalSyntax says which spellings of a number ParseDecimal accepts.
type DecimalSyntax uint8

const (
	// DecimalPlain is the canonical spelling a DECIMAL column's Arrow text uses: an optional sign,
	// digits and an optional fraction, with at least one digit ("19.99", "-0.5", "+.25", "3.").
	DecimalPlain DecimalSyntax = iota
	// DecimalLoose is DecimalPlain with surrounding ASCII spaces and tabs and an optional exponent
	// ("1.5e3", "125E-2"), as text files write numbers.
	DecimalLoose
)

// The reasons ParseDecimal refuses a text; its *DecimalError wraps one of them.
var (
	// ErrDecimalSyntax: the text is not a number in the syntax asked for.
	ErrDecimalSyntax = errors.New("not a decimal number")
	// ErrDecimalRounding: the number has more significant fractional digits than the scale (it is
	// never rounded).
	ErrDecimalRounding = errors.New("decimal needs rounding")
	// ErrDecimalOverflow: the number has more integer digits than precision-scale.
	ErrDecimalOverflow = errors.New("decimal overflows")
)

// DecimalError is why ParseDecimal refused a text. It never quotes the text, which may be
// sensitive.
type DecimalError struct {
	Err              error // ErrDecimalSyntax, ErrDecimalRounding or ErrDecimalOverflow
	Precision, Scale int   // the DECIMAL type the text was parsed for
}

func (e *DecimalError) Error() string {
	switch {
	case errors.Is(e.Err, ErrDecimalRounding):
		return fmt.Sprintf("more than %d fractional digits for DECIMAL(%d,%d) (values are not rounded)", e.Scale, e.Precision, e.Scale)
	case errors.Is(e.Err, ErrDecimalOverflow):
		return fmt.Sprintf("too many integer digits for DECIMAL(%d,%d), which holds %d", e.Precision, e.Scale, e.Precision-e.Scale)
	}
	return e.Err.Error()
}

// Unwrap returns the reason, one of the ErrDecimal sentinels.
func (e *DecimalError) Unwrap() error { return e.Err }

// AppendDecimal parses s as ParseDecimal does and appends the value's canonical text to dst: a '-'
// unless it is non-negative or zero, the integer digits without leading zeros ("0" when there are
// none) and, when scale is positive, a point and exactly scale fractional digits, as
// decimal128.Num.ToString(scale) renders it. On failure it returns dst unchanged and the
// *DecimalError. It does not allocate unless dst grows or it fails.
func AppendDecimal(dst []byte, s string, precision, scale int, syntax DecimalSyntax) ([]byte, error) {
	var d decimalText
	if err := d.parse(s, precision, scale, syntax); err != nil {
		return dst, err
	}
	return d.appendText(dst), nil
}

// IsCanonicalDecimal reports whether s is already the canonical text of a value of
// DECIMAL(precision, scale), the text AppendDecimal would append for it: then s can be taken as it
// is, which checking costs a fraction of parsing and rendering it. precision and scale are a valid
// DECIMAL type's.
func IsCanonicalDecimal(s string, precision, scale int) bool {
	i, neg := 0, false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	ints := i - start
	nonzero := false
	switch {
	case ints == 0:
		return false
	case s[start] != '0':
		nonzero = true
		if ints > precision-scale {
			return false
		}
	case ints > 1:
		return false // a leading zero
	}
	if scale > 0 {
		if i == len(s) || s[i] != '.' || len(s)-i-1 != scale {
			return false
		}
		for _, c := range []byte(s[i+1:]) {
			if !isDigit(c) {
				return false
			}
			nonzero = nonzero || c != '0'
		}
		i = len(s)
	}
	return i == len(s) && (nonzero || !neg)
}

// ParseDecimal reads s, in the given syntax, as a value of DECIMAL(precision, scale), and returns
// its unscaled integer at that scale (19.99 at scale 2 is 1999). precision and scale are a valid
// DECIMAL type's (1 <= precision <= MaxDecimalPrecision, 0 <= scale <= precision), so the result
// is exact. Fractional digits beyond scale are accepted only when they are zeros: a value is never
// rounded. On failure the error is a *DecimalError wrapping ErrDecimalSyntax, ErrDecimalRounding or
// ErrDecimalOverflow; it does not contain s. ParseDecimal does not allocate unless it fails.
func ParseDecimal(s string, precision, scale int, syntax DecimalSyntax) (decimal128.Num, error) {
	var d decimalText
	if err := d.parse(s, precision, scale, syntax); err != nil {
		return decimal128.Num{}, err
	}
	return d.decimal128(), nil
}

// decimalText is a parsed number; it refers to the text it was parsed from (nothing is copied).
// Parsing writes it in place: returned by value, it does not fit the result registers and is
// copied.
type decimalText struct {
	// a and b are the significant digits, leading zeros and fractional trailing zeros removed, in
	// the two runs the text wrote them in (before and after its decimal point); none for zero.
	a, b string
	// point is how many of the digits stand before the decimal point: negative for 0.00ddd, more
	// than there are for ddd000.
	point int
	neg   bool
	scale int
}

// parse reads s for DECIMAL(precision, scale) into d (see ParseDecimal).
func (d *decimalText) parse(s string, precision, scale int, syntax DecimalSyntax) error {
	if syntax == DecimalLoose {
		start, end := 0, len(s)
		for start < end && (s[start] == ' ' || s[start] == '\t') {
			start++
		}
		for end > start && (s[end-1] == ' ' || s[end-1] == '\t') {
			end--
		}
		s = s[start:end]
	}
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart, frac := s[start:i], ""
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[start:i]
	}
	if len(intPart)+len(frac) == 0 {
		return decimalError(ErrDecimalSyntax, precision, scale)
	}
	exp := 0
	if syntax == DecimalLoose && i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return decimalError(ErrDecimalSyntax, precision, scale)
		}
		for ; i < len(s) && isDigit(s[i]); i++ {
			if exp < 1_000_000 { // beyond that, any digit makes it overflow or need rounding
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return decimalError(ErrDecimalSyntax, precision, scale)
	}
	// Leading zeros: of the integer digits and, when those are all zeros, of the fraction's. Then
	// trailing zeros after the decimal point: of the fraction and, when an exponent moved the point
	// left, of the integer digits.
	point := len(intPart) + exp
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
		point--
	}
	if intPart == "" {
		for len(frac) > 0 && frac[0] == '0' {
			frac = frac[1:]
			point--
		}
	}
	for len(frac) > 0 && len(intPart)+len(frac) > point && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if frac == "" {
		for len(intPart) > max(point, 0) && intPart[len(intPart)-1] == '0' {
			intPart = intPart[:len(intPart)-1]
		}
	}
	n := len(intPart) + len(frac)
	if n == 0 {
		*d = decimalText{scale: scale}
		return nil
	}
	if n-point > scale {
		return decimalError(ErrDecimalRounding, precision, scale)
	}
	if point > precision-scale {
		return decimalError(ErrDecimalOverflow, precision, scale)
	}
	// (field by field: a composite literal is built on the stack and copied with wider loads than
	// its stores, a store-forwarding stall that cost a third of the time)
	d.a, d.b, d.point, d.scale, d.neg = intPart, frac, point, scale, neg
	return nil
}

func decimalError(err error, precision, scale int) error {
	return &DecimalError{Err: err, Precision: precision, Scale: scale}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (d *decimalText) len() int { return len(d.a) + len(d.b) }

// appendDigits appends the significant digits [from, to), 0 <= from <= to <= d.len().
func (d *decimalText) appendDigits(dst []byte, from, to int) []byte {
	a, b := d.a, d.b
	if from < len(a) {
		dst = append(dst, a[from:min(to, len(a))]...)
	}
	if to > len(a) {
		dst = append(dst, b[max(from-len(a), 0):to-len(a)]...)
	}
	return dst
}

func appendZeros(dst []byte, n int) []byte {
	for ; n > 0; n-- {
		dst = append(dst, '0')
	}
	return dst
}

// appendText appends d's canonical text (see AppendDecimal).
func (d *decimalText) appendText(dst []byte) []byte {
	n := d.len()
	if d.neg && n > 0 {
		dst = append(dst, '-')
	}
	if d.point <= 0 {
		dst = append(dst, '0')
	} else {
		dst = appendZeros(d.appendDigits(dst, 0, min(d.point, n)), d.point-n)
	}
	if d.scale == 0 {
		return dst
	}
	dst = append(dst, '.')
	// the fractional digits: zeros up to the first significant one, the digits after the point,
	// zeros up to the scale
	lead := min(max(-d.point, 0), d.scale)
	dst = appendZeros(dst, lead)
	from, to := max(d.point, 0), min(n, d.point+d.scale)
	if from < to {
		dst = d.appendDigits(dst, from, to)
	} else {
		to = from
	}
	return appendZeros(dst, d.scale-lead-(to-from))
}

// decimal128 returns d's unscaled integer at its scale; parse admitted at most precision <= 38
// digits, so it fits.
func (d *decimalText) decimal128() decimal128.Num {
	n := d.len()
	if n == 0 {
		return decimal128.Num{}
	}
	pad := d.scale + d.point - n // zeros after the digits: the integer part's, then the fraction's
	var num decimal128.Num
	if n+pad <= 19 { // fits 64 bits, as every DECIMAL(18) does
		v := (digitsU64(d.a)*pow10u64[len(d.b)] + digitsU64(d.b)) * pow10u64[pad]
		num = decimal128.FromU64(v)
	} else {
		var hi, lo uint64
		addDigits(&hi, &lo, d.a)
		addDigits(&hi, &lo, d.b)
		for ; pad > 0; pad -= min(pad, 19) {
			mulAdd(&hi, &lo, pow10u64[min(pad, 19)], 0)
		}
		num = decimal128.New(int64(hi), lo)
	}
	if d.neg {
		num = num.Negate()
	}
	return num
}

// digitsU64 returns the value of at most 19 decimal digits.
func digitsU64(s string) uint64 {
	var v uint64
	for i := 0; i < len(s); i++ {
		v = v*10 + uint64(s[i]-'0')
	}
	return v
}

// addDigits sets (hi,lo) = (hi,lo)*10^len(run) + run, 19 digits at a time.
func addDigits(hi, lo *uint64, run string) {
	for len(run) > 0 {
		n := min(len(run), 19)
		mulAdd(hi, lo, pow10u64[n], digitsU64(run[:n]))
		run = run[n:]
	}
}

var pow10u64 = func() [20]uint64 {
	var p [20]uint64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// mulAdd sets (hi,lo) = (hi,lo)*m + a; callers keep the result below 10^38.
func mulAdd(hi, lo *uint64, m, a uint64) {
	h, l := bits.Mul64(*lo, m)
	*hi = *hi*m + h
	var carry uint64
	*lo, carry = bits.Add64(l, a, 0)
	*hi += carry
}
