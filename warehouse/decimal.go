package warehouse

import (
	"math/bits"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// decimalProblem says why decimal text was refused, without quoting it.
type decimalProblem int

const (
	decimalOK decimalProblem = iota
	decimalSyntax
	decimalRounding
	decimalOverflow
)

func (p decimalProblem) describe(precision, scale int) string {
	switch p {
	case decimalSyntax:
		return "decimal text is not a number (want an optional sign, digits and an optional fraction)"
	case decimalRounding:
		return "decimal text has more than " + strconv.Itoa(scale) + " significant fractional digits and would need rounding for DECIMAL(" + strconv.Itoa(precision) + "," + strconv.Itoa(scale) + ")"
	case decimalOverflow:
		return "decimal text has more than " + strconv.Itoa(precision-scale) + " integer digits and overflows DECIMAL(" + strconv.Itoa(precision) + "," + strconv.Itoa(scale) + ")"
	}
	return ""
}

var pow10u64 = func() [20]uint64 {
	var p [20]uint64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// parseDecimal parses canonical decimal text exactly: an optional sign, digits, and an optional
// fraction ("12", "-0.5", "+.25", "3."). Fractional digits beyond scale are accepted only when they
// are zeros. precision is at most 38.
func parseDecimal(s string, precision, scale int) (decimal128.Num, decimalProblem) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[intStart:i]
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		fracStart := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac = s[fracStart:i]
	}
	if i != len(s) || len(intPart)+len(frac) == 0 {
		return decimal128.Num{}, decimalSyntax
	}
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(frac) > scale {
		return decimal128.Num{}, decimalRounding
	}
	if len(intPart) > precision-scale {
		return decimal128.Num{}, decimalOverflow
	}
	// The unscaled value has at most 38 digits: accumulate it in 128 bits, 19 digits at a time.
	var hi, lo uint64
	addDigits := func(d string) {
		for len(d) > 0 {
			n := min(len(d), 19)
			var chunk uint64
			for _, c := range []byte(d[:n]) {
				chunk = chunk*10 + uint64(c-'0')
			}
			mulAdd(&hi, &lo, pow10u64[n], chunk)
			d = d[n:]
		}
	}
	addDigits(intPart)
	addDigits(frac)
	for pad := scale - len(frac); pad > 0; {
		n := min(pad, 19)
		mulAdd(&hi, &lo, pow10u64[n], 0)
		pad -= n
	}
	num := decimal128.New(int64(hi), lo)
	if neg {
		num = num.Negate()
	}
	return num, decimalOK
}

// mulAdd sets (hi,lo) = (hi,lo)*m + a; callers keep the result below 10^38.
func mulAdd(hi, lo *uint64, m, a uint64) {
	h, l := bits.Mul64(*lo, m)
	*hi = *hi*m + h
	var carry uint64
	*lo, carry = bits.Add64(l, a, 0)
	*hi += carry
}

// appendDecimal appends n as text with exactly scale fractional digits, as decimal128.Num.ToString
// does ("-0.50" for -50 at scale 2), without allocating.
func appendDecimal(dst []byte, n decimal128.Num, scale int) []byte {
	hi, lo := uint64(n.HighBits()), n.LowBits()
	if n.Sign() < 0 {
		dst = append(dst, '-')
		abs := n.Negate()
		hi, lo = uint64(abs.HighBits()), abs.LowBits()
	}
	var digits [40]byte
	d := digits[:0]
	if hi == 0 {
		d = strconv.AppendUint(d, lo, 10)
	} else {
		// |n| < 10^38, so hi < 10^19 and the quotient fits 64 bits.
		q, r := bits.Div64(hi, lo, pow10u64[19])
		d = strconv.AppendUint(d, q, 10)
		var rb [19]byte
		rs := strconv.AppendUint(rb[:0], r, 10)
		for k := len(rs); k < 19; k++ {
			d = append(d, '0')
		}
		d = append(d, rs...)
	}
	if scale == 0 {
		return append(dst, d...)
	}
	if len(d) <= scale {
		dst = append(dst, '0', '.')
		for k := len(d); k < scale; k++ {
			dst = append(dst, '0')
		}
		return append(dst, d...)
	}
	at := len(d) - scale
	dst = append(dst, d[:at]...)
	dst = append(dst, '.')
	return append(dst, d[at:]...)
}
