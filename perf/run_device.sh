#!/usr/bin/env bash
# One pass over a device: what runs there, whether every test passes there, and how fast it is.
# Written for a machine lent for a short time (each step has a time cap, and every log lands in OUTDIR as
# it is written, so a run cut short still says how far it got).
#
# Usage: perf/run_device.sh OUTDIR [BUILD_DIR]      (WBCL_DEVICE selects the device; default: gpu)
# Steps (cap): info: device listing (20 s); tests: the ctest suite (STEP_TESTS, 240 s, CTEST_J parallel,
# CTEST_ARGS passed on, e.g. "-R test_linalg"; its python_pytest runs the build host's interpreter and is
# skipped where that one lacks pytest; pytest: the Python tests with $PY where it has pytest, 120 s); linalg: bench_linalg with the OpenBLAS peer (60 s); redunet,
# circulant: run_redunet.sh and run_circulant.sh with the NumPy peer and the PyTorch peer on TORCH_PEER
# (default cuda; perf/peers/redunet_torch.py, circulant_torch.py: issue 16's ReduNet targets) (STEP_PEERS, 90 s each);
# redunet_profile: bench_redunet --profile, the vector ReduNet's device time per kernel and layer (60 s); profile:
# bench_circulant's per-kernel device times, 1-D and 2-D, then 1-D with circulant.wg=0 (the one-matrix-per-work-item
# kernels, for the A/B) (60 s); tune: wbcl-tune on the device, one process per family of TUNE_FAMILIES (default
# "gemm_tiled attention gemm_backend clblast": on the H200 a CLBlast set faults and NVIDIA's driver then refuses
# a new context in that process, so the whole sweep in one process stops there), budget TUNE_BUDGET (180 s) each,
# the tables written to OUTDIR/tuned-FAMILY.txt, not the cache, so later steps keep the defaults (STEP_TUNE,
# 300 s); bench: wbcl-bench on the device, every
# operator verified against the double-precision reference, csv/json/svg (STEP_BENCH, 180 s).
# tssa_test, tssa_bench, tssa_peer (issue 16): test_tssa run directly (150 s), bench_tssa --heads-core on
# TSSA_SHAPES (default "8,12,4096,64;1,8,1024,64") for both kernel variants, then the GPU variant with
# WBCL_TSSA_GLX = 64 / 256 and WBCL_TSSA_GROUP_BYTES = 26000000 (batch groups of 2 entries
# at K12 N4096 p64), and ptxas -v on the cached GPU programs of family tssa where ptxas exists (90 s);
# the PyTorch CUDA peer perf/peers/tssa_torch_cuda.py on the same shapes (60 s).
# tssa_causal_bench, tssa_causal_peer (issue 16): bench_tssa --heads-core TSSA_SHAPES --causal, both variants
# (prefill and decode step) plus ptxas -v on the cached causal GPU program (90 s); the peer with --causal (60 s).
# xca_test, xca_bench, xca_peer (issue 16): test_xca and test_ops run directly (150 s), bench_xca_ops on
# XCA_SHAPES (default "8,12,4096,64;1,8,1024,64") and OPS_SHAPES ("4096,1024;16384,4096") for both kernel
# variants plus ptxas -v on the cached GPU programs of families xca and ops (120 s); the PyTorch CUDA peer
# perf/peers/xca_ops_torch_cuda.py on the same shapes (90 s).
# aot_energy_bench, aot_energy_peer (issue 16): bench_aot_energy, GPU variant, on AOT_SHAPES (default
# "4,12,4096,64;1,8,1024,64"; % of a 67 TFLOP/s FP32 peak) and ptxas -v on its cached GPU programs (90 s);
# the PyTorch CUDA peer perf/peers/aot_energy_torch_cuda.py on the same shapes (90 s).
# chol_bench, chol_peer (issue 16): bench_linalg on the Cholesky shapes of the GPU targets (one 4096, 1024 x
# 64^2, d = 784 single and ReduNet's 11 inverses), then their per-kernel device times and wall time per call
# (20 calls back to back), then 784's and 4096's with WBCL_LA_PANEL_INV = 0, 1, 0, 1 (the panels by the
# solve, the default, or through the diagonal blocks' inverses: host/ops/linalg.c chol_gpu_ahead) (120 s); the PyTorch
# CUDA peer perf/peers/linalg_torch_cuda.py on the same shapes (60 s).
# clblast_tune, gemm_peer, attention_peer, models_peer (issue 17): wbcl-tune --op clblast (CLBlast's Xgemm
# sets and its direct/indirect threshold, checked and timed against CLBlast's own values; table written to
# OUTDIR/clblast-tuned.txt, not the cache) (STEP_CLBLAST_TUNE, 240 s); perf/peers/gemm_matmul_paired.py
# against cuBLAS (CLBlast with its own values, wbcl's packed kernel, wbcl's tiled kernel (WBCL_GEMM_TILED,
# cl/gemm_tiled.cl, the GPU default) with its tile by the shape and with gemm.tiled.db = 1, gemm.tiled.v4 = 1 (each
# alone and both), gemm.tiled.tk = 16,
# gemm.tiled.tile = 128 and 64, gemm.tiled.maxrreg = 128 (-cl-nv-maxrregcount) alone and with tk = 16 (GEMM_PARAM_SIZES); sizes 1024^3, 2048^3, 4096^3 and CRATE-T's MLP shapes at batch 8 and 64 (GEMM_SIZES), then
# CLBlast with the tuned table) (150 s); perf/peers/attention_sdpa_paired.py against CUDA SDPA on ATT_SHAPES (default
# "4,12,4096,64;8,6,1024,64;4,12,4096,32;4,12,4096,128"), with the default kernels, then attention.tiled = 0
# (the one-query kernel), 1 (the register-tiled kernel, p = 32 ... 128) and 2 (its second form, p = 32, 64)
# (STEP_ATTENTION_PEER, 240 s), then tiled = 1 and 2 with attention.maxrreg = 128 (-cl-nv-maxrregcount; on
# ATT_CAP_SHAPES, default p = 64 and 128 at B4 K12 N4096); build_logs: perf/build_logs.py, the register-tiled
# attention programs (p = 64, 128) and the tiled GEMM (128 x 8, 128 x 16, 64 x 8) built from source with and
# without a 128-register cap, with WBCL_BUILD_LOG: on NVIDIA, the driver's own ptxas registers, spills and
# stack per kernel (STEP_BUILD_LOGS, 150 s); perf/peers/models_torch.py, CRATE-T and
# ToST-T at batch 1, 8, 64 against PyTorch CUDA eager, the default parameters (needs safetensors) (150 s);
# models_profile: the same at batch 64 with --profile (wbcl's device time per kernel, torch.profiler's table) (120 s);
# models_clblast: the same at batch 8 and 64 with CLBlast as the GEMM (the tuned table plus gemm.backend = 2;
# only when clblast_tune wrote its table) (120 s).
# These Python steps import python/wbcl with WBCL_BUILD_DIR=BUILD_DIR and run $PY (default python3).
# SKIP="tests circulant ..." skips steps by name. ARCHIVE=FILE.tgz: OUTDIR is packed into FILE after every
# step. A device with no package access needs the build, the runtime libraries and an ICD file brought
# along: tools/device-bundle.sh BUILD_DIR prepares them and prints the lines to run there (perf/RESULTS.md,
# "NVIDIA H200", says what those runs carried). The device tool returns only a few files from $OUT: pass
# an OUTDIR elsewhere and ARCHIVE=$OUT/logs.tgz to get every log back in one file.
set -uo pipefail
out=${1:?usage: perf/run_device.sh OUTDIR [BUILD_DIR]}
build=${2:-build}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export WBCL_DEVICE=${WBCL_DEVICE:-gpu}
export WBCL_CACHE_DIR=${WBCL_CACHE_DIR:-$PWD/$build/cache/wbcl}
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/cache/pocl}
skip=" ${SKIP:-} "
t0=$(date +%s)
step() {  # step NAME CAP_S LOG CMD...
  local name=$1 cap=$2 log=$3; shift 3
  case "$skip" in *" $name "*) echo "== $name: skipped"; return;; esac
  local s=$(date +%s)
  timeout --kill-after=5 "$cap" "$@" >"$out/$log" 2>&1
  local rc=$?
  [ -n "${ARCHIVE:-}" ] && tar czf "$ARCHIVE" -C "$out" .
  echo "== $name: rc $rc ($( [ $rc = 124 ] && echo "cut at ${cap} s" || echo "$(( $(date +%s) - s )) s")), log $log"
}
step info 20 info.log "$build/tools/wbcl-info"
tail -n +1 "$out/info.log" 2>/dev/null | head -40
# shellcheck disable=SC2086
step tests "${STEP_TESTS:-240}" tests.log ctest --test-dir "$build" -j "${CTEST_J:-8}" --timeout 200 --output-on-failure ${CTEST_ARGS:-}
grep -E "tests passed|Failed|\*\*\*|Timeout|Test +#" "$out/tests.log" 2>/dev/null | grep -v "Passed" | head -30
grep -E "tests passed" "$out/tests.log" 2>/dev/null
# issue 17: dense compute against the CUDA peers
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" WBCL_BUILD_DIR="$PWD/$build" PYTHONUNBUFFERED=1
py=${PY:-python3} # a Python with torch (CUDA) and numpy
if "$py" -c "import pytest, numpy" 2>/dev/null; then
  step pytest "${STEP_PYTEST:-120}" pytest.log env WBCL_TEST_DEVICE="$WBCL_DEVICE" "$py" -m pytest -q -p no:cacheprovider python/tests
