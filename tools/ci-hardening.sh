#!/usr/bin/env bash
# Hardening CI jobs (issue 7), run after .ci/run's normal build and tests:
#
#   1. asan      a second build (build-asan/) with AddressSanitizer + UndefinedBehaviorSanitizer
#                (-fno-sanitize-recover: any UB is fatal) and the WHOLE test suite under it,
#                LeakSanitizer on. Suppressions: tools/sanitizers/lsan.supp (OpenCL runtime only).
#   2. valgrind  memcheck on the Release build (build/, which .ci/run has just built and whose
#                PoCL cache its tests have warmed): --errors-for-leak-kinds=definite, any error
#                fails. The subset (PoCL under valgrind runs kernels 30-100x slower, the whole
#                suite would take hours) covers every module: test_core (contexts, programs,
#                caches, tensors, two contexts in two threads), test_io (all file parsers),
#                test_catalogue (the error paths of every module and of wbcl-run),
#                wbcl-bench --quick (every operator once, verified against the reference: aot,
#                attention, energy, gemm both paths, heads, ista/lasso, linalg, measures, ops,
#                redunet, tssa, xca). Suppressions: tools/sanitizers/valgrind.supp.
#                Two parts: valgrind-suites (the three suites, ~9-12 min, cold caches: PoCL compiles
#                under memcheck there) and valgrind-bench (wbcl-bench --quick), which .ci/run runs as
#                separate jobs; valgrind = both in turn. valgrind-bench first warms its caches with a
#                native run: on a host where valgrind's CPU is the one PoCL sees natively (AVX2) the
#                memcheck run then loads every kernel (Zen 3: 210 s native + 73 s memcheck, against
#                72 min compiling under memcheck); on an AVX-512 host it still compiles (~50 min).
#
# usage: tools/ci-hardening.sh [asan|valgrind-suites|valgrind-bench|valgrind|all]   (default all)
# Exit status non-zero if any job finds an error. Prints each job's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=${1:-all}
jobs=${WBCL_CI_JOBS:-$(nproc)}
supp=$root/tools/sanitizers

stamp() { date +%s; }

run_asan() {
  local t0; t0=$(stamp)
  local san="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWBCL_BUILD_PERF=OFF \
        -DCMAKE_C_FLAGS="$san" \
        -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
        -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  cmake --build build-asan -j"$jobs"
  # ASAN_OPTIONS:
  #   detect_leaks=1              LeakSanitizer at every (forked test) process exit
  #   allocator_may_return_null=1 PoCL allocates device buffers with the host malloc; the
  #                               out-of-memory tests ask for more than the machine has and
  #                               must get CL_MEM_OBJECT_ALLOCATION_FAILURE (-> a wbcl error),
  #                               not ASan's "allocation-size-too-big" abort
  #   detect_odr_violation=0      libOpenCL/PoCL/LLVM are loaded into one process and share
  #                               some global symbols among themselves (not wbcl's)
  #   strict_string_checks=1, check_initialization_order=1: stricter checks on our code
  #   new_delete_type_mismatch=0  clFFT 2.12 (Debian's libclFFT.so.2) deletes its plan actions
  #                               through a base-class pointer (FFTRepo::deletePlan, allocated in
  #                               selectAction): a sized-delete mismatch inside clFFT, reached from
  #                               clfftDestroyPlan. wbcl is C, so operator new/delete occur only in
  #                               the C++ runtime libraries (clFFT, CLBlast, PoCL/LLVM): turning this
  #                               one C++ check off hides nothing of ours
  #   intercept_tls_get_addr=0    the sanitizer runtime of GCC <= 13 / LLVM <= 16 mistakes a
  #                               dynamic TLS block whose address is 16 mod 4096 for a pre-2.25
  #                               glibc one and reads a bogus header before it; LeakSanitizer's
  #                               stop-the-world tracer then segfaults at exit ("Tracer caught
  #                               signal 11") without reporting anything. Deterministic for a
  #                               given memory layout (one test_circulant case hit it on every
  #                               try; off, that suite passes with leak checking on). The cost:
  #                               pointers held only in dynamic TLS are not roots, which can
  #                               only add leak reports, never hide one. (Leak detection still
  #                               works with it: checked on a deliberate 77-byte leak.)
  #   use_sigaltstack=0           LLVM (inside PoCL) gives every thread that compiles a kernel its
  #                               own malloc'ed alternate signal stack when the current one is
  #                               smaller than it wants (llvm/lib/Support/Unix/Signals.inc,
  #                               CreateSigAltStack); at that thread's exit the sanitizer runtime of
  #                               GCC 12 unmaps whatever stack is registered as if it were its own
  #                               and aborts ("CHECK failed ... unable to unmap", fixed upstream in
  #                               llvm-project PR #179000). ASan's own alternate stack is sized by
  #                               the CPU's signal frame, so it hit only on an AVX2 host (test_core's
  #                               two_contexts_in_two_threads and test_threads, every try). The cost:
  #                               a stack overflow is reported as a plain SEGV, not with ASan's report.
  # LSAN_OPTIONS: leaks inside the OpenCL runtime (PoCL, LLVM, clang, ocl-icd, hwloc) only,
  #   each justified in lsan.supp. UBSAN_OPTIONS: report with a stack and stop.
  export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:detect_odr_violation=0:strict_string_checks=1:check_initialization_order=1:new_delete_type_mismatch=0:intercept_tls_get_addr=0:use_sigaltstack=0"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # --repeat until-pass:2: kept as a guard in case the tracer crashes at exit for another
  # reason than the one intercept_tls_get_addr=0 removes (the earlier occasional crashes in
  # other suites were probably the same layout-dependent bug); a real leak or memory error is
  # deterministic and fails the repeat as well.
  local rc=0
  ctest --test-dir build-asan --output-on-failure --repeat until-pass:2 || rc=$?
  unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
  echo "ci-hardening: asan+ubsan job: $(( $(stamp) - t0 )) s, status $rc"
  return $rc
}

