package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// pageBits sets the KV cache page size (16 rows). Pages are the unit slots share: a prompt
// prefix cached by another slot is shared page by page, and a shared page that is partly
// filled is copied when a slot first writes past the shared part (copy-on-write).
const pageBits = 4

// pageRows is the number of cache rows (token positions) in a page.
const pageRows = 1 << pageBits

// errCacheFull reports that no page could be found for a slot's next tokens.
var errCacheFull = errors.New("engine: the KV cache is full")

// pagePool hands out the pages of the KV cache and counts their users.
type pagePool struct {
	refs []int32 // users of each page; 0 is free
	free []int32 // free pages, taken from the end
}

func newPagePool(n int) *pagePool {
	p := &pagePool{refs: make([]int32, n)}
	for i := n - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
	return p
}

// alloc takes a free page for one user.
func (p *pagePool) alloc() (int32, bool) {
	if len(p.free) == 0 {
		return 0, false
	}
	pg := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.refs[pg] = 1
	return pg, true
}

func (p *pagePool) retain(pg int32) { p.refs[pg]++ }

// release drops one user of pg, freeing it with the last.
func (p *pagePool) release(pg int32) {
	if p.refs[pg] <= 0 {
		panic(fmt.Sprintf("engine: page %d released more often than taken", pg))
	}
	if p.refs[pg]--; p.refs[pg] == 0 {
		p.free = append(p.free, pg)
	}
}

// used is the number of pages in use.
func (p *pagePool) used() int { return len(p.refs) - len(p.free) }

// pagesFor is the number of pages that hold n positions.
func pagesFor(n int) int { return (n + pageRows - 1) >> pageBits }

// truncate keeps the first n cached tokens of s, releasing the pages past them.
func (e *Engine) truncate(s *slot, n int) {
	s.cached = s.cached[:n]
	keepCheckpoints(s, n)
	s.reserved = min(s.reserved, n)
	keep := pagesFor(n)
	for _, pg := range s.pages[keep:] {
		e.pool.release(pg)
	}
	s.pages = s.pages[:keep]
}

// adopt makes the first n tokens cached by donor the cache of s, sharing donor's pages; s's
// own cache is dropped first.
func (e *Engine) adopt(s, donor *slot, n int) {
	e.truncate(s, 0)
	s.cached, s.lora = append(s.cached, donor.cached[:n]...), donor.lora
	for _, c := range donor.ckpts { // a recurrent model's states, shared: they never change
		if c.n <= n {
			s.ckpts = append(s.ckpts, c)
		}
	}
	for _, pg := range donor.pages[:pagesFor(n)] {
		e.pool.retain(pg)
		s.pages = append(s.pages, pg)
	}
}

// reserve makes positions len(s.cached) .. upto-1 of s writable: it copies a shared, partly
// filled last page (adding the row copy to *copies, to run before the batch writes) and
// allocates the pages after it, evicting cached prompts when the pool runs dry (allocPage). It
// returns how many positions it made writable, upto - len(s.cached) unless the cache is full.
func (e *Engine) reserve(s *slot, upto int, copies *[]model.RowCopy) int {
	start := len(s.cached)
	if start >= upto {
		return 0
	}
	if e.cellLimit > 0 {
		if upto = start + e.cellRoom(s, upto-start); upto == start {
			return 0
		}
	}
	got := e.reservePages(s, start, upto, copies)
	s.reserved = max(s.reserved, start+got)
	return got
}

// reservePages is reserve's page work for positions start .. upto-1 of s.
func (e *Engine) reservePages(s *slot, start, upto int, copies *[]model.RowCopy) int {
	if last := len(s.pages) - 1; start&(pageRows-1) != 0 && e.pool.refs[s.pages[last]] > 1 {
		pg, ok := e.allocPage(s)
		if !ok {
			return 0
		}
		old := s.pages[last]
		*copies = append(*copies, model.RowCopy{Src: int(old) << pageBits, Dst: int(pg) << pageBits, N: start & (pageRows - 1)})
		e.pool.release(old)
		s.pages[last] = pg
	}
	for len(s.pages) < pagesFor(upto) {
		pg, ok := e.allocPage(s)
		if !ok {
			return len(s.pages)<<pageBits - start
		}
		s.pages = append(s.pages, pg)
	}
	return upto - start
}

