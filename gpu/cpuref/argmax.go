package cpuref

import "math"

// Argmax returns, for every row of n values of x, the index of the largest value (the first
// on ties) and its softmax probability 1 / sum_j exp(x_j - max).
func Argmax(x []float32, n int) (ids []int32, probs []float32) {
	for r := 0; r < len(x)/n; r++ {
		row := x[r*n : (r+1)*n]
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - float64(row[best]))
		}
		ids = append(ids, int32(best))
		probs = append(probs, float32(1/sum))
	}
	return ids, probs
}
