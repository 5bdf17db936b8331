package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Recurrent-state operations of the linear-attention (Gated DeltaNet) layers of Qwen3-Next
// and Qwen3.5, as llama.cpp computes them (src/models/qwen35.cpp, delta-net-base.cpp): the
// short causal convolution (SSMConv, ggml's ssm_conv), the L2 norm of the q and k heads
// (L2Norm, ggml's l2_norm) and the gated delta rule (DeltaNet, ggml's gated_delta_net). A
// layer's recurrent state is, per sequence, a conv state and a delta-rule state, each kept in
// a slot of a buffer that these kernels read and write in place.
//
// A batch holds tokens of one or more sequences, each sequence's tokens consecutive rows of
// the batch in order (RecurrentSeq); one dispatch serves all of them, each sequence continuing
// from its own slot. Slots are the caller's: a sequence that forks copies its slot first
// (CopyWithin), and two sequences of one batch never share one.
//
// Around these, qwen35's graph (build_layer_attn_linear) computes per token: qkv_mixed =
// wqkv·x (rows [q | k | v] of 2·n_group·d_state + d_inner) and z = wqkv_gate·x; beta =
// sigmoid(ssm_beta·x) and g = softplus(ssm_alpha·x + ssm_dt) · ssm_a (ssm_a = -exp(A_log)),
// one each per value head; then SSMConv with SiLU over qkv_mixed, L2Norm (eps f_norm_rms_eps)
// over the q and k heads, DeltaNet, and per value head RMSNorm(o)·ssm_norm·silu(z) (its
// build_norm_gated) before ssm_out. Those other steps are the existing kernels' or left to the
// model.

// RecurrentSeq is one sequence's part of a batch: its tokens are batch rows First ..
// First+Tokens-1, in order, and its states live in slot Slot of the state buffers.
type RecurrentSeq struct{ First, Tokens, Slot int }

// RecurrentBatch is a batch's sequences as the recurrent kernels take them: Buf holds
// PackRecurrentSeqs(Seqs) (3 u32 per sequence: first row, token count, slot), Seqs the same
// on the host, from which the grids are sized and the buffers checked. They must agree.
type RecurrentBatch struct {
	Buf  *Buffer
	Seqs []RecurrentSeq
}

// PackRecurrentSeqs is the bytes of a RecurrentBatch's Buf: per sequence its first row, token
// count and slot, little-endian u32.
func PackRecurrentSeqs(seqs []RecurrentSeq) []byte {
	out := make([]byte, 0, 12*len(seqs))
	for _, s := range seqs {
		out = binary.LittleEndian.AppendUint32(out, uint32(s.First))
		out = binary.LittleEndian.AppendUint32(out, uint32(s.Tokens))
		out = binary.LittleEndian.AppendUint32(out, uint32(s.Slot))
	}
	return out
}

// recurrentExtent checks the batch and returns, over its sequences with tokens, the rows they
// reach (the largest First + Tokens), the slots they use (the largest Slot + 1) and the most
// tokens one of them has.
func (r *Recorder) recurrentExtent(op string, b RecurrentBatch) (rows, slots, maxTokens int, ok bool) {
	n := len(b.Seqs)
	if n == 0 || n > int(r.d.Limits.MaxComputeWorkgroupsPerDimension) || b.Buf == nil || b.Buf.Size() < uint64(12*n) {
		r.fail("gpu: %s: %d sequences (at most %d), their buffer of 12 bytes each missing or short", op, n, r.d.Limits.MaxComputeWorkgroupsPerDimension)
		return 0, 0, 0, false
	}
	used := map[int]bool{}
	for _, s := range b.Seqs {
		if s.First < 0 || s.Tokens < 0 || s.Slot < 0 || s.First+s.Tokens > math.MaxInt32 || (s.Tokens > 0 && used[s.Slot]) {
			r.fail("gpu: %s: sequence %+v (negative, too large, or a slot taken twice)", op, s)
			return 0, 0, 0, false
		}
		if s.Tokens > 0 {
			used[s.Slot] = true
			rows, slots, maxTokens = max(rows, s.First+s.Tokens), max(slots, s.Slot+1), max(maxTokens, s.Tokens)
		}
	}
	return rows, slots, maxTokens, true
}

// fits reports, recording the failure, whether buffer b holds at least n floats.
func (r *Recorder) fits(op, what string, b *Buffer, n int) bool {
	if b == nil || b.Size() < uint64(n)*4 {
		r.fail("gpu: %s: %s needs %d floats", op, what, n)
		return false
	}
	return true
}

