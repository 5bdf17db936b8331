package engine

import "testing"

// TestReasoningBudgetStates walks the budget through llama.cpp's states: idle until the start
// sequence, counting, forcing the closing tokens one by one, done, and open again on a new
// start; a natural end stops counting; budget 0 forces at once.
func TestReasoningBudgetStates(t *testing.T) {
	const start, end1, end2, x, partial = 10, 20, 21, 30, 40
	pieces := map[int32][]byte{partial: {0xE2, 0x82}} // the first two bytes of "€"
	piece := func(id int32) []byte {
		if p, ok := pieces[id]; ok {
			return p
		}
		return []byte("a")
	}
	cfg := ReasoningBudget{Tokens: 2, Start: []int32{start}, End: []int32{end1, end2}, Forced: []int32{99, end1, end2}}
	b := newReasoningBudget(cfg, piece)
	steps := []struct {
		in     int32
		forced int32 // -1: none forced before this token
	}{
		{x, -1}, {start, -1}, {x, -1}, {x, -1}, // two tokens spent: forcing starts
		{99, 99}, {end1, end1}, {end2, end2}, // the forced closing, then free again
		{x, -1}, {start, -1}, {end1, -1}, {end2, -1}, // a new block closed in time
		{x, -1}, {x, -1}, {x, -1},
	}
	for i, st := range steps {
		f, ok := b.forcedToken()
		if (st.forced < 0) == ok || (ok && f != st.forced) {
			t.Fatalf("step %d: forced %d, %v; want %d", i, f, ok, st.forced)
		}
		b.follow(st.in)
	}
	if b.state != budgetDone {
		t.Errorf("state %d, want done", b.state)
	}

	// The budget runs out inside a character: forcing waits for it to complete.
	b = newReasoningBudget(ReasoningBudget{Tokens: 1, Start: []int32{start}, End: []int32{end1}, Forced: []int32{end1}, Open: true}, piece)
	b.follow(partial)
	if _, ok := b.forcedToken(); ok || b.state != budgetWaitingUTF8 {
		t.Fatalf("forcing inside a character (state %d)", b.state)
	}
	b.follow(x)
	if f, ok := b.forcedToken(); !ok || f != end1 {
		t.Fatalf("after the character: forced %d, %v", f, ok)
	}

	// A character split over byte tokens (E2, 82, AC for "€"): none of their pieces ends a
	// character that can be told whole, so forcing waits for the next token that does.
	pieces[41], pieces[42], pieces[43] = []byte{0xE2}, []byte{0x82}, []byte{0xAC}
	b = newReasoningBudget(ReasoningBudget{Tokens: 1, Start: []int32{start}, End: []int32{end1}, Forced: []int32{end1}, Open: true}, piece)
	for _, id := range []int32{41, 42, 43} {
		b.follow(id)
		if _, ok := b.forcedToken(); ok || b.state != budgetWaitingUTF8 {
			t.Fatalf("after byte token %d: forcing (state %d), want waiting for UTF-8", id, b.state)
		}
	}
	b.follow(x)
	if f, ok := b.forcedToken(); !ok || f != end1 {
		t.Fatalf("after the byte tokens and a whole character: forced %d, %v", f, ok)
	}

	// While waiting for a character to end, a multi-token end sequence may still begin: its
	// progress is kept, and completing it closes the block without forcing.
	b = newReasoningBudget(ReasoningBudget{Tokens: 1, Start: []int32{start}, End: []int32{41, end2}, Forced: []int32{end1}, Open: true}, piece)
	for _, id := range []int32{41, 41, end2} { // E2 spends the budget, E2 starts the end, then its end
		b.follow(id)
	}
	if _, ok := b.forcedToken(); ok || b.state != budgetDone {
		t.Fatalf("end sequence while waiting for UTF-8: state %d, want done", b.state)
	}

	// Budget 0 with the block already open forces the closing first.
	b = newReasoningBudget(ReasoningBudget{Tokens: 0, Start: []int32{start}, End: []int32{end1}, Forced: []int32{end1}, Open: true}, piece)
	if f, ok := b.forcedToken(); !ok || f != end1 {
		t.Fatalf("budget 0: forced %d, %v", f, ok)
	}
	var none *reasoningBudget
	if _, ok := none.forcedToken(); ok {
		t.Error("no budget forced a token")
	}
	none.follow(x)
}

// TestUTF8Complete pins llama.cpp's common_utf8_is_complete, including its answer for pieces
// of continuation bytes only (byte tokens): not complete.
func TestUTF8Complete(t *testing.T) {
	for text, want := range map[string]bool{"": true, "a": true, "é": true, "€": true, "\xe2\x82": false, "\xf0\x9f\x98": false, "a\xc3": false, "😀": true,
		"\x82": false, "\x82\xac": false, "\x9f\x98\x80\x80": false, "a\xac": true, "\xff": false} {
		if got := utf8Complete([]byte(text)); got != want {
			t.Errorf("utf8Complete(%q) = %v, want %v", text, got, want)
		}
	}
}
