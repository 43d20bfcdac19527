#!/usr/bin/env bash
# ha-replay.sh: the Home Assistant replay (geist bench --ha) against geist
# serve and llama-server on the same model file, in interleaved rounds
# (geist, llama, geist, llama, ...), both with the same threads and
# context, llama-server loaded with --load-mode none, an F16 cache and one
# slot (so a new conversation finds the previous prefix), both over the
# OpenAI API. Each round starts both servers fresh (an empty prompt cache),
# so its first call is the cold turn.
#
#   scripts/ha-replay.sh [-r ROUNDS] [-t THREADS] [-c CTX] [--turns N]
#                        [--entities N] [--predict N] [--only geist|llama] MODEL.gguf
#
# MODEL must carry the real tokenizer and chat template of its family:
# a synthetic file's byte-level vocabulary tokenizes HA's prompt into about
# twice the tokens. Make one with geist synth --vocab (scripts/BENCHMARKS.md, "Benchmarks
# without downloading a model"): llama.cpp's real vocabularies in the zoo
# and the real templates of golden/chat-templates.json,
#   Qwen2.5-0.5B shape: --shape qwen25-05b --vocab ZOO/vocab/ggml-vocab-qwen2.gguf
#     --template <the "Qwen-Qwen2.5-7B-Instruct" template>
#   Llama-3.2-1B shape: --shape llama32-1b --vocab ZOO/vocab/ggml-vocab-llama-bpe.gguf
#     --template <the "meta-llama-Llama-3.2-3B-Instruct" template>
# (ggml-vocab-llama-bpe's EOS is the base model's <|end_of_text|>, the
# instruct files' <|eot_id|> is one of its end-of-generation tokens too;
# ggml-vocab-qwen2 carries Qwen2's template without tools, so --template).
# It must lie inside the llama.cpp chroot
# (../shared/peer/setup.sh; PEER_ROOT, default /opt/llamacpp-root); geist
# reads the same file from outside. Needs root (chroot) and python3.
# PORT=... picks the servers' port (default 18431). Prints each call as
# JSON lines under out/ (OUT=...), then per round the
# cold first turn's TTFT, the medians of the warm first calls and of the
# GetLiveContext calls, and the ratios geist/llama-server per round.
set -euo pipefail
ROOT=${PEER_ROOT:-/opt/llamacpp-root}
GEIST=${GEIST:-./geist}
rounds=2 threads=1 ctx=16384 turns=10 entities=50 predict=8 only=
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-t) threads=$2; shift 2 ;;
	-c) ctx=$2; shift 2 ;;
	--turns) turns=$2; shift 2 ;;
	--entities) entities=$2; shift 2 ;;
	--predict) predict=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	-*) echo "ha-replay: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: $0 [-r ROUNDS] [-t THREADS] [-c CTX] [--turns N] [--entities N] [--predict N] [--only geist|llama] MODEL.gguf" >&2; exit 2; }
model=$(realpath "$1")
case $model in "$ROOT"/*) inside=${model#"$ROOT"} ;; *) echo "ha-replay: $model is not inside $ROOT" >&2; exit 2 ;; esac
[ -x "$GEIST" ] || { echo "ha-replay: no geist binary at $GEIST (GEIST=...)" >&2; exit 2; }
OUT=${OUT:-out/ha-replay-$(basename "$model" .gguf)-$(date +%H%M%S)}
mkdir -p "$OUT"
port=${PORT:-18431}
pid=
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap stop EXIT
up() { # wait until the server answers on $port
	for _ in $(seq 600); do
		curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || { echo "ha-replay: the server exited, see $1" >&2; return 1; }
		sleep 0.5
	done
	echo "ha-replay: the server did not come up, see $1" >&2
	return 1
}
replay() { # replay NAME ROUND
	local f="$OUT/$1-$2"
	echo "# $1 round $2, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$f.load"
	"$GEIST" bench --ha --api openai --url "127.0.0.1:$port" --turns "$turns" --entities "$entities" --ha-predict "$predict" --json >"$f.jsonl"
	echo "# $1 round $2 done, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$f.load"
}
for r in $(seq "$rounds"); do
	if [ "$only" != llama ]; then
		data=$(mktemp -d)
		"$GEIST" serve -m "$model" -t "$threads" --ctx "$ctx" --kv-type f16 --http "127.0.0.1:$port" --data-dir "$data" >"$OUT/geist-$r.log" 2>&1 &
		pid=$!
		up "$OUT/geist-$r.log"
		replay geist "$r"
		stop
		rm -rf "$data"
	fi
	if [ "$only" != geist ]; then
		chroot "$ROOT" llama-server -m "$inside" -t "$threads" -tb "$threads" -c "$ctx" -np 1 -ctk f16 -ctv f16 --load-mode none --jinja --no-webui --host 127.0.0.1 --port "$port" >"$OUT/llama-$r.log" 2>&1 &
		pid=$!
		up "$OUT/llama-$r.log"
		replay llama "$r"
		stop
	fi
done
python3 - "$OUT" "$rounds" <<'EOF'
import json, statistics, sys, os
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name, r):
    p = f"{out}/{name}-{r}.jsonl"
    if not os.path.exists(p):
        return None
    calls = [json.loads(l) for l in open(p) if l.strip()]
    first = [c for c in calls if c["call"] == "first"]
    live = [c for c in calls if c["call"] == "live"]
    return {
        "cold": first[0]["ttft_ms"],
        "warm": statistics.median(c["ttft_ms"] for c in first[1:]) if len(first) > 1 else None,
        "live": statistics.median(c["ttft_ms"] for c in live) if live else None,
        "n": (len(first) - 1, len(live)),
        "tokens": (first[0]["prompt_tokens"], live[0]["prompt_tokens"] if live else None),
    }
fmt = lambda v: "-" if v is None else f"{v/1000:.2f} s"
for r in range(1, rounds + 1):
    g, l = load("geist", r), load("llama", r)
    print(f"round {r}: prompt tokens (first call, GetLiveContext call): " + ", ".join(f"{n} {x['tokens']}" for n, x in (("geist", g), ("llama", l)) if x))
    for k, what in (("cold", "cold first turn TTFT"), ("warm", "warm first call, median TTFT"), ("live", "GetLiveContext call, median TTFT")):
        gv, lv = g and g[k], l and l[k]
        ratio = f"{gv/lv:.2f}" if gv and lv else "-"
        print(f"  {what:34s} geist {fmt(gv):>9s}  llama-server {fmt(lv):>9s}  ratio {ratio}")
EOF
