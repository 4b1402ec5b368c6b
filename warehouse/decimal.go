package warehouse

import (
	"math/bits"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

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
		q, r := bits.Div64(hi, lo, 1e19)
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