// SSMConvShape is SSMConv's shape: Channels conv channels (qwen35: 2·n_group·d_state +
// d_inner, the rows of wqkv), a kernel of DConv taps (d_conv: 4 in today's models, 2 to
// SSMConvMaxKernel), the input's rows of XStride floats with channel 0 at column XCol, and
// SiLU to apply silu to the outputs (qwen35 always does).
type SSMConvShape struct {
	Channels, DConv int
	XStride, XCol   int
	SiLU            bool
}

// ssmConvBlock is how many tokens of a sequence one invocation of ssm_conv.wgsl takes (its
// BLOCK): at least DConv-1, so that only a sequence's first block reads or writes its state.
const ssmConvBlock = 8

// SSMConvMaxKernel is the widest kernel SSMConv takes: ssmConvBlock + 1 taps.
const SSMConvMaxKernel = ssmConvBlock + 1

// SSMConvStateSize is a conv state slot's size in floats: DConv-1 rows of every channel.
func SSMConvStateSize(channels, dConv int) int { return channels * (dConv - 1) }

// SSMConv is ggml's ssm_conv over a batch of sequences, each continuing from its conv state:
// for the token at batch row First+t of a sequence and channel c, with ext the slot's dConv-1
// state rows followed by the sequence's input rows,
//
//	out[First+t, c] = Σ_{i<dConv} ext[t+i, c] · w[c·dConv + i]
//
// summed in f32 from 0 in ascending i, as ggml_compute_forward_ssm_conv_f32, then silu(v) =
// v/(1+exp(-v)) with sh.SiLU. The slot then holds ext's last dConv-1 rows (llama.cpp's
// conv_state_last), for the sequence's next batch.
//
// x holds the inputs, rows of sh.XStride floats, channel c at column sh.XCol + c (the rows
// of qkv_mixed: ggml's conv input transposed, without the state); w the kernel, f32,
// channel c's taps at c·dConv (ggml's ssm_conv1d, [d_conv, channels]); state per slot
// SSMConvStateSize floats, channel c's rows oldest first at slot·SSMConvStateSize +
// c·(dConv-1) (llama.cpp's conv state cell, [d_conv-1, channels]); out rows of sh.Channels
// floats, at the same batch rows as x. A sequence of no tokens leaves its slot alone.
//
// One invocation per channel and block of 8 tokens of a sequence, so prompts run in
// parallel over their tokens as well; its loops are 74 at d_conv 4.
func (r *Recorder) SSMConv(x, w, state, out *Buffer, sh SSMConvShape, b RecurrentBatch) {
	const op = "ssm_conv"
	if sh.Channels < 1 || sh.DConv < 2 || sh.DConv > SSMConvMaxKernel || sh.XCol < 0 || sh.XStride < sh.XCol+sh.Channels {
		r.fail("gpu: %s: %d channels at column %d of rows of %d, kernel %d (2 to %d)", op, sh.Channels, sh.XCol, sh.XStride, sh.DConv, SSMConvMaxKernel)
		return
	}
	rows, slots, maxTokens, ok := r.recurrentExtent(op, b)
	if !ok || maxTokens == 0 {
		return
	}
	if !r.fits(op, "x", x, (rows-1)*sh.XStride+sh.XCol+sh.Channels) || !r.fits(op, "w", w, sh.Channels*sh.DConv) ||
		!r.fits(op, "the state", state, slots*SSMConvStateSize(sh.Channels, sh.DConv)) || !r.fits(op, "out", out, rows*sh.Channels) {
		return
	}
	defs := []string{fmt.Sprintf("D_CONV=%d", sh.DConv)}
	if sh.SiLU {
		defs = append(defs, "SILU")
	}
	p := r.kernel("ssm_conv", []Access{ReadOnly, ReadOnly, ReadWrite, ReadWrite, ReadOnly}, 64, defs...)
	if p == nil {
		return
	}
	groups := [3]uint32{uint32((sh.Channels + 63) / 64), uint32((maxTokens + ssmConvBlock - 1) / ssmConvBlock), uint32(len(b.Seqs))}
	r.Dispatch(p, Params(sh.Channels, sh.XStride, sh.XCol), groups, x, w, state, out, b.Buf)
}

