package engine

// The prompt cache is llama-server's (--cache-ram): prompts a slot held, kept after the slot
// moved on so that a later request sharing their prefix skips evaluating it. llama-server
// copies the KV state to host memory; here an entry keeps the slot's pages (shared, so saving
// copies nothing), which the engine gives up, oldest first, when a running request needs room.
//
// It is filled as llama-server fills it. When a request starts in a slot that its prompt does
// not resemble (another slot is taken for it, or most of the slot's cache would be lost), the
// slot's old prompt is saved ("updating prompt cache"). Then, with --cache-idle-slots, every
// other idle slot's prompt is saved, and with a unified KV cache the slot is cleared. A
// starting request takes its prefix from its own slot, a slot still running a request, or the
// cache; a finished request's prompt in an idle slot is shared only once it is saved.

// DefaultPromptCacheMiB is llama-server's default --cache-ram.
const DefaultPromptCacheMiB = 8192

// slotPromptSimilarity is llama-server's default --slot-prompt-similarity: a slot whose cache
// holds more than this fraction of a prompt is taken for it.
const slotPromptSimilarity = 0.1

// promptCache is the cache's entries, oldest first, each a slot-like holder of tokens and
// pages with no request, and its limit in tokens (-1: none).
type promptCache struct {
	entries   []*slot
	maxTokens int
	idleSlots bool // --cache-idle-slots
}

// promptCacheConfig resolves Config's prompt cache settings for tokens of tokenBytes (their
// keys and values over the layers): nil when the cache is off.
func promptCacheConfig(cfg Config, tokenBytes int) *promptCache {
	mib := cfg.PromptCacheMiB
	if cfg.NoPromptCache || mib < -1 {
		return nil
	}
	if mib == 0 {
		mib = DefaultPromptCacheMiB
	}
	pc := &promptCache{maxTokens: -1, idleSlots: !cfg.NoCacheIdleSlots}
	// Sizes past 2^40 MiB would overflow the byte count: they are no limit in practice.
	if mib > 0 && mib < 1<<40 {
		pc.maxTokens = mib << 20 / max(tokenBytes, 1)
	}
	return pc
}

// cacheEntries are the prompt cache's entries (none when it is off).
func (e *Engine) cacheEntries() []*slot {
	if e.cache == nil {
		return nil
	}
	return e.cache.entries
}

// updatesCache reports whether starting prompt in slot s saves the slot's prompt to the cache,
// as llama-server's get_available_slot decides: a slot chosen for being least recently used
// (an unpinned request whose prompt no slot resembles), or one whose cache the prompt would
// mostly discard. A pinned slot the prompt does not resemble is used as it is.
func (e *Engine) updatesCache(s *slot, prompt []int32, key string, pinned bool) bool {
	if e.cache == nil {
		return false
	}
	lcp := s.prefixFor(prompt, key)
	similar := len(s.cached) > 0 && float64(lcp)/float64(len(prompt)) > slotPromptSimilarity
	mostlyLost := len(s.cached) > 0 && float64(lcp)/float64(len(s.cached)) < 0.5
	if pinned {
		return similar && mostlyLost
	}
	return !similar || mostlyLost
}

// saveToCache adds what s holds to the prompt cache, unless an entry already holds all of it;
// entries that s's prompt contains whole are dropped. It reports whether it added one.
func (e *Engine) saveToCache(s *slot) bool {
	if e.cache == nil || len(s.cached) == 0 {
		return false
	}
	for _, c := range e.cache.entries {
		if c.prefixFor(s.cached, s.lora) == len(s.cached) {
			return false
		}
	}
	kept := e.cache.entries[:0]
	for _, c := range e.cache.entries {
		if c.lora == s.lora && commonPrefix(c.cached, s.cached) == len(c.cached) {
			e.truncate(c, 0)
		} else {
			kept = append(kept, c)
		}
	}
	clear(e.cache.entries[len(kept):])
	entry := &slot{id: -1}
	e.adopt(entry, s, len(s.cached))
	e.cacheState(entry, s)
	e.cache.entries = append(kept, entry)
	for e.cache.maxTokens >= 0 && e.cachedTokens() > e.cache.maxTokens && e.dropOldestEntry() {
	}
	return true
}

// cachedTokens is the number of tokens the prompt cache's entries hold.
func (e *Engine) cachedTokens() int {
	n := 0
	for _, c := range e.cacheEntries() {
		n += len(c.cached)
	}
	return n
}

// dropOldestEntry removes the prompt cache's oldest entry, reporting false when it is empty.
func (e *Engine) dropOldestEntry() bool {
	if len(e.cacheEntries()) == 0 {
		return false
	}
	e.truncate(e.cache.entries[0], 0)
	e.cache.entries[0] = nil
	e.cache.entries = e.cache.entries[1:]
	return true
}

// saveIdleSlots is llama-server's --cache-idle-slots when a request starts in slot s: every
// other idle slot's prompt is saved to the cache and, with a unified KV cache (where the room
// is shared), cleared from the slot.
func (e *Engine) saveIdleSlots(s *slot) {
	if e.cache == nil || !e.cache.idleSlots {
		return
	}
	for _, o := range e.idleSlots() {
		if o == s || len(o.cached) == 0 {
			continue
		}
		if e.saveToCache(o) {
			e.log.Debug("saving idle slot to prompt cache", "slot", o.id, "tokens", len(o.cached))
			e.log.Debug("__TEST_TAG_CACHE_IDLE_SLOT__")
		}
		if e.cellLimit > 0 {
			e.truncate(o, 0)
		}
	}
}
