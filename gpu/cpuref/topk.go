package cpuref

import (
	"cmp"
	"math"
	"slices"
)

// TopK returns, for every row of n values of x, the indices of its k largest values (all n
// when n < k), ordered by descending value and then ascending index (a stable sort by
// descending value), those values, and the row's log-sum-exp, log sum_j exp(x_j).
func TopK(x []float32, n, k int) (ids [][]int32, vals [][]float32, lse []float64) {
	for r := 0; r < len(x)/n; r++ {
		row := x[r*n : (r+1)*n]
		order := make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(row[b], row[a]) })
		order = order[:min(k, n)]
		v := make([]float32, len(order))
		for i, id := range order {
			v[i] = row[id]
		}
		top := float64(row[order[0]])
		var sum float64
		for _, x := range row {
			sum += math.Exp(float64(x) - top)
		}
		ids, vals, lse = append(ids, order), append(vals, v), append(lse, top+math.Log(sum))
	}
	return ids, vals, lse
}
