// Cache addressing shared by the kernels that read or write the KV cache. The including kernel
// declares Params `p` (with n_tokens and page_bits) and the binding `pos`.
//
// pos holds n_tokens positions, then one u32 per token: with page_bits 0, the first cache row
// of the token's sequence (sequences keep contiguous regions); otherwise the index in pos where
// its sequence's page table starts, the table listing the numbers of the pages (2^page_bits
// rows each) that hold positions 0, 2^page_bits, ... of the sequence.

// kv_row is the cache row holding position j of token t's sequence.
fn kv_row(t: u32, j: u32) -> u32 {
    let b = pos[p.n_tokens + t];
    if (p.page_bits == 0u) {
        return b + j;
    }
    return (pos[b + (j >> p.page_bits)] << p.page_bits) | (j & ((1u << p.page_bits) - 1u));
}
