#!/usr/bin/env bash
# One GPU session in one command: install what the bare GPU machine lacks from carried wheels, print the
# environment, run the CUDA tests, bench/gpu.py and the profiler. Everything is logged under $OUT (default
# /tmp/scalerl-gpu); each stage has its own time limit, so one hang costs that stage, not the session.
#
#   bash bench/gpu_session.sh [STAGE ...]      stages: env tests bench05 bench15 profile (default: all, in order)
#                                              the decode path: static (CUDA tests of the static decode step), decode
#                                              (bench/static_decode.py: dynamic vs CUDA graph, batch 1 and 256),
#                                              decode_inductor (compiled + captured, batch 1), side
#                                              (bench/engine_side_by_side.py: PipelineRL-8, sync, TRL), train15
#                                              (bench/gpu.py trainer rows at 1.5B, chunked log-probs)
#                                              the GPU engine's goals in one 10-minute lease (`bash bench/gpu_session.sh lease`):
#                                              env, cuda_head (CUDA tests of the compensated head and the schedule),
#                                              head_cuda (bench/compensated_head.py on cuda), train05 / train15
#                                              (bench/gpu.py trainer rows: exact head, bf16x6 head eager / compiled /
#                                              micro-batch from free memory, ZeRO-1/2/3 at 1.5B; MFU and memory
#                                              high-water marks), side (the engine's PipelineRL-8 row and TRL)
#   GPU_SESSION_DRY=1 bash bench/gpu_session.sh   the same on the CPU (tests skip, bench/profile run --smoke)
#   GPU_SESSION_PLAN=1 bash bench/gpu_session.sh lease   print the stages and their limits, run nothing
#   LIMIT_tests=200 bash bench/gpu_session.sh tests   a stage's time limit in seconds (defaults below)
#   BENCH05_ARGS=... BENCH15_ARGS='--only peak,gen,train --no-deepspeed' PROFILE_ARGS='--only decode'   extra arguments
#
# Wheels: .whl/ at the repository root (git-ignored; docs/gpu.md says which and how to fetch them). A package is
# installed from there only if it does not import already, so the script is a no-op install on a full machine.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/scalerl-gpu}
mkdir -p "$OUT"
LOG="$OUT/session.log"
exec > >(tee -a "$LOG") 2>&1
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
DRY=${GPU_SESSION_DRY:-0}
SITE=${SCALERL_GPU_SITE:-/tmp/site}
export PYTHONUNBUFFERED=1 PYTHONPATH=".:$SITE${PYTHONPATH:+:$PYTHONPATH}"
STAGES=${*:-env tests bench05 bench15 profile}
# The GPU engine's goals in one lease of at most 10 minutes: the stage limits below sum to 570 s; the installs and the
# merged table come on top (~40 s with the deepspeed build). On one GPU the engine runs PipelineRL-8 as sync
# (rl_core/engine/schedule.py), so `side` runs the engine once (its PipelineRL-8 row, the schedule it ran) and TRL.
# decode is not in it: the FP32-accurate head and the schedule change nothing on the decode path (`decode` measures it).
if [[ " $STAGES " == *" lease "* ]]; then
  STAGES=${STAGES/lease/env cuda_head head_cuda train05 train15 side}
  : "${LIMIT_env:=30}" "${LIMIT_cuda_head:=50}" "${LIMIT_head_cuda:=40}" "${LIMIT_train05:=100}" "${LIMIT_train15:=150}"
  : "${LIMIT_side:=200}" "${SIDE_STEPS:=4}" "${SIDE_ARGS:=--systems pipeline,trl}"
  export LIMIT_env LIMIT_cuda_head LIMIT_head_cuda LIMIT_train05 LIMIT_train15 LIMIT_side SIDE_STEPS SIDE_ARGS
fi
status=0

stamp() { echo "=== $(date -u +%H:%M:%S) $*"; }

install_missing() {
  # module:file-glob pairs; a module that imports is left alone.
  local pairs="pydantic:pydantic-[0-9]* pydantic_core:pydantic_core-* annotated_types:annotated_types-*
    typing_inspection:typing_inspection-* hjson:hjson-* deepspeed:deepspeed-* dill:dill-* multiprocess:multiprocess-*
    datasets:datasets-* trl:trl-*"
  local wheels=() sdists=()
  # typing_extensions always (pydantic-core needs a recent one, e.g. its Sentinel; an older copy imports fine).
  for f in .whl/typing_extensions-*.whl; do [ -e "$f" ] && wheels+=("$f"); done
  for pair in $pairs; do
    local mod=${pair%%:*} glob=${pair#*:}
    if "$PY" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$mod') is None)" 2>/dev/null; then
      continue
    fi
    for f in .whl/$glob; do
      [ -e "$f" ] || { echo "missing: $mod (no .whl/$glob carried)"; continue; }
      case "$f" in *.whl) wheels+=("$f") ;; *) sdists+=("$f") ;; esac
    done
  done
  if [ ${#wheels[@]} -gt 0 ]; then
    echo "installing ${wheels[*]}"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${wheels[@]}" || return 1
  fi
  if [ ${#sdists[@]} -gt 0 ]; then
    echo "building ${sdists[*]} (no build isolation: it uses this machine's torch)"
    DS_BUILD_OPS=0 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target "$SITE" \
      "${sdists[@]}" || echo "warning: could not build ${sdists[*]}; the DeepSpeed rows and tests will say why"
  fi
}

run_stage() {  # name, default time limit (s), command...; LIMIT_<name>=seconds overrides the limit
  local name=$1 limit=$2
  local override="LIMIT_$1"
  limit=${!override:-$limit}
  shift 2
  stamp "$name (limit ${limit}s): $*"
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@"
  local rc=$?
  stamp "$name: exit $rc after $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || status=1
}

if [ "${GPU_SESSION_PLAN:-0}" = 1 ]; then  # print the stages and their limit overrides, run nothing
  echo "stages: $STAGES"
  for st in $STAGES; do v="LIMIT_$st"; echo "limit $st ${!v:-default}"; done
  exit 0
fi

stamp "install what is missing (.whl)"
install_missing || { echo "install failed"; exit 2; }

bench_args=()
[ "$DRY" = 1 ] && bench_args=(--smoke)
for stage in $STAGES; do
  case $stage in
    env)
      run_stage env 120 bash -c "nvidia-smi 2>/dev/null || echo 'no nvidia-smi'; \"$PY\" - <<'EOF'
import importlib, torch
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())
if torch.cuda.is_available():
    print('device', torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0))