else echo "== pytest: skipped ($py does not import pytest and numpy)"; fi
tail -n 3 "$out/pytest.log" 2>/dev/null
step clblast_tune "${STEP_CLBLAST_TUNE:-240}" clblast_tune.log "$build/tools/wbcl-tune" --device "$WBCL_DEVICE" --op clblast \
  --budget "${CLBLAST_BUDGET:-150}" --out "$out/clblast-tuned.txt"
tail -n 12 "$out/clblast_tune.log" 2>/dev/null
gemm_sizes=${GEMM_SIZES:-1024,2048,4096,1576x384x1536,1576x1536x384,12608x384x1536,12608x1536x384}
step gemm_peer "${STEP_GEMM_PEER:-150}" gemm_peer.log sh -c "p=perf/peers/gemm_matmul_paired.py
  WBCL_TUNING=off '$py' \$p --torch-device cuda --sizes '$gemm_sizes' --reps 20 --backends ${GEMM_BACKENDS:-auto,clblast,packed}
  for t in 'gemm.tiled.db=1' 'gemm.tiled.v4=1' 'gemm.tiled.db=1 --param gemm.tiled.v4=1' 'gemm.tiled.tk=16' 'gemm.tiled.tile=128' 'gemm.tiled.tile=64' 'gemm.tiled.maxrreg=128' \
           'gemm.tiled.tk=16 --param gemm.tiled.maxrreg=128'; do echo \"== tiled kernel, \$t\"
    WBCL_TUNING=off '$py' \$p --torch-device cuda --sizes ${GEMM_PARAM_SIZES:-1024,2048,4096,12608x384x1536} --reps 20 --backends tiled --param \$t; done
  [ -s '$out/clblast-tuned.txt' ] && { echo '== CLBlast with the tuned table'; WBCL_TUNING='$out/clblast-tuned.txt' '$py' \$p --torch-device cuda --sizes '$gemm_sizes' --reps 20 --backends clblast; }; true"
