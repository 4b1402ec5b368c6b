package schemamatch

import (
	"fmt"
	"math/big"
	"math/bits"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
)

// appendDecimalDigits lays out a non-negative magnitude (decimal digits without leading zeros, or
// "0") multiplied by 10^up as text with scale fractional digits, exactly as
// decimal128.Num.ToString(scale) renders the scaled number. ok is false when the scaled magnitude
// has more than prec digits.
func appendDecimalDigits(dst []byte, neg bool, digits []byte, up, scale, prec int32) ([]byte, bool) {
	zero := len(digits) == 1 && digits[0] == '0'
	total := int32(len(digits)) + up
	if zero {
		total = 1
	} else if total > prec {
		return dst, false
	}
	if neg && !zero {
		dst = append(dst, '-')
	}
	if up == 0 && !zero && total > scale && scale > 0 { // the usual case: the digits, a point inside
		at := total - scale
		dst = append(dst, digits[:at]...)
		dst = append(dst, '.')
		return append(dst, digits[at:]...), true
	}
	if scale <= 0 {
		dst = append(dst, digits...)
		if !zero {
			for k := int32(0); k < up; k++ {
				dst = append(dst, '0')
			}
		}
		return dst, true
	}
	// the full digit string is digits followed by up zeros (just "0" for zero)
	digitAt := func(k int32) byte {
		if zero {
			return '0'
		}
		if k < int32(len(digits)) {
			return digits[k]
		}
		return '0'
	}
	if total <= scale {
		dst = append(dst, '0', '.')
		for k := int32(0); k < scale-total; k++ {
			dst = append(dst, '0')
		}
		for k := int32(0); k < total; k++ {
			dst = append(dst, digitAt(k))
		}
		return dst, true
	}
	at := total - scale
	for k := int32(0); k < at; k++ {
		dst = append(dst, digitAt(k))
	}
	dst = append(dst, '.')
	for k := at; k < total; k++ {
		dst = append(dst, digitAt(k))
	}
	return dst, true
}

// appendUnscaled formats the integer whose sign is neg and whose magnitude is hi:lo, multiplied
// by 10^up, with scale fractional digits (see appendDecimalDigits). scratch holds its digits.
func appendUnscaled(dst, scratch []byte, neg bool, hi, lo uint64, up, scale, prec int32) ([]byte, []byte, bool) {
	scratch = appendUint128(scratch[:0], hi, lo)
	out, ok := appendDecimalDigits(dst, neg, scratch, up, scale, prec)
	return out, scratch, ok
}

