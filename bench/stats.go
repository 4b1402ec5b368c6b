package bench

import (
	"math"
	"slices"
)

// spread is the minimum, median and maximum of a set of values (the median of an even count is the
// mean of the middle two). An empty set gives NaNs.
type spread struct{ min, median, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return spread{min: s[0], median: med, max: s[n-1]}
}
