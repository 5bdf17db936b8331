package gguf

import "math"

// K-quant encoders: Go transcriptions of the arithmetic of llama.cpp's quantize_row_q*_K_ref
// (the path llama-quantize takes without an importance matrix), keeping every float32
// operation and its order so the output is byte-identical. Products that are then added are
// wrapped in float32() so they are never fused into an FMA.

// groupMaxEps is ggml's GROUP_MAX_EPS: below it a group counts as all zeros.
const groupMaxEps float32 = 1e-15

func sqrt32(f float32) float32 {
	// A float64 square root rounded to float32 is the correctly rounded float32 sqrtf.
	return float32(math.Sqrt(float64(f)))
}

func clamp32(v, lo, hi int32) int32 { return max(lo, min(hi, v)) }

// makeQKX2 is make_qkx2_quants: fit x ≈ scale*L + min (min <= 0) with L in [0, nmax] by
// trying nstep+1 scales around nmax/(max-min) and solving weighted least squares for each.
// It returns the scale and -min.
func makeQKX2(x, weights []float32, L, Laux []uint8, nmax int32, rmin, rdelta float32, nstep int, useMAD bool) (float32, float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:n])
		return 0, -lo
	}
	fmax := float32(nmax)
	errOf := func(diff float32) float32 {
		if useMAD {
			return abs32(diff)
		}
		return diff * diff
	}
	iscale := fmax / (hi - lo)
	scale := 1 / iscale
	var bestErr float32
	for i := range n {
		l := clamp32(nearestInt(iscale*(x[i]-lo)), 0, nmax)
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + lo - x[i]
		bestErr += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := clamp32(nearestInt(iscale*(x[i]-lo)), 0, nmax)
			Laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(w * fl * fl)
			sumXL += float32(w * fl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if !(D > 0) {
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var curErr float32
		for i := range n {
			diff := float32(thisScale*float32(Laux[i])) + thisMin - x[i]
			curErr += float32(weights[i] * errOf(diff))
		}
		if curErr < bestErr {
			copy(L[:n], Laux[:n])
			bestErr = curErr
			scale = thisScale
			lo = thisMin
		}
	}
	return scale, -lo
}

// signedMax returns the element of largest magnitude (first on ties) and that magnitude.
func signedMax(x []float32) (m, amax float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, m = a, v
		}
	}
	return m, amax
}

