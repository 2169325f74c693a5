#!/usr/bin/env bash
# The GPU verification of issue 9 in one device call, every result written under $OUT as it comes
# (a call cut at its time limit still brings back what it had):
#   1. the machine: torch, CUDA, Landlock, `import torch` and CUDA init times;
#   2. the CUDA tests alone (tests/test_devices.py: every reference and variant in every dtype), few workers;
#   3. benchmarks/bench_gpu.py: check time / (import torch + CUDA init), target 1.5x, minimind included;
#   4. the whole suite, in parallel, each failure's traceback appended to $OUT/failures.txt at once;
#   5. benchmarks/gpu_corpus.py: every reference and variant on CUDA in every dtype, one line per file as it comes.
# On the device machine (no package index there): carry `.gpu` holding wheels of typer and platformdirs
# (GPU.md's `pip download` line, into .gpu/deps), then run:  bash benchmarks/gpu_verify.sh
# Steps can be picked: STEPS="2 3" bash benchmarks/gpu_verify.sh ; each step's time limit: STEP_S (default 280),
# or STEP3_S etc. for one step; the suite's workers: WORKERS (default 12, handed out test by test).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
STEPS=${STEPS:-"1 2 3 4"}
STEP_S=${STEP_S:-280}
WORKERS=${WORKERS:-12}
limit() { local v="STEP$1_S"; echo "${!v:-$STEP_S}"; }
SITE=$(mktemp -d)
if ls .gpu/deps/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .gpu/deps/*.whl >/dev/null 2>&1
fi
export PYTHONPATH=$PWD:$SITE PYTHONUNBUFFERED=1 TORCHCODE_HOME=$(mktemp -d)/home
export TORCHCODE_FAILURE_LOG=$OUT/failures.txt
LOG=$OUT/verify.txt
say() { echo "[$(date +%T)] $*" >> "$LOG"; }
say "torchcode $(git log --oneline -1 2>/dev/null) steps: $STEPS"
for step in $STEPS; do
    case $step in
    1) say "1. the machine"
       timeout "$(limit $step)" python3 - >> "$LOG" 2>&1 <<'PY'
import os, platform, time
t = time.time(); import torch; a = time.time() - t
t = time.time(); ok = torch.cuda.is_available(); torch.cuda.init() if ok else None
torch.zeros(1, device="cuda") if ok else None; b = time.time() - t
print(f"python {platform.python_version()}, torch {torch.__version__}, cuda {ok} "
      f"{torch.cuda.get_device_name() if ok else ''}; import torch {a:.2f} s, CUDA init {b:.2f} s; kernel {platform.release()}")
from torchcode.grader import confine
print("landlock ABI", confine._abi(), "; cpus", os.cpu_count())
PY
       ;;
    2) say "2. CUDA tests (tests/test_devices.py), 4 workers"
       timeout -s INT "$(limit $step)" python3 -m pytest -q -n 4 -p no:cacheprovider -rfEs --tb=short tests/test_devices.py \
           > "$OUT/devices.txt" 2>&1
       tail -5 "$OUT/devices.txt" >> "$LOG" ;;
    3) say "3. bench_gpu.py"
       timeout -s INT "$(limit $step)" python3 benchmarks/bench_gpu.py --runs "${RUNS:-3}" --profile minimind_attention \
           > "$OUT/bench_gpu.txt" 2>&1
       tail -20 "$OUT/bench_gpu.txt" >> "$LOG" ;;
    4) say "4. the whole suite, $WORKERS workers"
       timeout -s INT "$(limit $step)" python3 -m pytest -q -n "$WORKERS" --dist load -p no:cacheprovider -rfE --tb=short \
           > "$OUT/suite.txt" 2>&1
       tail -30 "$OUT/suite.txt" | grep -E "FAILED|ERROR|passed|failed" >> "$LOG" ;;
    5) say "5. gpu_corpus.py"
       timeout -s INT "$(limit $step)" python3 benchmarks/gpu_corpus.py sdpa:0:2 sdpa:1:2 minimind_attention:0:3 \
           minimind_attention:1:3 minimind_attention:2:3 kv_cache,repeat_kv causal_attention,rope mha,gqa \
           flash_attention,linear_attention sliding_window,cross_attention > "$OUT/corpus.txt" 2>&1
       grep -E "^BAD| ok, " "$OUT/corpus.txt" | cut -c1-600 >> "$LOG" ;;
    esac
done
say "done; failures so far: $(grep -c '^=== ' "$OUT/failures.txt" 2>/dev/null || echo 0)"