cat "$out/gemm_peer.log" 2>/dev/null
step attention_peer "${STEP_ATTENTION_PEER:-240}" attention_peer.log sh -c "s='${ATT_SHAPES:-4,12,4096,64;8,6,1024,64;4,12,4096,32;4,12,4096,128}'
  echo '== the defaults (GPU variant: the register-tiled kernel at p = 64 and 128, the one-query kernel at p = 32)'
  '$py' perf/peers/attention_sdpa_paired.py --torch-device cuda --shape \"\$s\" --reps 10
  echo '== the one-query kernel (attention.tiled = 0)'
  '$py' perf/peers/attention_sdpa_paired.py --torch-device cuda --shape \"\$s\" --reps 10 --param attention.tiled=0
  echo '== the register-tiled kernel (attention.tiled = 1; p = 32, 64, 96, 128)'
  '$py' perf/peers/attention_sdpa_paired.py --torch-device cuda --shape \"\$s\" --reps 10 --param attention.tiled=1
  echo '== its second form (attention.tiled = 2; p = 32, 64: 64-key tiles, wbcl_attn_tiled2_gpu; p = 128: the first form)'
  '$py' perf/peers/attention_sdpa_paired.py --torch-device cuda --shape \"\$s\" --reps 10 --param attention.tiled=2
  for t in 1 2; do echo \"== attention.tiled = \$t within 128 registers (attention.maxrreg = 128: four work-groups of 128 per SM)\"
    '$py' perf/peers/attention_sdpa_paired.py --torch-device cuda --shape '${ATT_CAP_SHAPES:-4,12,4096,64;4,12,4096,128}' --reps 10 \
      --param attention.tiled=\$t --param attention.maxrreg=128; done"