// DeltaNetShape is DeltaNet's shape: heads of HeadDim (ggml's S_v; the op takes head_k_dim =
// head_v_dim, qwen35's ssm_d_state, 128; 1 to DeltaNetMaxHeadDim), KHeads key heads (q and k;
// ssm_n_group) and VHeads value heads (v, the gates, the state, the output; ssm_dt_rank), a
// multiple of KHeads; the inputs' rows of Stride floats with q, k and v starting at columns
// QCol, KCol and VCol (qwen35's conv output: 0, KHeads·HeadDim, 2·KHeads·HeadDim); KDA for
// a gate per key dimension (Kimi's KDA; qwen35's is one per head).
type DeltaNetShape struct {
	HeadDim, KHeads, VHeads  int
	Stride, QCol, KCol, VCol int
	KDA                      bool
}

// DeltaNetMaxHeadDim is the widest head DeltaNet takes (an invocation keeps four state
// columns on CPU adapters, a quarter of one on GPUs, in private memory).
const DeltaNetMaxHeadDim = 256

// deltaNetCPUWorkgroup is the CPU adapters' delta-rule workgroup (4 columns an invocation):
// Qwen3.5-0.8B's 16 heads of 128 decode in 16 workgroups, enough for every core.
const deltaNetCPUWorkgroup = 32

// deltaNetCols is how many state columns a workgroup of the GPU kernel takes, four
// invocations each (delta_net.wgsl's COLS and LANES under COOP).
const deltaNetCols = 16

// DeltaNetStateSize is a delta-rule state slot's size in floats: a HeadDim x HeadDim matrix
// per value head (llama.cpp's n_embd_s).
func DeltaNetStateSize(headDim, vHeads int) int { return vHeads * headDim * headDim }

// deltaNetChunk is how many tokens of each sequence one dispatch of the barrier-free kernel
// takes: an invocation loops 2·dim times to read and write its state column and 2·dim + 1
// times a token, within loopBudget (232 tokens at qwen35's 128, 115 at 256).
func deltaNetChunk(dim int) int { return (loopBudget - 2*dim) / (2*dim + 1) }