// makeQ3 is make_q3_quants with do_rmse: symmetric levels in [-nmax, nmax-1] weighted by x²,
// refined coordinate-wise. L receives the levels biased by nmax.
func makeQ3(x []float32, L []int8, nmax int32) float32 {
	mx, amax := signedMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := float32(-nmax) / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := clamp32(nearestInt(iscale*v), -nmax, nmax-1)
		L[i] = int8(l)
		w, fl := v*v, float32(l)
		sumlx += float32(w * v * fl)
		suml2 += float32(w * fl * fl)
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w, li := v*v, float32(L[i])
			slx := sumlx - float32(w*v*li)
			if !(slx > 0) {
				continue
			}
			sl2 := suml2 - float32(w*li*li)
			nl := clamp32(nearestInt(v*sl2/slx), -nmax, nmax-1)
			if nl == int32(L[i]) {
				continue
			}
			fl := float32(nl)
			slx += float32(w * v * fl)
			sl2 += float32(w * fl * fl)
			if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
				L[i], sumlx, suml2 = int8(nl), slx, sl2
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQX is make_qx_quants with rmse_type 1 and no importance weights (weights x²): symmetric
// levels in [-nmax, nmax-1], trying 18 scales around nmax/max. L receives levels biased by nmax.
func makeQX(x []float32, L []uint8, nmax int32) float32 {
	mx, amax := signedMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	fmax := float32(nmax)
	sums := func(iscale float32) (sumlx, suml2 float32) {
		for _, v := range x {
			l := clamp32(nearestInt(iscale*v), -nmax, nmax-1)
			w, fl := v*v, float32(l)
			sumlx += float32(w * v * fl)
			suml2 += float32(w * fl * fl)
		}
		return sumlx, suml2
	}
	setL := func(iscale float32) {
		for i, v := range x {
			L[i] = uint8(nmax + clamp32(nearestInt(iscale*v), -nmax, nmax-1))
		}
	}
	iscale := -fmax / mx
	setL(iscale)
	sumlx, suml2 := sums(iscale)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	const tenth float32 = 0.1
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fmax + float32(tenth*float32(is))) / mx
		sumlx, suml2 = sums(iscale)
		if suml2 > 0 && sumlx*sumlx > best*suml2 {
			setL(iscale)
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// packQ2 stores 2-bit levels as Q2_K and Q3_K do: byte j/4+l of each 128-element half holds
// elements l, l+32, l+64, l+96 at bits 0, 2, 4, 6.
func packQ2(L []uint8, qs []byte) {
	for j := 0; j < qk; j += 128 {
		for l := range 32 {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

func encodeQ2_K(src []float32, dst []byte) {
	var L [qk]uint8
	var Laux [16]uint8
	var weights [16]float32
	var scales, mins [16]float32
	for b := range len(src) / qk {
		x := src[b*qk : (b+1)*qk]
		y := dst[b*sizeQ2_K : (b+1)*sizeQ2_K]
		var maxScale, maxMin float32
		for j := range 16 {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2(xs, weights[:], L[16*j:16*j+16], Laux[:], 3, -0.5, 0.1, 15, true)
			maxScale = max32(maxScale, scales[j])
			maxMin = max32(maxMin, mins[j])
		}
		sc := y[0:16]
		clear(sc)
		putF16(y[80:], 0)
		if maxScale > 0 {
			iscale := 15 / maxScale
			for j := range 16 {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			putF16(y[80:], maxScale/15)
		}
		putF16(y[82:], 0)
		if maxMin > 0 {
			iscale := 15 / maxMin
			for j := range 16 {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			putF16(y[82:], maxMin/15)
		}
		dAll, minAll := f16At(y[80:]), f16At(y[82:])
		for j := range 16 {
			d := dAll * float32(sc[j]&0x0F)
			if d == 0 {
				continue
			}
			dm := minAll * float32(sc[j]>>4)
			for i := range 16 {
				L[16*j+i] = uint8(clamp32(nearestInt((x[16*j+i]+dm)/d), 0, 3))
			}
		}
		packQ2(L[:], y[16:80])
	}
}

// max32 is C's `if (v > m) m = v`, which keeps m on NaN.
func max32(m, v float32) float32 {
	if v > m {
		return v
	}
	return m
}

func encodeQ3_K(src []float32, dst []byte) {
	var L [qk]int8
	var scales [16]float32
	for b := range len(src) / qk {
		x := src[b*qk : (b+1)*qk]
		y := dst[b*sizeQ3_K : (b+1)*sizeQ3_K]
		var maxScale, amax float32
		for j := range 16 {
			scales[j] = makeQ3(x[16*j:16*j+16], L[16*j:16*j+16], 4)
			if a := abs32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		sb := y[96:108]
		clear(sb)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range 16 {
				l := clamp32(int32(int8(nearestInt(iscale*scales[j]))), -32, 31) + 32
				if j < 8 {
					sb[j] = uint8(l & 0x0F)
				} else {
					sb[j-8] |= uint8(l&0x0F) << 4
				}
				sb[8+j%4] |= uint8(l>>4) << (2 * (j / 4))
			}
			putF16(y[108:], 1/iscale)
		} else {
			putF16(y[108:], 0)
		}
		dAll := f16At(y[108:])
		for j := range 16 {
			d := dAll * float32(q3Scale(sb, j)-32)
			if d == 0 {
				continue
			}
			for i := range 16 {
				L[16*j+i] = int8(clamp32(nearestInt(x[16*j+i]/d), -4, 3) + 4)
			}
		}
		hmask := y[0:32]
		clear(hmask)
		var L2 [qk]uint8
		for j, l := range L {
			if l > 3 {
				hmask[j%32] |= 1 << (j / 32)
				l -= 4
			}
			L2[j] = uint8(l)
		}
		packQ2(L2[:], y[32:96])
	}
}

// encodeK4Scales packs Q4_K/Q5_K's eight 6-bit scales and mins (the inverse of scaleMinK4) and
// stores the super-block scales; it returns the f16-rounded d and dmin the quants use.
func encodeK4Scales(y []byte, scales, mins []float32, maxScale, maxMin float32) (float32, float32) {
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sb := y[4:16]
	for j := range 8 {
		ls := min(63, uint8(nearestInt(invScale*scales[j])))
		lm := min(63, uint8(nearestInt(invMin*mins[j])))
		if j < 4 {
			sb[j], sb[j+4] = ls, lm
		} else {
			sb[j+4] = ls&0x0F | (lm&0x0F)<<4
			sb[j-4] |= ls >> 4 << 6
			sb[j] |= lm >> 4 << 6
		}
	}
	putF16(y, maxScale/63)
	putF16(y[2:], maxMin/63)
	return f16At(y), f16At(y[2:])
}

// quantizeK4 runs the shared part of quantize_row_q4_K_ref and q5_K_ref on one super-block:
// per-32 scale/min search, scale packing into y, and the final levels in [0, nmax] into L.
func quantizeK4(x []float32, y []byte, L *[qk]uint8, nmax int32, rmin, rdelta float32, nstep int) {
	var Laux [32]uint8
	var weights [32]float32
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2(xs, weights[:], L[32*j:32*j+32], Laux[:], nmax, rmin, rdelta, nstep, false)
		maxScale = max32(maxScale, scales[j])
		maxMin = max32(maxMin, mins[j])
	}
	dAll, minAll := encodeK4Scales(y, scales[:], mins[:], maxScale, maxMin)
	for j := range 8 {
		sc, m := scaleMinK4(j, y[4:16])
		d := dAll * float32(sc)
		if d == 0 {
			continue
		}
		dm := minAll * float32(m)
		for i := range 32 {
			L[32*j+i] = uint8(clamp32(nearestInt((x[32*j+i]+dm)/d), 0, nmax))
		}
	}
}

func encodeQ4_K(src []float32, dst []byte) {
	var L [qk]uint8
	for b := range len(src) / qk {
		x := src[b*qk : (b+1)*qk]
		y := dst[b*sizeQ4_K : (b+1)*sizeQ4_K]
		quantizeK4(x, y, &L, 15, -1, 0.1, 20)
		qs := y[16:144]
		for j := 0; j < qk; j += 64 {
			for l := range 32 {
				qs[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
	}
}

func encodeQ5_K(src []float32, dst []byte) {
	var L [qk]uint8
	for b := range len(src) / qk {
		x := src[b*qk : (b+1)*qk]
		y := dst[b*sizeQ5_K : (b+1)*sizeQ5_K]
		quantizeK4(x, y, &L, 31, -0.5, 0.1, 15)
		qh, ql := y[16:48], y[48:176]
		clear(qh)
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < qk; n += 64 {
			for j := range 32 {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[n/2+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
	}
}

func encodeQ6_K(src []float32, dst []byte) {
	var L [qk]uint8
	var scales [16]float32
	for b := range len(src) / qk {
		x := src[b*qk : (b+1)*qk]
		y := dst[b*sizeQ6_K : (b+1)*sizeQ6_K]
		var maxScale, maxAbs float32
		for j := range 16 {
			scales[j] = makeQX(x[16*j:16*j+16], L[16*j:16*j+16], 32)
			if a := abs32(scales[j]); a > maxAbs {
				maxAbs, maxScale = a, scales[j]
			}
		}
		if maxAbs < groupMaxEps {
			clear(y)
			continue
		}
		iscale := -128 / maxScale
		putF16(y[208:], 1/iscale)
		sc := y[192:208]
		for j := range 16 {
			sc[j] = uint8(int8(min(127, nearestInt(iscale*scales[j]))))
		}
		dAll := f16At(y[208:])
		for j := range 16 {
			d := dAll * float32(int8(sc[j]))
			if d == 0 {
				continue
			}
			for i := range 16 {
				L[16*j+i] = uint8(clamp32(nearestInt(x[16*j+i]/d), -32, 31) + 32)
			}
		}
		ql, qh := y[0:128], y[128:192]
		for j := 0; j < qk; j += 128 {
			for l := range 32 {
				a, b, c, e := L[j+l], L[j+l+32], L[j+l+64], L[j+l+96]
				ql[j/2+l] = a&0x0F | c<<4
				ql[j/2+l+32] = b&0x0F | e<<4
				qh[j/4+l] = a>>4 | b>>4<<2 | c>>4<<4 | e>>4<<6
			}
		}
	}
}
