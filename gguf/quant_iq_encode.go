package gguf

import "math"

// Encoders of the non-linear 4-bit types, Go transcriptions of the arithmetic llama-quantize
// runs through ggml_quantize_chunk: quantize_iq4_nl and quantize_iq4_xs (both
// quantize_row_iq4_nl_impl with 7 tries of scale either side of the first guess, not the
// single-guess quantize_row_iq4_nl_ref) and quantize_mxfp4 (quantize_row_mxfp4_ref). Every
// float32 operation is kept in llama.cpp's order, and products that are then added or
// subtracted are wrapped in float32() so they are never fused into an FMA, so the bytes match
// llama-quantize's. Each block depends only on its own values (and, with an importance matrix,
// on the weights of its columns), so any run of whole blocks encodes alike.

// iq4Tries is the ntry quantize_iq4_nl and quantize_iq4_xs pass to quantize_row_iq4_nl_impl:
// after the first guess, scales (t + iq4nlValues[0]) / max for t in [-7, 7] are tried.
const iq4Tries = 7

// bestIndexIQ4 is best_index_int8 over iq4nlValues: the index of the level nearest x, found by
// bisection, the upper of two equally near levels (and 15 for NaN, as in ggml).
func bestIndexIQ4(x float32) uint8 {
	v := &iq4nlValues
	if x <= float32(v[0]) {
		return 0
	}
	if x >= float32(v[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(v[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(v[mu-1]) < float32(v[mu])-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// iq4Sums returns the weighted least-squares sums sum(w*q*x) and sum(w*q*q) of x quantized to
// the levels nearest id*x, storing the chosen indices in L when it is not nil.
func iq4Sums(x, weight []float32, id float32, L []uint8) (sumqx, sumq2 float32) {
	for j, v := range x {
		l := bestIndexIQ4(id * v)
		if L != nil {
			L[j] = l
		}
		q := float32(iq4nlValues[l])
		wq := float32(weight[j] * q)
		sumqx += float32(wq * v)
		sumq2 += float32(wq * q)
	}
	return sumqx, sumq2
}

// iq4SuperBlock is quantize_row_iq4_nl_impl with ntry 7 for one super-block x of 32 (IQ4_NL)
// or 256 (IQ4_XS) values in sub-blocks of 32. qw holds the importance of each value (the
// importance matrix's entries for x's columns) or is nil. It writes the f16 scale to dh, the
// 4-bit indices to q4 (len(x)/2 bytes) and, for 256 values, the 6-bit sub-block scales to
// scales (scales_h then scales_l, 6 bytes).
func iq4SuperBlock(x, qw []float32, dh, scales, q4 []byte) {
	n := len(x)
	nb := n / 32
	var L [qk]uint8
	var subScales [qk / 32]float32
	var weight [32]float32

	var sigma2 float32
	for _, v := range x {
		sigma2 += float32(v * v)
	}
	sigma2 *= 2 / float32(n)

	var maxScale, amaxScale float32
	for ib := range nb {
		xb := x[32*ib : 32*ib+32]
		Lb := L[32*ib : 32*ib+32]
		if qw != nil {
			for j, v := range xb {
				weight[j] = qw[32*ib+j] * sqrt32(sigma2+float32(v*v))
			}
		} else {
			for j, v := range xb {
				weight[j] = v * v
			}
		}
		var amax, mx float32
		for _, v := range xb {
			if ax := abs32(v); ax > amax {
				amax, mx = ax, v
			}
		}
		if amax < groupMaxEps {
			subScales[ib] = 0
			continue
		}
		v0 := float32(iq4nlValues[0])
		d := -mx / v0
		sumqx, sumq2 := iq4Sums(xb, weight[:], 1/d, Lb)
		d = 0
		if sumq2 > 0 {
			d = sumqx / sumq2
		}
		best := d * sumqx
		for itry := -iq4Tries; itry <= iq4Tries; itry++ {
			id := float32(itry+int(iq4nlValues[0])) / mx
			sumqx, sumq2 := iq4Sums(xb, weight[:], id, nil)
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
				d = sumqx / sumq2
				best = d * sumqx
			}
		}
		subScales[ib] = d
		if ad := abs32(d); ad > amaxScale {
			amaxScale, maxScale = ad, d
		}
	}

	if nb > 1 {
		var scalesH uint16
		scalesL := scales[2:6]
		d := -maxScale / 32
		putF16(dh, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for ib := range nb {
			l := clamp32(nearestInt(id*subScales[ib]), -32, 31)
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for j, v := range x[32*ib : 32*ib+32] {
				L[32*ib+j] = bestIndexIQ4(idl * v)
			}
			l += 32
			if ib%2 == 0 {
				scalesL[ib/2] = uint8(l & 0xF)
			} else {
				scalesL[ib/2] |= uint8(l&0xF) << 4
			}
			scalesH |= uint16(l>>4) << (2 * (ib % 8))
		}
		scales[0], scales[1] = uint8(scalesH), uint8(scalesH>>8)
	} else {
		putF16(dh, subScales[0])
		var id float32
		if subScales[0] != 0 {
			id = 1 / subScales[0]
		}
		for j, v := range x {
			L[j] = bestIndexIQ4(id * v)
		}
	}

	for i := range n / 32 {
		for j := range 16 {
			q4[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}

// encodeIQ4NLWeighted is quantize_iq4_nl for rows of rowLen values with importance weights qw
// (one per column, shared by all rows; nil for none).
func encodeIQ4NLWeighted(src []float32, dst []byte, rowLen int, qw []float32) {
	for b := range len(src) / qkLegacy {
		var w []float32
		if qw != nil {
			col := b * qkLegacy % rowLen
			w = qw[col : col+qkLegacy]
		}
		y := dst[b*sizeIQ4_NL : (b+1)*sizeIQ4_NL]
		iq4SuperBlock(src[b*qkLegacy:(b+1)*qkLegacy], w, y[0:2], nil, y[2:18])
	}
}

// encodeIQ4XSWeighted is quantize_iq4_xs for rows of rowLen values with importance weights qw
// (one per column, shared by all rows; nil for none).
func encodeIQ4XSWeighted(src []float32, dst []byte, rowLen int, qw []float32) {
	for b := range len(src) / qk {
		var w []float32
		if qw != nil {
			col := b * qk % rowLen
			w = qw[col : col+qk]
		}
		y := dst[b*sizeIQ4_XS : (b+1)*sizeIQ4_XS]
		iq4SuperBlock(src[b*qk:(b+1)*qk], w, y[0:2], y[2:8], y[8:136])
	}
}

func encodeIQ4_NL(src []float32, dst []byte) { encodeIQ4NLWeighted(src, dst, len(src), nil) }

func encodeIQ4_XS(src []float32, dst []byte) { encodeIQ4XSWeighted(src, dst, len(src), nil) }

// log2f32 is glibc's log2f: the float32 nearest log2(f) (a float64 logarithm rounded once).
func log2f32(f float32) float32 { return float32(math.Log2(float64(f))) }

func encodeMXFP4(src []float32, dst []byte) {
	for b := range len(src) / qkLegacy {
		x := src[b*qkLegacy : (b+1)*qkLegacy]
		y := dst[b*sizeMXFP4 : (b+1)*sizeMXFP4]
		var amax float32
		for _, v := range x {
			if amax < abs32(v) {
				amax = abs32(v)
			}
		}
		// The shared exponent puts amax in the top binade of E2M1 (the levels up to 6 = 1.5*4):
		// floor(log2(amax)) - 2, biased by 127. C converts the float to uint8_t through a 32-bit
		// integer, so values of amax below 2^-125 wrap around as they do there.
		var e uint8
		if amax > 0 {
			e = uint8(int32(float32(math.Floor(float64(log2f32(amax)))) - 2 + 127))
		}
		d := e8m0ToF32Half(e)
		y[0] = e
		for j := range qkLegacy / 2 {
			y[1+j] = bestIndexMXFP4(x[j], d) | bestIndexMXFP4(x[j+qkLegacy/2], d)<<4
		}
	}
}

// bestIndexMXFP4 is best_index_mxfp4: the first of mxfp4Values whose multiple of e is nearest
// x.
func bestIndexMXFP4(x, e float32) uint8 {
	best := uint8(0)
	bestErr := abs32(float32(float32(mxfp4Values[0])*e) - x)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(mxfp4Values[i])*e) - x); err < bestErr {
			best, bestErr = uint8(i), err
		}
	}
	return best
}