cat "$out/attention_peer.log" 2>/dev/null
step build_logs "${STEP_BUILD_LOGS:-150}" build_logs.log "$py" perf/build_logs.py
grep -E '^==|^wbcl: built|ptxas|[Uu]sed [0-9]+ registers|spill|stack frame' "$out/build_logs.log" 2>/dev/null | head -80
step models_peer "${STEP_MODELS_PEER:-150}" models_peer.log env WBCL_TUNING=off "$py" perf/peers/models_torch.py \
  --lib "$build/libwbcl.so" --torch-device cuda --batch 1,8,64 --reps 5 --threads 1
cat "$out/models_peer.log" 2>/dev/null | tail -8
# where the time of a batch-64 forward goes: wbcl's device time per kernel and torch.profiler's table
step models_profile "${STEP_MODELS_PROFILE:-120}" models_profile.log env WBCL_TUNING=off "$py" perf/peers/models_torch.py \
  --lib "$build/libwbcl.so" --torch-device cuda --batch 64 --reps 3 --threads 1 --profile
# the same with CLBlast as the GEMM (the tuned table plus gemm.backend = 2)
[ -s "$out/clblast-tuned.txt" ] && { cat "$out/clblast-tuned.txt"; echo "gemm.backend = 2"; } > "$out/clblast-backend.txt"
[ -s "$out/clblast-backend.txt" ] && step models_clblast "${STEP_MODELS_CLBLAST:-120}" models_clblast.log env WBCL_TUNING="$out/clblast-backend.txt" \
  "$py" perf/peers/models_torch.py --lib "$build/libwbcl.so" --torch-device cuda --batch 8,64 --reps 5 --threads 1