// appendUint128 appends the decimal digits of hi:lo, without allocating.
func appendUint128(dst []byte, hi, lo uint64) []byte {
	if hi == 0 {
		return strconv.AppendUint(dst, lo, 10)
	}
	const e19 = 10_000_000_000_000_000_000
	// hi:lo = q*10^19 + r, with q >= 1 as hi:lo >= 2^64
	q, r := bits.Div64(hi%e19, lo, e19)
	dst = appendUint128(dst, hi/e19, q)
	var low [19]byte
	digits := strconv.AppendUint(low[:0], r, 10)
	for range 19 - len(digits) {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// magnitude64 splits v into its sign and magnitude.
func magnitude64(v int64) (bool, uint64) {
	if v < 0 {
		return true, -uint64(v)
	}
	return false, uint64(v)
}

// magnitude128 splits the two's-complement integer hi:lo into its sign and magnitude.
func magnitude128(hi int64, lo uint64) (neg bool, mhi, mlo uint64) {
	if hi >= 0 {
		return false, uint64(hi), lo
	}
	mlo, borrow := bits.Sub64(0, lo, 0)
	mhi, _ = bits.Sub64(0, uint64(hi), borrow)
	return true, mhi, mlo
}

// appendBigDecimal formats a value too wide for 128 bits (a decimal256 beyond its declared
// precision) through math/big.
func appendBigDecimal(dst, scratch []byte, v *big.Int, up, scale, prec int32) ([]byte, []byte, bool) {
	neg := v.Sign() < 0
	scratch = v.Abs(v).Append(scratch[:0], 10)
	out, ok := appendDecimalDigits(dst, neg, scratch, up, scale, prec)
	return out, scratch, ok
}

func (c *applyCtx) decimalText(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	if out := c.decimalTextFast(n, in); out != nil {
		return out, nil
	}
	b := array.NewLargeStringBuilder(c.mem)
	defer b.Release()
	ln := in.Len()
	b.Reserve(ln)
	b.ReserveData(ln * int(n.dstPrec/2+3))
	up := n.dstScale - n.srcScale
	var buf, scratch []byte
	// each appends value i's text to buf (the switch on the array's type is made once, not per value)
	var each func(i int) bool
	switch a := in.(type) {
	case *array.Decimal32:
		each = func(i int) (ok bool) {
			neg, mag := magnitude64(int64(a.Value(i)))
			buf, scratch, ok = appendUnscaled(buf, scratch, neg, 0, mag, up, n.dstScale, n.dstPrec)
			return ok
		}
	case *array.Decimal64:
		each = func(i int) (ok bool) {
			neg, mag := magnitude64(int64(a.Value(i)))
			buf, scratch, ok = appendUnscaled(buf, scratch, neg, 0, mag, up, n.dstScale, n.dstPrec)
			return ok
		}
	case *array.Decimal128:
		vals := a.Values()
		each = func(i int) (ok bool) {
			neg, hi, lo := magnitude128(vals[i].HighBits(), vals[i].LowBits())
			buf, scratch, ok = appendUnscaled(buf, scratch, neg, hi, lo, up, n.dstScale, n.dstPrec)
			return ok
		}
	case *array.Decimal256:
		each = func(i int) (ok bool) {
			v := a.Value(i)
			if w := v.Array(); w[2] == uint64(int64(w[1])>>63) && w[3] == w[2] { // fits 128 bits
				neg, hi, lo := magnitude128(int64(w[1]), w[0])
				buf, scratch, ok = appendUnscaled(buf, scratch, neg, hi, lo, up, n.dstScale, n.dstPrec)
			} else {
				buf, scratch, ok = appendBigDecimal(buf, scratch, v.BigInt(), up, n.dstScale, n.dstPrec)
			}
			return ok
		}
	default:
		return nil, fmt.Errorf("schemamatch: %s is not a decimal", in.DataType())
	}
	nulls := in.NullN() > 0
	for i := 0; i < ln; i++ {
		if nulls && in.IsNull(i) {
			b.AppendNull()
			continue
		}
		buf = buf[:0]
		if !each(i) {
			if err := c.fail(n, in, reach, i, fmt.Sprintf("value has more digits than DECIMAL(%d,%d) holds", n.dstPrec, n.dstScale)); err != nil {
				return nil, err
			}
			b.AppendNull()
			continue
		}
		b.BinaryBuilder.Append(buf)
	}
	return b.NewArray(), nil
}

func (c *applyCtx) intDecimalText(n *node, in arrow.Array) arrow.Array {
	b := array.NewLargeStringBuilder(c.mem)
	defer b.Release()
	ln := in.Len()
	b.Reserve(ln)
	b.ReserveData(ln * int(12+n.dstScale))
	u, unsigned := in.(*array.Uint64)
	var signed []int64
	if !unsigned { // widened once, not switched on per value
		vals, raw := alloc(c.mem, ln, 8)
		defer vals.Release()
		signed = arrow.Int64Traits.CastFromBytes(raw)
		widenInto(in, signed)
	}
	var buf, scratch []byte
	for i := 0; i < ln; i++ {
		if in.IsNull(i) {
			b.AppendNull()
			continue
		}
		var neg bool
		var mag uint64
		if unsigned {
			mag = u.Value(i)
		} else {
			neg, mag = magnitude64(signed[i])
		}
		buf, scratch, _ = appendUnscaled(buf[:0], scratch, neg, 0, mag, n.dstScale, n.dstScale, 1000)
		b.BinaryBuilder.Append(buf)
	}
	return b.NewArray()
}

func (c *applyCtx) textDecimal(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	b := array.NewLargeStringBuilder(c.mem)
	defer b.Release()
	ln := in.Len()
	b.Reserve(ln)
	var buf []byte
	for i := 0; i < ln; i++ {
		if in.IsNull(i) {
			b.AppendNull()
			continue
		}
		var s string
		switch a := in.(type) {
		case *array.String:
			s = a.Value(i)
		case *array.LargeString:
			s = a.Value(i)
		case *array.StringView:
			s = a.Value(i)
		default:
			return nil, fmt.Errorf("schemamatch: %s is not text", in.DataType())
		}
		var err error
		if buf, err = tableschema.AppendDecimal(buf[:0], s, int(n.dstPrec), int(n.dstScale), tableschema.DecimalLoose); err != nil {
			if err := c.fail(n, in, reach, i, err.Error()); err != nil {
				return nil, err
			}
			b.AppendNull()
			continue
		}
		b.BinaryBuilder.Append(buf)
	}
	return b.NewArray(), nil
}

// decimalTextFast is decimalText for the usual case: a decimal32, decimal64 or decimal128 array
// whose every valid value's magnitude fits 64 bits and within the target's precision, with as many
// fractional digits as the target's scale (a positive one). It writes the text straight into the
// values and offsets of the result, exactly as decimalText does through a builder, and returns nil
// (having allocated nothing it keeps) at the first value it cannot take: decimalText then starts
// over.
func (c *applyCtx) decimalTextFast(n *node, in arrow.Array) arrow.Array {
	scale, prec := n.dstScale, n.dstPrec
	if n.dstScale != n.srcScale || scale <= 0 || prec > 38 {
		return nil
	}
	var value func(i int) (neg bool, mag uint64, ok bool)
	switch a := in.(type) {
	case *array.Decimal32:
		value = func(i int) (bool, uint64, bool) {
			neg, mag := magnitude64(int64(a.Value(i)))
			return neg, mag, true
		}
	case *array.Decimal64:
		value = func(i int) (bool, uint64, bool) {
			neg, mag := magnitude64(int64(a.Value(i)))
			return neg, mag, true
		}
	case *array.Decimal128:
		vals := a.Values()
		value = func(i int) (bool, uint64, bool) {
			neg, hi, lo := magnitude128(vals[i].HighBits(), vals[i].LowBits())
			return neg, lo, hi == 0
		}
	default:
		return nil
	}
	d := in.Data()
	ln := d.Len()
	width := int(prec) + 3 // a sign, a leading zero and a point at most
	offBuf, rawOff := alloc(c.mem, ln+1, 8)
	dataBuf, data := alloc(c.mem, ln, width)
	offs := arrow.Int64Traits.CastFromBytes(rawOff)
	pos, nulls := 0, in.NullN() > 0
	for i := 0; i < ln; i++ {
		offs[i] = int64(pos)
		if nulls && in.IsNull(i) {
			continue
		}
		neg, mag, ok := value(i)
		if !ok {
			release(offBuf, dataBuf)
			return nil
		}
		k, ok := putDecimal(data[pos:pos+width], neg, mag, scale, prec)
		if !ok {
			release(offBuf, dataBuf)
			return nil
		}
		pos += k
	}
	offs[ln] = int64(pos)
	dataBuf.ResizeNoShrink(pos)
	valid := validity(c.mem, d)
	nd := array.NewData(arrow.BinaryTypes.LargeString, ln, []*memory.Buffer{valid, offBuf, dataBuf}, nil, d.NullN(), 0)
	release(valid, offBuf, dataBuf)
	defer nd.Release()
	return array.MakeFromData(nd)
}

// digitPairs holds the two digits of 00 to 99.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// putDecimal writes the text of the decimal whose sign is neg and unscaled magnitude mag, with
// scale (positive) fractional digits, into dst (room for prec+3 bytes), as appendDecimalDigits lays
// it out, and returns its length; ok is false when mag has more than prec digits.
func putDecimal(dst []byte, neg bool, mag uint64, scale, prec int32) (int, bool) {
	var tmp [20]byte // the digits, right-aligned
	i, v := len(tmp), mag
	for v >= 100 {
		q := v / 100
		r := (v - q*100) * 2
		i -= 2
		tmp[i], tmp[i+1] = digitPairs[r], digitPairs[r+1]
		v = q
	}
	if v >= 10 {
		i -= 2
		tmp[i], tmp[i+1] = digitPairs[2*v], digitPairs[2*v+1]
	} else {
		i--
		tmp[i] = '0' + byte(v)
	}
	digits := tmp[i:]
	total := int32(len(digits))
	if total > prec && mag != 0 {
		return 0, false
	}
	k := 0
	if neg && mag != 0 {
		dst[0] = '-'
		k = 1
	}
	if total > scale {
		at := int(total - scale)
		k += copy(dst[k:], digits[:at])
		dst[k] = '.'
		k++
		return k + copy(dst[k:], digits[at:]), true
	}
	dst[k], dst[k+1] = '0', '.'
	k += 2
	for range scale - total {
		dst[k] = '0'
		k++
	}
	return k + copy(dst[k:], digits), true
}