for m in ('transformers', 'pydantic', 'deepspeed', 'numpy', 'scipy', 'yaml'):
    try:
        print(m, getattr(importlib.import_module(m), '__version__', '?'))
    except Exception as exc:
        print(m, 'NOT IMPORTABLE:', type(exc).__name__, exc)
EOF"
      ;;
    tests)
      run_stage tests 420 "$PY" -m pytest tests/cuda -v -rs -p no:cacheprovider --timeout 300 \
        --junitxml "$OUT/cuda-tests.xml"
      ;;
    bench05)
      run_stage bench05 420 "$PY" bench/gpu.py "${bench_args[@]}" --models 0.5b ${BENCH05_ARGS:-} --json "$OUT/gpu-0.5b.json"
      ;;
    bench15)
      run_stage bench15 420 "$PY" bench/gpu.py "${bench_args[@]}" --models 1.5b ${BENCH15_ARGS:-} --json "$OUT/gpu-1.5b.json"
      ;;
    profile)
      run_stage profile 300 "$PY" bench/gpu_profile.py "${bench_args[@]}" --out "$OUT" ${PROFILE_ARGS:-}
      ;;
    static)
      run_stage static 120 "$PY" -m pytest tests/cuda/test_static_decode_cuda.py -v -rs -p no:cacheprovider \
        --timeout 120 ${STATIC_ARGS:-} --junitxml "$OUT/static-tests.xml"
      ;;
    decode)
      if [ "$DRY" = 1 ]; then d=(--device cpu --preset tiny --batch 1,8 --tokens 16 --modes dynamic,eager)
      else d=(--device cuda --preset qwen2-0.5b --batch 1,256 --tokens 128 --modes dynamic,graph); fi
      run_stage decode 120 "$PY" bench/static_decode.py "${d[@]}" --json "$OUT/decode.json"
      ;;
    decode_inductor)
      if [ "$DRY" = 1 ]; then d=(--device cpu --preset tiny --batch 8 --tokens 16 --modes inductor)
      else d=(--device cuda --preset qwen2-0.5b --batch 1 --tokens 128 --modes inductor-graph); fi
      run_stage decode_inductor 120 "$PY" bench/static_decode.py "${d[@]}" --json "$OUT/decode-inductor.json"
      ;;
    side)
      s_args=(--steps "${SIDE_STEPS:-5}")
      [ "$DRY" = 1 ] && s_args=(--smoke)
      run_stage side 300 "$PY" bench/engine_side_by_side.py "${s_args[@]}" ${SIDE_ARGS:-} --json "$OUT/side.json"
      ;;
    train15)
      run_stage train15 150 "$PY" bench/gpu.py "${bench_args[@]}" --models 1.5b --only peak,train \
        --trainers ${TRAIN15_TRAINERS:-torch_x6head,torch_x6head_compiled,zero1,zero3} \
        --json "$OUT/gpu-train15.json"
      ;;
    train05)
      run_stage train05 100 "$PY" bench/gpu.py "${bench_args[@]}" --models 0.5b --only peak,train \
        --trainers ${TRAIN05_TRAINERS:-torch,torch_x6head,torch_x6head_compiled,torch_x6head_auto} \
        --json "$OUT/gpu-train05.json"
      ;;
    cuda_head)
      run_stage cuda_head 50 "$PY" -m pytest tests/cuda/test_compensated_head_cuda.py -v -rs -p no:cacheprovider \
        --timeout 60 --junitxml "$OUT/cuda_head-tests.xml"
      ;;
    head_cuda)
      h=(--device cuda --tokens 8192 --vocab 151936 --hidden 896 --chunk 1024)
      [ "$DRY" = 1 ] && h=(--device cpu --tokens 256 --vocab 2048 --hidden 64 --chunk 128 --presets tiny --seeds 1)
      run_stage head_cuda 40 "$PY" bench/compensated_head.py "${h[@]}" --json "$OUT/head_cuda.json"
      ;;
    *)
      echo "unknown stage $stage (env tests bench05 bench15 profile static decode decode_inductor side train15"\
        "train05 cuda_head head_cuda; lease)"
      status=2
      ;;
  esac
done
if ls "$OUT"/gpu-*.json >/dev/null 2>&1; then
  stamp "merged table"
  "$PY" bench/gpu.py --merge "$OUT"/gpu-*.json | tee "$OUT/table.md"
fi
stamp "done, status $status"
exit $status
