package schemamatch

import (
	"fmt"
	"math/big"
	"math/bits"
	"strconv"
	"unsafe"

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

// decimalText casts a decimal array to its text, as decimal128.Num.ToString renders it at the
// target's scale, written straight into the result's offsets and values: every text that fits the
// target's precision takes at most prec+3 bytes (a sign, a leading zero and a point), so each value
// has a slot of that width and the values buffer is sized once. A value with more digits than the
// precision fails (c.fail), or becomes null when the failure is rescued.
func (c *applyCtx) decimalText(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	up, scale, prec := n.dstScale-n.srcScale, n.dstScale, n.dstPrec
	// value returns value i's sign and magnitude hi:lo, or wide for one beyond 128 bits (the switch on
	// the array's type is made once, not per value).
	var value func(i int) (neg bool, hi, lo uint64, wide *big.Int)
	switch a := in.(type) {
	case *array.Decimal32:
		value = func(i int) (bool, uint64, uint64, *big.Int) {
			neg, mag := magnitude64(int64(a.Value(i)))
			return neg, 0, mag, nil
		}
	case *array.Decimal64:
		value = func(i int) (bool, uint64, uint64, *big.Int) {
			neg, mag := magnitude64(int64(a.Value(i)))
			return neg, 0, mag, nil
		}
	case *array.Decimal128:
		vals := a.Values()
		value = func(i int) (bool, uint64, uint64, *big.Int) {
			neg, hi, lo := magnitude128(vals[i].HighBits(), vals[i].LowBits())
			return neg, hi, lo, nil
		}
	case *array.Decimal256:
		value = func(i int) (bool, uint64, uint64, *big.Int) {
			v := a.Value(i)
			if w := v.Array(); w[2] == uint64(int64(w[1])>>63) && w[3] == w[2] { // fits 128 bits
				neg, hi, lo := magnitude128(int64(w[1]), w[0])
				return neg, hi, lo, nil
			}
			return false, 0, 0, v.BigInt()
		}
	default:
		return nil, fmt.Errorf("schemamatch: %s is not a decimal", in.DataType())
	}
	ln := in.Len()
	width := int(prec) + 3
	offBuf, rawOff := alloc(c.mem, ln+1, 8)
	dataBuf, data := alloc(c.mem, ln, width)
	offs := arrow.Int64Traits.CastFromBytes(rawOff)
	var scratch []byte
	var extraNulls []int
	pos, nulls, usual := 0, in.NullN() > 0, up == 0 && scale > 0
	for i := 0; i < ln; i++ {
		offs[i] = int64(pos)
		if nulls && in.IsNull(i) {
			continue
		}
		neg, hi, lo, wide := value(i)
		slot := data[pos : pos : pos+width]
		var out []byte
		var ok bool
		switch {
		case wide != nil:
			out, scratch, ok = appendBigDecimal(slot, scratch, wide, up, scale, prec)
		case hi == 0 && usual:
			var k int
			k, ok = putDecimal(slot[:width], neg, lo, scale, prec)
			out = slot[:k]
		default:
			out, scratch, ok = appendUnscaled(slot, scratch, neg, hi, lo, up, scale, prec)
		}
		if !ok {
			if err := c.fail(n, in, reach, i, fmt.Sprintf("value has more digits than DECIMAL(%d,%d) holds", prec, scale)); err != nil {
				release(offBuf, dataBuf)
				return nil, err
			}
			extraNulls = append(extraNulls, i)
			continue
		}
		if len(out) > width { // appended past its slot, so into another buffer
			release(offBuf, dataBuf)
			return nil, fmt.Errorf("schemamatch: DECIMAL(%d,%d) text of %d bytes, more than %d", prec, scale, len(out), width)
		}
		pos += len(out)
	}
	offs[ln] = int64(pos)
	dataBuf.ResizeNoShrink(pos)
	valid, nullN := validityWithNulls(c.mem, in, extraNulls)
	nd := array.NewData(arrow.BinaryTypes.LargeString, ln, []*memory.Buffer{valid, offBuf, dataBuf}, nil, nullN, 0)
	release(valid, offBuf, dataBuf)
	defer nd.Release()
	return array.MakeFromData(nd), nil
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

// textDecimal checks and normalizes decimal text into the canonical text of the table's DECIMAL.
// Text that is canonical already (as a frame's own is) is copied as it is: checking it costs a
// fraction of parsing and rendering it.
func (c *applyCtx) textDecimal(n *node, in arrow.Array, reach []int) (arrow.Array, error) {
	var value func(int) string
	size := 0 // the text's bytes, what the output takes when it is canonical
	switch a := in.(type) {
	case *array.String:
		value, size = a.Value, len(a.ValueBytes())
	case *array.LargeString:
		value, size = a.Value, len(a.ValueBytes())
	case *array.StringView:
		value = a.Value
	default:
		return nil, fmt.Errorf("schemamatch: %s is not text", in.DataType())
	}
	b := array.NewLargeStringBuilder(c.mem)
	defer b.Release()
	ln := in.Len()
	b.Reserve(ln)
	b.ReserveData(size)
	prec, scale := int(n.dstPrec), int(n.dstScale)
	var buf []byte
	for i := 0; i < ln; i++ {
		if in.IsNull(i) {
			b.AppendNull()
			continue
		}
		s := value(i)
		if tableschema.IsCanonicalDecimal(s, prec, scale) {
			b.BinaryBuilder.Append(unsafe.Slice(unsafe.StringData(s), len(s))) // it copies the bytes, which it only reads
			continue
		}
		var err error
		if buf, err = tableschema.AppendDecimal(buf[:0], s, prec, scale, tableschema.DecimalLoose); err != nil {
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

// digitPairs holds the two digits of 00 to 99.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// putDecimal writes the text of the decimal whose sign is neg and unscaled magnitude mag, with
// scale (positive) fractional digits, into dst (room for prec+3 bytes), as appendDecimalDigits lays
// it out, and returns its length; ok is false when mag has more than prec digits. It is
// decimalText's formatter for the usual case.
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
