package gpu

// ArgmaxFeed says where a FEED argmax also writes its picks: the token ids and the
// positions/bases (laid out as for RoPEKV) of a next single-token-per-row pass, taken from
// Plan (each row's first drafted position, then each row's base) plus Step.
type ArgmaxFeed struct {
	// IDs receives the next pass's token ids, Pos its positions and bases; Plan (read only)
	// holds the drafted first positions and bases they are derived from.
	IDs, Pos, Plan *Buffer
	// Step is added to each row's first drafted position, so chained passes advance.
	Step int
	// MPos, when set, receives an M-RoPE model's rotary positions of each row, a text
	// token's (position three times, then 0).
	MPos *Buffer
}

// Argmax writes, for each of rows rows of n logits, the index of the largest (the first on
// ties) and its softmax probability into out (u32): the ids at out[out0 + row] and the
// probabilities' f32 bits at out[pout + out0 + row]. With feed, each id also becomes the
// token of its row in a following pass recorded into the same command buffer, so greedy
// decoding can run several passes without reading logits back.
func (r *Recorder) Argmax(logits, out *Buffer, n, rows, out0, pout int, feed *ArgmaxFeed) {
	var defs []string
	bind := []Access{ReadOnly, ReadWrite}
	bufs := []*Buffer{logits, out}
	step := 0
	if feed != nil {
		defs = append(defs, "FEED")
		bind = append(bind, ReadWrite, ReadWrite, ReadOnly)
		bufs = append(bufs, feed.IDs, feed.Pos, feed.Plan)
		step = feed.Step
		if feed.MPos != nil {
			defs = append(defs, "FEED_MPOS")
			bind = append(bind, ReadWrite)
			bufs = append(bufs, feed.MPos)
		}
	}
	groups := r.grid(rows)
	// The row-per-invocation kernel reads its row twice; llvmpipe would cut it off past
	// loopBudget iterations, so long rows take the workgroup kernel there too.
	if r.d.BarrierFree && 2*n <= loopBudget {
		defs = append(defs, "ROW_PER_THREAD")
		groups = r.elementwise(rows)
	}
	p := r.kernel("argmax", bind, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, rows, out0, pout, step), groups, bufs...)
}