cat "$out/models_clblast.log" 2>/dev/null | tail -6
tssa_shapes=${TSSA_SHAPES:-8,12,4096,64;1,8,1024,64}
step tssa_test "${STEP_TSSA_TEST:-150}" tssa_test.log "$build/tests/test_tssa"
grep -E "Checks|Failure|Error" "$out/tssa_test.log" 2>/dev/null | head -10
step tssa_bench "${STEP_TSSA_BENCH:-90}" tssa_bench.log sh -c "b='$build/perf/bench_tssa'; s='$tssa_shapes'
  \$b --heads-core \"\$s\" --reps 50 || exit 1
  for g in 64 256; do echo \"== WBCL_TSSA_GLX=\$g\"; WBCL_TSSA_GLX=\$g \$b --heads-core \"\$s\" --variants gpu --reps 50; done
  for g in 26000000; do echo \"== WBCL_TSSA_GROUP_BYTES=\$g\"; WBCL_TSSA_GROUP_BYTES=\$g \$b --heads-core \"\$s\" --variants gpu --reps 50; done
  px=\$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
  for f in \$(grep -l -r wbcl_tssa_g_member \"\$WBCL_CACHE_DIR\" 2>/dev/null | head -4); do
    echo \"== ptxas -v \$f\"; sed -n '/Generated by NVIDIA NVVM/,\$p' \"\$f\" | tr -d '\\000' > /tmp/tssa.ptx
    grep -m3 -E '^.target|WBCL_TSSA|^// ' /tmp/tssa.ptx; \$px -arch=sm_90 -v /tmp/tssa.ptx -o /dev/null 2>&1 | grep -E -A2 'entry function .wbcl_tssa_(g_|member|rowsq|output)' | grep -E 'entry|Used|stack'
  done"
cat "$out/tssa_bench.log" 2>/dev/null | head -80
step tssa_peer "${STEP_TSSA_PEER:-60}" tssa_peer.log env PYTHONUNBUFFERED=1 "$py" perf/peers/tssa_torch_cuda.py --shapes "$tssa_shapes" --reps 50
cat "$out/tssa_peer.log" 2>/dev/null | head -20
step tssa_causal_bench "${STEP_TSSA_CAUSAL_BENCH:-90}" tssa_causal_bench.log sh -c "'$build/perf/bench_tssa' --heads-core '$tssa_shapes' --variants cpu,gpu --reps 50 --causal || exit 1
  px=\$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
  for f in \$(grep -l -r wbcl_tssa_gc_member \"\$WBCL_CACHE_DIR\" 2>/dev/null | head -2); do
    echo \"== ptxas -v \$f\"; sed -n '/Generated by NVIDIA NVVM/,\$p' \"\$f\" | tr -d '\\000' > /tmp/tssa_gc.ptx
    \$px -arch=sm_90 -v /tmp/tssa_gc.ptx -o /dev/null 2>&1 | grep -E -A2 'entry function .wbcl_tssa_gc_' | grep -E 'entry|Used|stack'
  done; true"
cat "$out/tssa_causal_bench.log" 2>/dev/null | head -60
step tssa_causal_peer "${STEP_TSSA_CAUSAL_PEER:-60}" tssa_causal_peer.log env PYTHONUNBUFFERED=1 "$py" perf/peers/tssa_torch_cuda.py --shapes "$tssa_shapes" --reps 50 --causal
cat "$out/tssa_causal_peer.log" 2>/dev/null | head -20
aot_shapes=${AOT_SHAPES:-4,12,4096,64;1,8,1024,64}
step aot_energy_bench "${STEP_AOT_BENCH:-90}" aot_energy_bench.log sh -c "'$build/perf/bench_aot_energy' --shapes '$aot_shapes' --variants gpu --reps 10 --peak 67000 || exit 1
  px=\$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
  for f in \$(grep -l -r -E 'wbcl_(aot|energy)_attend_g' \"\$WBCL_CACHE_DIR\" 2>/dev/null | head -4); do
    echo \"== ptxas -v \$f\"; sed -n '/Generated by NVIDIA NVVM/,\$p' \"\$f\" | tr -d '\\000' > /tmp/aot_energy.ptx
    \$px -arch=sm_90 -v /tmp/aot_energy.ptx -o /dev/null 2>&1 | grep -E -A2 'entry function .wbcl_(aot|energy)_[a-z0-9_]*_g' | grep -E 'entry|Used|stack'
  done; true"
cat "$out/aot_energy_bench.log" 2>/dev/null | head -40
step aot_energy_peer "${STEP_AOT_PEER:-90}" aot_energy_peer.log env PYTHONUNBUFFERED=1 "$py" perf/peers/aot_energy_torch_cuda.py --shapes "$aot_shapes" --reps 10 --peak 67000
cat "$out/aot_energy_peer.log" 2>/dev/null | head -20
xca_shapes=${XCA_SHAPES:-8,12,4096,64;1,8,1024,64}
ops_shapes=${OPS_SHAPES:-4096,1024;16384,4096}
step xca_test "${STEP_XCA_TEST:-150}" xca_test.log sh -c "'$build/tests/test_xca' && '$build/tests/test_ops'"
grep -E "Checks|Failure|Error" "$out/xca_test.log" 2>/dev/null | head -10
step xca_bench "${STEP_XCA_BENCH:-120}" xca_bench.log sh -c "'$build/perf/bench_xca_ops' --xca '$xca_shapes' --ops '$ops_shapes' --variants cpu,gpu --reps 50
  px=\$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
  for f in \$(grep -l -r -E 'wbcl_xca_g_gram|wbcl_softmax_g' \"\$WBCL_CACHE_DIR\" 2>/dev/null | head -4); do
    echo \"== ptxas -v \$f\"; sed -n '/Generated by NVIDIA NVVM/,\$p' \"\$f\" | tr -d '\\000' > /tmp/xo.ptx
    \$px -arch=sm_90 -v /tmp/xo.ptx -o /dev/null 2>&1 | grep -E -A2 'entry function .wbcl_(xca_g_|layernorm_g|softmax_g|reduce_(rows|cols)_g_|ew_[a-z_]*_g)' | grep -E 'entry|Used|stack'
  done; true"
cat "$out/xca_bench.log" 2>/dev/null | head -120
step xca_peer "${STEP_XCA_PEER:-90}" xca_peer.log env PYTHONUNBUFFERED=1 "$py" perf/peers/xca_ops_torch_cuda.py --xca "$xca_shapes" --ops "$ops_shapes" --reps 50
cat "$out/xca_peer.log" 2>/dev/null | head -40
step linalg 60 linalg.log "$build/perf/bench_linalg" --reps 5 --threads "$(nproc)" --redunet --large 256,512,1024,2048
step chol_bench "${STEP_CHOL_BENCH:-120}" chol_bench.log sh -c "b='$build/perf/bench_linalg'
  \$b --reps 5 --threads \"\$(nproc)\" --large 784,4096 --small 64 --batch 1024 --redunet || exit 1
  echo '== device time per kernel'; \$b --profile --large 784,4096 --small 64 --batch 1024 --redunet --reps 3
  for i in 0 1 0 1; do echo \"== WBCL_LA_PANEL_INV=\$i (1: the panels through the diagonal blocks' inverses)\"
    WBCL_LA_PANEL_INV=\$i \$b --profile --large 784,4096 --reps 3 | grep -E 'profile|wall|inv128|trsm|r128|upd'; done"
cat "$out/chol_bench.log" 2>/dev/null | head -60
step chol_peer "${STEP_CHOL_PEER:-60}" chol_peer.log env PYTHONUNBUFFERED=1 "$py" perf/peers/linalg_torch_cuda.py --shapes "1,4096;1024,64;1,784;11,784" --inverse "11,784" --reps 20
cat "$out/chol_peer.log" 2>/dev/null | head -12
step redunet "${STEP_PEERS:-90}" redunet.log env OPENBLAS_NUM_THREADS="$(nproc)" TORCH_PEER="${TORCH_PEER:-cuda}" TORCH_PY="$py" \
  perf/run_redunet.sh "$build" 3
step redunet_profile 60 redunet_profile.log sh -c "'$build/perf/bench_redunet' --case mnist --profile && '$build/perf/bench_redunet' --case small --profile"
step circulant "${STEP_PEERS:-90}" circulant.log env OPENBLAS_NUM_THREADS="$(nproc)" TORCH_PEER="${TORCH_PEER:-cuda}" TORCH_PY="$py" \
  perf/run_circulant.sh "$build" 3
step profile 60 profile.log sh -c "'$build/perf/bench_circulant' --case 1d --layers 5 --reps 3 --profile && '$build/perf/bench_circulant' --case 2d --layers 5 --reps 3 --profile && echo '== circulant.wg=0 (one matrix per work-item)' && '$build/perf/bench_circulant' --case 1d --layers 5 --reps 3 --profile --param circulant.wg=0"
step tune "${STEP_TUNE:-300}" tune.log sh -c "for f in \${TUNE_FAMILIES:-gemm_tiled attention gemm_backend clblast}; do
  echo \"== wbcl-tune --op \$f\"; '$build/tools/wbcl-tune' --device '$WBCL_DEVICE' --op \$f --budget '${TUNE_BUDGET:-180}' \
    --out '$out'/tuned-\$f.txt; done"
grep -E "^== |^  [a-z].*\(default|wrote|cut short" "$out/tune.log" 2>/dev/null
step bench "${STEP_BENCH:-180}" bench.log "$build/tools/wbcl-bench" --device "$WBCL_DEVICE" --reps 5 --progress \
  --csv "$out/wbcl-bench.csv" --json "$out/wbcl-bench.json" --plot "$out/wbcl-bench.svg"
grep -E "FAIL|unsupported|error" "$out/bench.log" 2>/dev/null | head -20
[ -s "$out/circulant.log" ] && cp perf/circulant_scaling.csv perf/circulant_scaling.svg "$out/" 2>/dev/null
[ -n "${ARCHIVE:-}" ] && tar czf "$ARCHIVE" -C "$out" .
echo "== total $(( $(date +%s) - t0 )) s"
