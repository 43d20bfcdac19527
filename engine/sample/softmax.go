package sample

import "math"

// Greedy returns the index of the largest logit, the lowest index on ties.
// NaN counts as -Inf. It returns -1 for empty logits.
func Greedy(logits []float32) int32 {
	if len(logits) == 0 {
		return -1
	}
	best, bestV := 0, clean(logits[0])
	for i := 1; i < len(logits); i++ {
		if v := logits[i]; v > bestV {
			best, bestV = i, v
		}
	}
	return int32(best)
}

// LogSoftmax writes the natural log-probabilities of logits into dst:
// dst[i] = logits[i] - max - log(sum(exp(logits - max))), the sum
// accumulated in float64. The normalization runs over all of logits; only
// the first min(len(dst), len(logits)) values are written. dst may be logits
// itself. -Inf logits give -Inf; if all are -Inf the result is uniform; if
// some are +Inf they share the whole mass. NaN logits make the result NaN.
func LogSoftmax(dst, logits []float32) {
	n := min(len(dst), len(logits))
	if n == 0 {
		return
	}
	max := math.Inf(-1)
	for _, v := range logits {
		if float64(v) > max {
			max = float64(v)
		}
	}
	switch {
	case math.IsInf(max, -1):
		u := float32(-math.Log(float64(len(logits))))
		for i := range n {
			dst[i] = u
		}
		return
	case math.IsInf(max, 1):
		k := 0
		for _, v := range logits {
			if math.IsInf(float64(v), 1) {
				k++
			}
		}
		u := float32(-math.Log(float64(k)))
		for i := range n {
			if math.IsInf(float64(logits[i]), 1) {
				dst[i] = u
			} else if logits[i] != logits[i] {
				dst[i] = logits[i]
			} else {
				dst[i] = float32(math.Inf(-1))
			}
		}
		return
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - max)
	}
	shift := max + math.Log(sum)
	for i := range n {
		dst[i] = float32(float64(logits[i]) - shift)
	}
}
