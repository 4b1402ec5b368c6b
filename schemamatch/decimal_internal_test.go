package schemamatch

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPutDecimalIsAppendUnscaled checks putDecimal, decimalText's formatter for the usual case,
// against the general layout on random and edge magnitudes, for every precision and every scale up
// to 20.
func TestPutDecimalIsAppendUnscaled(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	mags := []uint64{0, 1, 9, 10, 99, 100, 999, 1000, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64, 9999999999999999999, 10000000000000000000}
	for range 2000 {
		mags = append(mags, rng.Uint64()>>rng.IntN(64))
	}
	var scratch []byte
	for prec := int32(1); prec <= 38; prec++ {
		for scale := int32(1); scale <= min(prec, 20); scale++ {
			dst := make([]byte, prec+3)
			for _, mag := range mags {
				for _, neg := range []bool{false, true} {
					var want []byte
					var wantOK bool
					want, scratch, wantOK = appendUnscaled(nil, scratch, neg, 0, mag, 0, scale, prec)
					n, ok := putDecimal(dst, neg, mag, scale, prec)
					if ok != wantOK || ok && string(dst[:n]) != string(want) {
						t.Fatalf("putDecimal(neg %v, %d, scale %d, prec %d) = %q, %v; want %q, %v", neg, mag, scale, prec, dst[:n], ok, want, wantOK)
					}
				}
			}
		}
	}
}
