package gpu

// loopBudget bounds the loop iterations one invocation of a kernel may run on a CPU adapter:
// llvmpipe, the software Vulkan driver, stops an invocation's loops after 65535 iterations in
// all (LP_MAX_TGSI_LOOP_ITERATIONS, counted over every loop of the shader, nested ones once
// per inner iteration) and silently returns what it has.
//
// Kernels whose count grows with a shape the models make large enough are kept under it here:
// barrier-free attention runs long key ranges in chunks (attnChunkKeys), barrier-free argmax
// hands long rows to the workgroup kernel, barrier-free top-k caps its merge (MaxTopKFor).
// The others stay far below it at every shape of today's models (to n_embd 8192, n_ff 36864,
// head_dim 256), by these upper bounds per invocation (every loop counted, none unrolled):
//
//	matvec, barrier-free (all variants): k/BS * (1 + BS/SB * (1 + SB/4)), at most 0.32 k
//	  (3k/4 for F32, F16, BF16): k = 36864 gives 11.8k (27.6k);
//	  matvec cooperative (GPUs): k/256 * (1 + 2 n_tok) + 6 (1 + n_tok)
//	matmul tiled (GPUs): 5k/16
//	rms_norm, layer_norm (workgroup kernels everywhere): 3 n/64 + 12
//	argmax workgroup kernel (long rows, and GPUs): 2 n/64 + 12, 8k at a vocabulary of 256000
//	head_norm: 2 head_dim; act_quant: 2 * 256
//	attention_split (GPUs): 4 (389 + head_dim/2) per 256-key split; merge about
//	  (2 + head_dim/64) * splits, 772 at 32k keys
//	avg_pool: s*s (s the pooling kernel, 2 or 4 in today's projectors)
//	get_rows, copy_within, glu, bias_act, softcap, add: no loops; rope_kv, kv_shift: none, or
//	  with CPUMath n_rot/2 (ggml's angle products, where no RoPE table covers the position)
//	matvec_lanes (CPUMath): k/32 (Q8_0, Q5_0), k/4 + k%32 (F32)
//	MoE (moe.go): moe_route (a token an invocation) 2E + kE + 5k, 17.6k at E = MoEMaxExperts
//	  (512) and k = MoEMaxUsed (32); moe_plan (an expert an invocation) n_assign + tiles/E + 1
//	  to count, E + n_assign/8 + 1 + n_assign to place (tiles at most n_assign/8 + E), 19k at
//	  MoEMaxAssignments (16384); moe_combine k; add_id, glu's OAI: no loops; matvec,
//	  matmul_rows and matmul with ID: as without, plus 8 (matmul_rows' tile lanes)
//	recurrent layers (recurrent.go): ssm_conv (a channel and 8 tokens of a sequence an
//	  invocation) 19 d_conv - 2, 74 at d_conv 4, 169 at SSMConvMaxKernel; l2_norm 2 head_dim;
//	  delta_net barrier-free (4 state columns of a head an invocation) 2S + T (2S + 1) for T
//	  tokens of each sequence a dispatch, batches split at T = deltaNetChunk(S): 232 at Qwen3.5's
//	  S = 128 (59.9k; 512 tokens take 3 dispatches), 115 at DeltaNetMaxHeadDim; its cooperative
//	  kernel (GPUs, one dispatch) 2R + T (2R + 1), R = S/4: 33k at S = 128 and 512 tokens
//	qwen35's small ops (qwen35ops.go): gated_norm 2 head_dim; delta_gates, sigmoid_gate: no
//	  loops
//
// The cooperative attention kernel, left to GPUs, would pass it: keys/64 * (133 + head_dim/2)
// iterations as llvmpipe counts them (it unrolls the 4-step loops), over 16k keys at head_dim
// 256, 21k at 128.
const loopBudget = 60000