vg() {
  # One process under memcheck; its own exit status is kept (99 = a memcheck error).
  local log=$1; shift
  local t0; t0=$(stamp)
  local rc=0
  CK_FORK=no valgrind -q --tool=memcheck --error-exitcode=99 --leak-check=full \
      --errors-for-leak-kinds=definite --show-leak-kinds=definite --num-callers=40 \
      --suppressions="$supp/valgrind.supp" --log-file="$log" "$@" >"$log.out" 2>&1 || rc=$?
  echo "ci-hardening: valgrind $(basename "$1") $*: $(( $(stamp) - t0 )) s, status $rc"
  if [ "$rc" != 0 ]; then
    tail -n 40 "$log.out"; cat "$log"
  fi
  return $rc
}

valgrind_setup() {
  command -v valgrind >/dev/null || { echo "ci-hardening: valgrind not installed (tools/install-deps.sh)"; return 1; }
  # WBCL_CI_PREBUILT=1 (.ci/run, which has built build/ and starts the two parts side by side):
  # no configure or build here, so that the parts never run CMake on one tree at the same time.
  if [ "${WBCL_CI_PREBUILT:-0}" != 1 ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j"$jobs"
  fi
  # Caches of their own: under valgrind the CPU that LLVM (and so PoCL) detects is valgrind's
  # virtual one (no AVX-512), so PoCL builds different kernels and neither its cache nor wbcl's
  # (keyed by the device name) from the normal run applies. The first run compiles under
  # memcheck (most of this job's time); a re-run in the same tree reuses them. $1 names the
  # cache, so that the two parts below can run at the same time without sharing one.
  export POCL_CACHE_DIR=$root/build/cache/pocl-valgrind$1 WBCL_CACHE_DIR=$root/build/cache/wbcl-valgrind$1
  export CK_DEFAULT_TIMEOUT=3000
  mkdir -p "$root/build/valgrind"
}

# The memcheck subset in two parts, which .ci/run starts side by side: valgrind runs the threads
# of one process one at a time, so each part keeps one core busy.
run_valgrind_suites() {
  local t0; t0=$(stamp)
  valgrind_setup "" || return 1
  local out=$root/build/valgrind rc=0
  # Check runs the cases in this process (CK_FORK=no): one report per suite.
  # (test_threads is left to the ASan job: valgrind serializes threads, and its three
  #  repeated pipelines in three contexts took over 20 minutes under memcheck)
  for t in test_core test_io test_catalogue; do
    [ -x build/tests/$t ] || continue
    vg "$out/$t.log" build/tests/$t || rc=1
  done
  echo "ci-hardening: valgrind suites job: $(( $(stamp) - t0 )) s, status $rc"
  return $rc
}

run_valgrind_bench() {
  local t0; t0=$(stamp)
  valgrind_setup "-bench" || return 1
  local rc=0
  # Warm this part's caches natively first (a minute or two): where valgrind's virtual CPU is the
  # host's as PoCL sees it (an AVX2 host: the same `pthread-haswell` device and vector width), the
  # run below then loads every kernel from the caches instead of compiling it under memcheck, which
  # was most of this job (61 of 78 min of CI on a Zen 3). Where it differs (an AVX-512 host, whose
  # AVX-512 valgrind does not model), the run compiles as before. Memcheck still runs all of wbcl's
  # code and the kernels; valgrind-suites keeps the compile-from-source path under memcheck (cold
  # caches of its own). Its status is ignored: a failing operator fails the run below and test_bench.
  local tw; tw=$(stamp)
  build/tools/wbcl-bench --quick --reps 1 --device 0 >"$root/build/valgrind/wbcl-bench-warm.out" 2>&1 || true
  echo "ci-hardening: valgrind bench job: caches warmed natively in $(( $(stamp) - tw )) s"
  # every operator once, verified against the double reference (the longest part: 17 min in
  # an earlier trial, over 27 min once circulant, model and fp16 rows were added)
  vg "$root/build/valgrind/wbcl-bench.log" build/tools/wbcl-bench --quick --reps 1 --device 0 || rc=1
  # (wbcl-run check is not run here: it calls the same GEMM and basic ops as wbcl-bench --quick,
  #  and took 341 s more under memcheck)
  echo "ci-hardening: valgrind bench job: $(( $(stamp) - t0 )) s, status $rc"
  return $rc
}

status=0
case "$what" in
  asan) run_asan || status=1 ;;
  valgrind-suites) run_valgrind_suites || status=1 ;;
  valgrind-bench) run_valgrind_bench || status=1 ;;
  valgrind) run_valgrind_suites || status=1; run_valgrind_bench || status=1 ;;
  all) run_asan || status=1; run_valgrind_suites || status=1; run_valgrind_bench || status=1 ;;
  *) echo "usage: $0 [asan|valgrind-suites|valgrind-bench|valgrind|all]" >&2; exit 2 ;;
esac
[ $status = 0 ] && echo "ci-hardening: all jobs passed" || echo "ci-hardening: FAILED"
exit $status