// DeltaNet is ggml's gated_delta_net (ggml_compute_forward_gated_delta_net_f32 with K = 1,
// the final state only) over a batch of sequences, each continuing from its state. For each
// sequence, value head h and token in order, with q and k of key head h % KHeads (the op's
// tiled broadcast: iq1 = iv1 % neq1), v, beta and the gate g of head h, and the head's state
// matrix M (M[j][i] = S[i][j]: row j runs over the key dimension i):
//
//	M[j][i] *= exp(g)                   (KDA: exp(g[i]))
//	delta[j] = (v[j] - Σ_i M[j][i]·k[i]) · beta
//	M[j][i] += k[i] · delta[j]
//	o[j]     = (Σ_i M[j][i]·q[i]) · 1/sqrt(HeadDim)
//
// in f32. The op takes q, k, g and beta as they are: qwen35's graph L2-normalises q and k
// (L2Norm) and makes beta = sigmoid(·) and g = softplus(· + ssm_dt)·ssm_a before; the scale
// is the op's, on the output (the graph's unfused decode path scales q instead).
//
// qkv holds rows of sh.Stride floats, q's key head kh at column sh.QCol + kh·HeadDim, k's at
// sh.KCol + kh·HeadDim, v's value head h at sh.VCol + h·HeadDim; g rows of VHeads floats
// (KDA: VHeads·HeadDim, head h's at h·HeadDim), beta rows of VHeads; out rows of
// VHeads·HeadDim, o of head h at h·HeadDim (ggml's attention output, [S_v, H_v, n_tokens]);
// all at the sequences' batch rows. state holds per slot DeltaNetStateSize floats, M[j][i]
// of head h at slot·DeltaNetStateSize + (h·HeadDim + j)·HeadDim + i (ggml's state tensor
// [S_v, S_v, H_v, n_seqs], llama.cpp's ssm state cell), read and written in place.
//
// Tokens run one after another within an invocation that owns its state columns: on CPU
// adapters one invocation per 4 columns of a head (each k and q value loaded once for the
// four, each column's sums in the same order), no barriers, batches split over dispatches of
// deltaNetChunk tokens a sequence (llvmpipe's loop budget: at most 59.9k loop iterations an
// invocation at HeadDim 128, 232 tokens a dispatch, so 512 tokens take 3); on GPUs a
// workgroup per 16 columns of a head, four invocations a column reducing over the column's
// quarters (subgroup shuffles with SubgroupMath, workgroup memory otherwise), one dispatch.
func (r *Recorder) DeltaNet(qkv, g, beta, state, out *Buffer, sh DeltaNetShape, b RecurrentBatch) {
	const op = "gated_delta_net"
	dim := sh.HeadDim
	if dim < 1 || dim > DeltaNetMaxHeadDim || sh.KHeads < 1 || sh.VHeads < 1 || sh.VHeads%sh.KHeads != 0 ||
		min(sh.QCol, sh.KCol, sh.VCol) < 0 || sh.QCol+sh.KHeads*dim > sh.Stride || sh.KCol+sh.KHeads*dim > sh.Stride || sh.VCol+sh.VHeads*dim > sh.Stride {
		r.fail("gpu: %s: heads of %d (1 to %d), %d key and %d value heads, columns %d, %d, %d of rows of %d",
			op, dim, DeltaNetMaxHeadDim, sh.KHeads, sh.VHeads, sh.QCol, sh.KCol, sh.VCol, sh.Stride)
		return
	}
	rows, slots, maxTokens, ok := r.recurrentExtent(op, b)
	if !ok || maxTokens == 0 {
		return
	}
	gPer := sh.VHeads
	if sh.KDA {
		gPer *= dim
	}
	if !r.fits(op, "qkv", qkv, rows*sh.Stride) || !r.fits(op, "g", g, rows*gPer) || !r.fits(op, "beta", beta, rows*sh.VHeads) ||
		!r.fits(op, "the state", state, slots*DeltaNetStateSize(dim, sh.VHeads)) || !r.fits(op, "out", out, rows*sh.VHeads*dim) {
		return
	}
	defs := []string{fmt.Sprintf("DIM=%d", dim)}
	if sh.KDA {
		defs = append(defs, "KDA")
	}
	wg := uint32(deltaNetCPUWorkgroup)
	groups := [3]uint32{uint32((sh.VHeads*((dim+3)/4) + deltaNetCPUWorkgroup - 1) / deltaNetCPUWorkgroup), 1, uint32(len(b.Seqs))}
	chunk := deltaNetChunk(dim)
	if !r.d.BarrierFree {
		defs = append(defs, "COOP")
		if r.d.SubgroupMath {
			defs = append(defs, "SUBGROUPS")
		}
		wg, groups = 64, [3]uint32{uint32((dim + deltaNetCols - 1) / deltaNetCols), uint32(sh.VHeads), uint32(len(b.Seqs))}
		chunk = maxTokens
	}
	p := r.kernel("delta_net", []Access{ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite, ReadOnly}, wg, defs...)
	if p == nil {
		return
	}
	// 1.0f/sqrtf(S_v): an f32 root, an f32 quotient (each f64 result rounds as the f32 one).
	scale := float32(1 / float64(float32(math.Sqrt(float64(dim)))))
	for lo := 0; lo < maxTokens; lo += chunk {
		r.Dispatch(p, Params(sh.KHeads, sh.VHeads, sh.Stride, sh.QCol, sh.KCol, sh.VCol, lo, lo+chunk, scale), groups,
			qkv, g, beta, state, out, b.Buf)
	}
}

// L2Norm is ggml's l2_norm over head vectors in place: in each of rows rows of x (stride
// floats each), the heads vectors of headDim floats from column col are multiplied by
// 1/max(‖v‖, eps), ‖v‖ = sqrtf of the squares' sum taken as ggml takes
// it, in double (emulated: norm_sum.inc), rounded to f32. qwen35 applies it to
// the q and k heads of the conv output (heads 2·n_group from column 0, eps f_norm_rms_eps).
// One invocation per vector; its loops are 2·headDim.
func (r *Recorder) L2Norm(x *Buffer, rows, stride, col, heads, headDim int, eps float32) {
	if rows < 1 || heads < 1 || headDim < 1 || col < 0 || col+heads*headDim > stride {
		r.fail("gpu: l2_norm: %d heads of %d at column %d of %d rows of %d", heads, headDim, col, rows, stride)
		return
	}
	if !r.fits("l2_norm", "x", x, rows*stride) {
		return
	}
	p := r.kernel("l2_norm", []Access{ReadWrite}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(rows, heads, headDim, stride, col, eps, 0), r.elementwise(rows*heads), x)
}
