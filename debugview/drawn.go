package debugview

// Drawn is what a frame showed, in numbers: the desktop app writes it as JSON beside a
// screenshot, so that a test (or a bug report's reader) can check the picture against the
// server's /slots and /metrics.
type Drawn struct {
	Pass           uint64           `json:"pass"`
	Width          int              `json:"width"`
	Height         int              `json:"height"`
	Panels         []Region         `json:"panels"`
	Slots          []DrawnSlot      `json:"slots"`
	KV             DrawnKV          `json:"kv"`
	TimelinePasses int              `json:"timeline_passes"`
	Kernels        int              `json:"kernel_families"`
	Throughput     DrawnRates       `json:"throughput"`
	Totals         DrawnTotals      `json:"totals"`
	Candidates     []DrawnCandidate `json:"candidates"`
	MemoryBytes    uint64           `json:"memory_bytes"`
	Attention      *DrawnAttention  `json:"attention"`
}

// Region is a panel's place in the frame, in framebuffer pixels.
type Region struct {
	Title      string `json:"title"`
	X, Y, W, H int
}

// DrawnSlot is a slot's row in the slots panel.
type DrawnSlot struct {
	ID      int    `json:"id"`
	State   string `json:"state"`
	Task    int    `json:"task"`
	Tokens  int    `json:"tokens"`
	Context int    `json:"n_ctx"`
	Decoded int    `json:"n_decoded"`
}

// DrawnKV is the KV cache panel's numbers.
type DrawnKV struct {
	Used        int         `json:"used"`
	Capacity    int         `json:"capacity"`
	Pages       int         `json:"pages"`
	FreePages   int         `json:"free_pages"`
	SharedPages int         `json:"shared_pages"`
	CachedPages int         `json:"cached_pages"`
	PagesBySlot map[int]int `json:"pages_by_slot"`
}

// DrawnRates are the throughput panel's last full second.
type DrawnRates struct {
	Prompt     int `json:"prompt_tokens_per_second"`
	Generation int `json:"generated_tokens_per_second"`
	Queue      int `json:"queue"`
	Seconds    int `json:"seconds"`
}

// DrawnCandidate is one bar of the next-token panel.
type DrawnCandidate struct {
	Token string  `json:"token"`
	P     float32 `json:"p"`
}

// DrawnAttention is the attention panel's strip.
type DrawnAttention struct {
	Slot      int `json:"slot"`
	Layer     int `json:"layer"`
	Head      int `json:"head"`
	Positions int `json:"positions"`
}

// DrawnTotals are the engine's counters the throughput panel shows, as /metrics reports them.
type DrawnTotals struct {
	PromptTokens    uint64 `json:"prompt_tokens_total"`
	PredictedTokens uint64 `json:"tokens_predicted_total"`
	Decodes         uint64 `json:"n_decode_total"`
	KVTokens        int    `json:"kv_cache_tokens"`
}
