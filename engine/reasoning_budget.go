package engine

import "math"

// ReasoningBudget caps how many tokens a generation may spend inside a thinking block, as
// llama.cpp's reasoning-budget sampler does (llama-server's --reasoning-budget and a request's
// reasoning_budget_tokens): it counts the tokens after Start, and when Tokens have gone by
// without End it forces Forced, token by token, every other token masked out. A budget of 0
// closes the block as soon as it opens.
type ReasoningBudget struct {
	Tokens int     // tokens allowed inside a block, 0 or more
	Start  []int32 // the tokens that open a thinking block
	End    []int32 // the tokens that close one
	Forced []int32 // the tokens forced when the budget is spent (a message, then End)
	// Open says the prompt already opened a block (it ends inside one), so counting starts
	// with the first generated token.
	Open bool
}

// budgetState is where a reasoningBudget stands.
type budgetState int

const (
	budgetIdle        budgetState = iota // outside a thinking block
	budgetCounting                       // inside one, spending the budget
	budgetWaitingUTF8                    // spent, letting a multi-byte character finish
	budgetForcing                        // forcing the closing tokens
	budgetDone                           // closed; a new Start opens another block
)

// tokenMatcher finds a token sequence in a token stream, as llama.cpp's token_matcher does
// (after a mismatch only the current token may begin a new match).
type tokenMatcher struct {
	seq []int32
	pos int
}

// advance takes the next token and reports whether it completes the sequence.
func (m *tokenMatcher) advance(id int32) bool {
	if len(m.seq) == 0 {
		return false
	}
	if id == m.seq[m.pos] {
		m.pos++
		if m.pos == len(m.seq) {
			m.pos = 0
			return true
		}
		return false
	}
	m.pos = 0
	if id == m.seq[0] {
		m.pos = 1
	}
	return false
}

// reasoningBudget is a generation's budget in progress.
type reasoningBudget struct {
	cfg        ReasoningBudget
	start, end tokenMatcher
	state      budgetState
	remaining  int
	forcePos   int
	// complete says whether a token's text ends on a whole UTF-8 character, so forcing never
	// splits one.
	complete func(id int32) bool
}

func newReasoningBudget(cfg ReasoningBudget, piece func(id int32) []byte) *reasoningBudget {
	b := &reasoningBudget{
		cfg: cfg, start: tokenMatcher{seq: cfg.Start}, end: tokenMatcher{seq: cfg.End},
		remaining: cfg.Tokens,
		complete:  func(id int32) bool { return utf8Complete(piece(id)) },
	}
	if cfg.Open {
		b.open()
	}
	return b
}

// open enters a thinking block with the whole budget; a budget of 0 forces at once.
func (b *reasoningBudget) open() {
	b.state, b.remaining, b.forcePos = budgetCounting, b.cfg.Tokens, 0
	b.end.pos = 0
	if b.remaining <= 0 {
		b.state = budgetForcing
	}
}

// forced is the token the next step must produce, if the budget is forcing one.
func (b *reasoningBudget) forced() (int32, bool) {
	if b.state != budgetForcing || b.forcePos >= len(b.cfg.Forced) {
		return 0, false
	}
	return b.cfg.Forced[b.forcePos], true
}

// accept follows the generated token id.
func (b *reasoningBudget) accept(id int32) {
	switch b.state {
	case budgetIdle, budgetDone:
		if b.start.advance(id) {
			b.open()
		}
	case budgetCounting, budgetWaitingUTF8:
		if b.end.advance(id) {
			b.state = budgetDone
			return
		}
		complete := b.complete(id)
		if b.state == budgetCounting {
			b.remaining--
			if b.remaining > 0 {
				return
			}
		} else if !complete {
			return // still inside a character: the end sequence may yet finish it
		}
		b.end.pos = 0
		if complete {
			b.state, b.forcePos = budgetForcing, 0
		} else {
			b.state = budgetWaitingUTF8
		}
	case budgetForcing:
		b.forcePos++
		if b.forcePos >= len(b.cfg.Forced) {
			b.state = budgetDone
		}
	}
}

// forcedToken is forced for a budget that may be nil (no budget forces nothing).
func (b *reasoningBudget) forcedToken() (int32, bool) {
	if b == nil {
		return 0, false
	}
	return b.forced()
}

// follow is accept for a budget that may be nil.
func (b *reasoningBudget) follow(id int32) {
	if b != nil {
		b.accept(id)
	}
}

// utf8Complete is llama.cpp's common_utf8_is_complete: whether a token's text ends on a whole
// UTF-8 character, judged from the text alone. A piece of continuation bytes only (a byte
// token inside or at the end of a character split over byte tokens) cannot be told complete,
// so forcing waits for a token that ends a character of its own, as llama.cpp's does.
func utf8Complete(text []byte) bool {
	if len(text) == 0 {
		return true
	}
	for i := 1; i <= min(4, len(text)); i++ {
		c := text[len(text)-i]
		if c&0xC0 == 0x80 {
			continue // a continuation byte: look further back for the lead
		}
		need := 1
		switch {
		case c >= 0xF0:
			need = 4
		case c >= 0xE0:
			need = 3
		case c >= 0xC0:
			need = 2
		}
		return i >= need
	}
	return false
}

// forceToken masks every logit of row but id's, so whatever the sampler draws is id, as
// llama.cpp's reasoning-budget sampler does before the rest of the chain.
func forceToken(row []float32, id int32) []float32 {
	masked := make([]float32, len(row))
	for i := range masked {
		masked[i] = float32(math.Inf(-1))
	}
	if int(id) < len(row) {
		masked[id] = row[id]
	}
	return masked
}

// forceEnd starts forcing the closing tokens now, as llama.cpp's common_reasoning_budget_force
// does for a control request: only a budget counting inside a block is forced; one outside a
// block, already forcing or closed is left as it is. It reports whether it forced.
func (b *reasoningBudget) forceEnd() bool {
	if b == nil || b.state != budgetCounting {
		return false
	}
	b.state, b.forcePos, b.end.pos = budgetForcing, 0, 0
	return true
}
