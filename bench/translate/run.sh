#!/usr/bin/env bash
# Times the translation of a coding agent's Messages and Responses calls
# (testdata/requests) to the engine's chat request: hone's (go test
# -bench BenchmarkTranslate, proxy/) beside LiteLLM's, the translation a
# user would otherwise put in front of vLLM, in the same run. LiteLLM goes
# into a venv under ~/.cache/hone (made once; PyPI needed then).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
LITELLM_VERSION=${LITELLM_VERSION:-1.110.2}
venv=${HONE_BENCH_LITELLM_VENV:-$HOME/.cache/hone/litellm-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import litellm' 2>/dev/null; then
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q "litellm==$LITELLM_VERSION"
fi
for round in 1 2 3; do
	echo "round $round"
	$GO test ./proxy -run '^$' -bench 'BenchmarkTranslate(Messages|Responses)$' -benchtime 3s -benchmem | grep '^Benchmark'
	LITELLM_LOCAL_MODEL_COST_MAP=True "$venv/bin/python" bench/translate/litellm_translate.py . 3 2>/dev/null | grep '^litellm'
done
