#!/bin/bash
# refs.sh OUT FILE [llama-server options...]: llama.cpp's greedy continuation of "Once upon a time"
# (32 tokens) with its top-10 log-probabilities per step, as llama-server b10587 (CPU build) answers
# POST /completion, trimmed to the ids and log-probabilities, written to OUT.
set -e
L=${LLAMA:-$(cd "$(dirname "$0")/../../../../../shared/llama.cpp" && pwd)}
out=$1 file=$2; shift 2
port=${PORT:-8677}
"$L/llama-server" -m "$file" --port $port -c 256 -np 1 "$@" > /dev/null 2>&1 & pid=$!
for i in $(seq 1 100); do curl -s -o /dev/null localhost:$port/health && break; sleep 0.1; done
sleep 0.3
curl -s localhost:$port/completion -d '{"prompt":"Once upon a time","n_predict":32,"temperature":0,"n_probs":10,"return_tokens":true}' |
  python3 -c '
import json, sys
d = json.load(sys.stdin)
out = {"tokens": d["tokens"], "completion_probabilities": [{"top_logprobs": [{"id": t["id"], "logprob": t["logprob"]} for t in s["top_logprobs"]]} for s in d["completion_probabilities"]]}
print(json.dumps(out, separators=(",", ":")))' > "$out"
kill $pid; wait $pid 2>/dev/null || true