// allocPage takes a free page, first giving up prompt cache entries, oldest first, then the
// caches of idle slots other than s, least recently used first.
func (e *Engine) allocPage(s *slot) (int32, bool) {
	for {
		if pg, ok := e.pool.alloc(); ok {
			return pg, true
		}
		if !e.evictIdle(s) {
			return 0, false
		}
	}
}

// evictIdle drops the prompt cache's oldest entry or, when it is empty, the cache of the least
// recently used idle slot other than s that holds pages, reporting false when there is none.
func (e *Engine) evictIdle(s *slot) bool {
	if e.dropOldestEntry() {
		return true
	}
	idle := slices.DeleteFunc(e.idleSlots(), func(o *slot) bool { return o == s || len(o.pages) == 0 })
	if len(idle) == 0 {
		return false
	}
	e.truncate(slices.MinFunc(idle, func(a, b *slot) int { return a.lastUsed.Compare(b.lastUsed) }), 0)
	return true
}

// cellRoom is how many of n more cells slot s may take under the unified cache's cell limit,
// evicting idle slots' caches (least recently used first) while there are too few.
func (e *Engine) cellRoom(s *slot, n int) int {
	for {
		room := e.cellLimit - e.cellsHeld()
		if room >= n || !e.evictIdle(s) {
			return max(min(room, n), 0)
		}
	}
}

// cellsHeld counts the cells (token rows) the slots' caches and reservations take, a row that
// several slots share counted once: what llama.cpp's unified cache counts.
func (e *Engine) cellsHeld() int {
	rows := make(map[int32]int, e.pool.used())
	for _, s := range slices.Concat(e.cacheEntries(), e.slots) {
		n := max(len(s.cached), s.reserved)
		for i, pg := range s.pages {
			rows[pg] = max(rows[pg], min(pageRows, n-i*pageRows))
		}
	}
	held := 0
	for _, r := range rows {
		held += r
	}
	return held
}

// evictable reports whether a prompt cache entry or an idle slot other than s holds pages
// allocPage could free.
func (e *Engine) evictable(s *slot) bool {
	for _, o := range slices.Concat(e.cacheEntries(), e.idleSlots()) {
		if o != s && len(o.pages) > 0 {
			return true
		}
	}
	return false
}

// donorFor finds, among s itself, the slots running a request and the prompt cache's entries,
// the holder whose cache shares the longest prefix with prompt under the adapter scales key,
// and that length. An idle
// slot's prompt is shared once it is in the prompt cache (see promptcache.go).
func (e *Engine) donorFor(s *slot, prompt []int32, key string) (*slot, int) {
	best, bestLen := s, s.prefixFor(prompt, key)
	for _, o := range slices.Concat(e.cacheEntries(), e.slots) {
		if o.idle() && o.id >= 0 {
			continue
		}
		if n := o.prefixFor(prompt, key); n > bestLen {
			best, bestLen = o, n
		}
	}
	return best, bestLen
}

// batchPages collects the page tables of the slots in one batch.
type batchPages struct {
	pages []int32
	at    map[*slot]int32 // where each slot's table starts in pages
}

// base is the Batch.Base value of s's tokens, adding s's table on first use. It must be called
// after s's pages for this batch are reserved.
func (bp *batchPages) base(s *slot) int32 {
	if at, ok := bp.at[s]; ok {
		return at
	}
	if bp.at == nil {
		bp.at = map[*slot]int32{}
	}
	at := int32(len(bp.pages))
	bp.pages = append(bp.pages, s.pages...)
	bp.at[s] = at
	return at
}
