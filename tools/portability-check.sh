#!/usr/bin/env bash
# Portability check (issue 7): compiles every cl/*.cl kernel family, the way the library
# assembles it (common.cl + <family>.cl), with every -D specialization the host code uses,
# as OpenCL C 1.2 for
#   nvptx   clang -target nvptx64-nvidia-nvcl                     (NVIDIA PTX)
#   gfx90a  clang -target amdgcn-amd-amdhsa -mcpu=gfx90a -nogpulib (AMD CDNA2, MI200)
#   gfx1030 clang -target amdgcn-amd-amdhsa -mcpu=gfx1030 -nogpulib (AMD RDNA2)
#   pocl    the local OpenCL device (PoCL by default; WBCL_DEVICE-style index in PORTABILITY_DEVICE)
# and reports per kernel what the target tells: VGPRs/SGPRs, spills, LDS (local memory) and
# scratch for AMD (-Rpass-analysis=kernel-resource-usage; with -nogpulib, calls to builtins the
# device library would provide make the scratch figure a conservative 16 KiB), declared .shared
# (local memory) and .local (stack) bytes for PTX (register counts need ptxas, which is not part
# of Debian's clang).
#
# The specializations (keep in step with host/core/program.c prelude and host/ops/*.c):
#   prelude   CPU variant (wbcl_params cpu) and GPU variant (gpu), with fp64 on, and off for the
#             families whose code depends on it
#   attention -DWBCL_ATT_P/PP/VW/QB/G/BQ/BK/VC from choose_params() for p in 32 64 128 (VW 16, QB 4/4/2,
#             VC the whole row), per program (att_opts): CPU-shaped (the CPU variant; the GPU variant's
#             fallback is the same program), register-tiled GPU, one-query GPU;
#             float16 storage: p = 64 with -DWBCL_ATT_HALF=15 (q, k, v, o half) and =8 (o only);
#             CPU only: p = 64 and 128 with QB 6, G 3, VC 1, SP 1 (the default of CPU devices narrower than
#             AVX-512; only CPU devices build it, so the AMD targets skip it: gfx90a refuses its private
#             arrays, a 206 KiB stack frame)
#   tssa      generic; -DWBCL_TSSA_P/K (+ALIGNED) for (p, K) in (64, 8) (17, 3) (128, 12); P alone (32: more
#             than WBCL_TSSA_K_MAX heads), K alone (4, aligned: p above WBCL_TSSA_P_MAX); GPU variant also with
#             -DWBCL_TSSA_GLX (lanes per token row, host/ops/attn_stats.c wbcl__tssa_glx) for (64, 8) (17, 3) (128, 12)
#   redunet   fused -DRD_D -DRD_K -DRD_VW (CPU 16, GPU 1) for (d, K) in (3, 3) (16, 32);
#             GEMM path -DRD_D=0 -DRD_K -DRD_LS (CPU 1, GPU 64)
#   gemm      plain; float16 storage -DWBCL_GEMM_SRC_HALF=1 (half pack sources) and
#             -DWBCL_GEMM_C_HALF=1 (half C); the linear-layer epilogue -DWBCL_GEMM_EPILOGUE=1|2 (bias, bias+GELU)
#             with -DWBCL_GEMM_A_ROWS=0|1 (A read in place), also with a half C
#   circulant -DCI_C=C (host/ops/circulant.c: the channel count, 1..WBCL_CIRCULANT_MAX_CHANNELS = 64) for
#             C in 1 (the default) 3 16 64
# Self-check (run first, and alone with --check-specs, no clang needed): every -D option name the host
# code passes (host/**/*.c) must be set by prelude() or, for each kernel family whose .cl file reads it,
# by that family's specs() — a new kernel variant option cannot be left out of this check.
#
# usage: tools/portability-check.sh [OUTDIR]     (default build/portability)
#        tools/portability-check.sh --check-specs
# PORTABILITY_FAMILIES="tssa linalg:gpu ..." checks only those kernel families (FAMILY:VARIANT: one variant of
# it), PORTABILITY_EXCLUDE="..." all but those (.ci/run runs two halves side by side, each into its own OUTDIR).
# Exit status 1 if any compile fails (the failing compiler output is printed) or the self-check fails.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
check_only=0
[ "${1:-}" = --check-specs ] && { check_only=1; shift; }
out=${1:-build/portability}

prelude() { # variant fp64
  if [ "$1" = cpu ]; then
    echo "-DWBCL_VARIANT_CPU=1 -DWBCL_VARIANT_GPU=0 -DWBCL_WG=64 -DWBCL_GEMM_MR=12 -DWBCL_GEMM_NR=32 -DWBCL_TILE=16 -DWBCL_REDUCE_ROWS=64 -DWBCL_REDUCE_WG=64 -DWBCL_HAS_FP64=$2 -DWBCL_HAS_FP16=0 -DWBCL_SIMD=16"
  else
    echo "-DWBCL_VARIANT_CPU=0 -DWBCL_VARIANT_GPU=1 -DWBCL_WG=256 -DWBCL_GEMM_MR=8 -DWBCL_GEMM_NR=32 -DWBCL_TILE=16 -DWBCL_REDUCE_ROWS=1 -DWBCL_REDUCE_WG=256 -DWBCL_HAS_FP64=$2 -DWBCL_HAS_FP16=0 -DWBCL_SIMD=1"
  fi
}

# attention options as host/ops/attention.c choose_params() and options() compute them; lm = local memory.
# Each program holds the kernels of one path: cpu (the CPU-shaped kernels, -DWBCL_ATT_NO_GPU=1), tiled (the
# register-tiled GPU kernels, -DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_FUSED=1) or fused (the one-query GPU kernel,
# -DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_TILED=1)
att_opts() { # p program [half]
  local p=$1 vw pp nv qb bk=32 lm only
  if [ "$p" -le 4 ]; then vw=4; elif [ "$p" -le 8 ]; then vw=8; else vw=16; fi
  pp=$(( (p + vw - 1) / vw * vw )); nv=$(( pp / vw ))
  if [ $nv -le 4 ]; then qb=4; elif [ $nv -le 8 ]; then qb=2; else qb=1; fi
  if [ "$2" = cpu ]; then lm=$((2 * 1024 * 1024)); else lm=49152; fi  # PoCL 2 MiB; GPUs >= 48 KiB
  while [ $bk -gt 1 ] && [ $(( bk * p * 2 * 4 )) -gt $(( lm / 2 )) ]; do bk=$(( bk / 2 )); done
  case $2 in
    cpu) only=" -DWBCL_ATT_NO_GPU=1" ;;
    tiled) only=" -DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_FUSED=1" ;;
    *) only=" -DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_TILED=1" ;;
  esac
  # VC: the whole row (the defaults of AVX-512 PoCL and of GPUs; those of narrower CPUs, QB 6, G 3, VC 1,
  # SP 1, are two more CPU specs below)
  echo "-DWBCL_ATT_P=$p -DWBCL_ATT_PP=$pp -DWBCL_ATT_VW=$vw -DWBCL_ATT_QB=$qb -DWBCL_ATT_G=4 -DWBCL_ATT_BQ=64 -DWBCL_ATT_BK=$bk -DWBCL_ATT_VC=$nv${3:+ -DWBCL_ATT_HALF=$3}$only"
}

specs() { # family variant -> one line per extra option set ("-" = none)
  case $1 in
    attention) if [ "$2" = cpu ]; then
            for p in 32 64 128; do att_opts $p cpu; done; att_opts 64 cpu 15; att_opts 64 cpu 8
            # AVX2 / NEON-width CPUs at p = 64 and 128: 6 queries per group, 3 groups, O += P V one vector a
            # pass, the score loop one 16-key panel at a time
            att_opts 64 cpu | sed 's/-DWBCL_ATT_QB=4/-DWBCL_ATT_QB=6/; s/-DWBCL_ATT_G=4/-DWBCL_ATT_G=3/; s/-DWBCL_ATT_VC=4/-DWBCL_ATT_VC=1 -DWBCL_ATT_SP=1/'
            att_opts 128 cpu | sed 's/-DWBCL_ATT_QB=2/-DWBCL_ATT_QB=6/; s/-DWBCL_ATT_G=4/-DWBCL_ATT_G=3/; s/-DWBCL_ATT_VC=8/-DWBCL_ATT_VC=1 -DWBCL_ATT_SP=1/'
          else
            for p in 32 64 128; do att_opts $p fused; att_opts $p tiled; done
            att_opts 64 fused 15; att_opts 64 tiled 15; att_opts 64 tiled 8
            # a GPU with the first register-tiled form's local memory but not the second's
            echo "$(att_opts 64 tiled) -DWBCL_ATT_NO_TILED2=1"
          fi ;;
    tssa) echo "-"; echo "-DWBCL_TSSA_P=64 -DWBCL_TSSA_K=8 -DWBCL_TSSA_ALIGNED=1"; echo "-DWBCL_TSSA_P=17 -DWBCL_TSSA_K=3"
          echo "-DWBCL_TSSA_P=128 -DWBCL_TSSA_K=12"
          echo "-DWBCL_TSSA_P=32"; echo "-DWBCL_TSSA_K=4 -DWBCL_TSSA_ALIGNED=1" # K > 64 heads; p > 1024
          if [ "$2" = gpu ]; then # the GPU-shaped non-causal kernels: lanes per token row as wbcl__tssa_glx picks them
            echo "-DWBCL_TSSA_P=64 -DWBCL_TSSA_K=8 -DWBCL_TSSA_ALIGNED=1 -DWBCL_TSSA_GLX=64"
            echo "-DWBCL_TSSA_P=17 -DWBCL_TSSA_K=3 -DWBCL_TSSA_GLX=32"; echo "-DWBCL_TSSA_P=128 -DWBCL_TSSA_K=12 -DWBCL_TSSA_GLX=256"
            # the GPU-shaped causal kernels' own program (host/ops/tssa.c gc_kernel): K12 p64 (LX 128), K8 p64, K3 p17
            echo "-DWBCL_TSSA_P=64 -DWBCL_TSSA_K=12 -DWBCL_TSSA_GLX=128 -DWBCL_TSSA_CAUSAL=1"
            echo "-DWBCL_TSSA_P=64 -DWBCL_TSSA_K=8 -DWBCL_TSSA_GLX=64 -DWBCL_TSSA_CAUSAL=1"; echo "-DWBCL_TSSA_P=17 -DWBCL_TSSA_K=3 -DWBCL_TSSA_GLX=32 -DWBCL_TSSA_CAUSAL=1"
          fi ;;
    gemm) echo "-"; echo "-DWBCL_GEMM_SRC_HALF=1"; echo "-DWBCL_GEMM_C_HALF=1"
          echo "-DWBCL_GEMM_EPILOGUE=1 -DWBCL_GEMM_A_ROWS=0"; echo "-DWBCL_GEMM_EPILOGUE=2 -DWBCL_GEMM_A_ROWS=1"
          echo "-DWBCL_GEMM_EPILOGUE=0 -DWBCL_GEMM_A_ROWS=1"; echo "-DWBCL_GEMM_EPILOGUE=2 -DWBCL_GEMM_A_ROWS=1 -DWBCL_GEMM_C_HALF=1" ;;
    gemm_tiled) local g="-DWBCL_GT_TM=128 -DWBCL_GT_TN=128 -DWBCL_GT_TK=16" # host/ops/gemm.c run_tiled
          # GPU-shaped: the CPU variant's build (PoCL runs it too) only at the default tile
          [ "$2" = gpu ] || { echo "-DWBCL_GT_TM=128 -DWBCL_GT_TN=128 -DWBCL_GT_TK=8 -DWBCL_GT_TA=0 -DWBCL_GT_TB=0 -DWBCL_GT_C_HALF=0"; return; }
          for t in "64 8" "64 32" "128 8" "128 16" "128 32"; do set -- $t # tile, tk
            echo "-DWBCL_GT_TM=$1 -DWBCL_GT_TN=$1 -DWBCL_GT_TK=$2 -DWBCL_GT_TA=0 -DWBCL_GT_TB=0 -DWBCL_GT_C_HALF=0"; done
          echo "$g -DWBCL_GT_TA=1 -DWBCL_GT_TB=1 -DWBCL_GT_C_HALF=0"; echo "$g -DWBCL_GT_TA=0 -DWBCL_GT_TB=1 -DWBCL_GT_C_HALF=1"
          # gemm.tiled.db = 1 (two local slices) with gemm.tiled.v4 = 1 (float4 loads of aligned operands: VA, VB) or
          # not; gemm.tiled.v4 = 1 alone
          echo "-DWBCL_GT_TM=128 -DWBCL_GT_TN=128 -DWBCL_GT_TK=8 -DWBCL_GT_TA=0 -DWBCL_GT_TB=0 -DWBCL_GT_C_HALF=0 -DWBCL_GT_DB=1 -DWBCL_GT_VA=1 -DWBCL_GT_VB=1"
          echo "$g -DWBCL_GT_TA=1 -DWBCL_GT_TB=1 -DWBCL_GT_C_HALF=0 -DWBCL_GT_DB=1 -DWBCL_GT_VA=1 -DWBCL_GT_VB=0"
          echo "-DWBCL_GT_TM=128 -DWBCL_GT_TN=128 -DWBCL_GT_TK=8 -DWBCL_GT_TA=0 -DWBCL_GT_TB=0 -DWBCL_GT_C_HALF=0 -DWBCL_GT_DB=0 -DWBCL_GT_VA=1 -DWBCL_GT_VB=1"
          # the linear layers' epilogue (bias + GELU in the store; wbcl__gemm_linear): X Wᵀ at both tiles
          echo "-DWBCL_GT_TM=128 -DWBCL_GT_TN=128 -DWBCL_GT_TK=8 -DWBCL_GT_TA=0 -DWBCL_GT_TB=1 -DWBCL_GT_C_HALF=0 -DWBCL_GT_EPI=2"
          echo "-DWBCL_GT_TM=64 -DWBCL_GT_TN=64 -DWBCL_GT_TK=8 -DWBCL_GT_TA=0 -DWBCL_GT_TB=1 -DWBCL_GT_C_HALF=0 -DWBCL_GT_EPI=1"
          echo "-DWBCL_GT_TM=64 -DWBCL_GT_TN=64 -DWBCL_GT_TK=8 -DWBCL_GT_TA=0 -DWBCL_GT_TB=0 -DWBCL_GT_C_HALF=0 -DWBCL_GT_DB=1 -DWBCL_GT_VA=0 -DWBCL_GT_VB=0" ;;
    redunet) local vw=16 ls=1; [ "$2" = gpu ] && { vw=1; ls=64; }
          echo "-DRD_D=3 -DRD_K=3 -DRD_VW=$vw"; echo "-DRD_D=16 -DRD_K=32 -DRD_VW=$vw"; echo "-DRD_D=0 -DRD_K=3 -DRD_LS=$ls" ;;
    circulant) echo "-"; for c in 3 16 64; do echo "-DCI_C=$c"; done
          if [ "$2" = cpu ]; then echo "-DCI_C=20 -DWBCL_SIMD=8"; fi ;; # AVX2: circ_update's 2-row tiles
    linalg) echo "-"; if [ "$2" = cpu ]; then echo "-DWBCL_SIMD=8"; fi ;; # AVX2: the update, panel and solve tiles
    aot|energy) echo "-" # the GPU-shaped kernels' column capacity (host/ops/aot.c, energy.c col_capacity: 16, 32,
          # 64, 128); 64 (p = 64, 64 queries per work-group) and 128 (the 32-query geometry) span the tilings
          if [ "$2" = gpu ]; then for c in 64 128; do echo "-DWBCL_$(tr a-z A-Z <<< "$1")_PC=$c"; done; fi ;;
    attn_decode) local big=256; [ "$2" = gpu ] && big=32 # host/ops/attn_decode.c: p <= 256 (CPU), <= 64 (GPU)
          for pv in "64 16" "12 4" "8 8" "5 1" "$big 16"; do set -- $pv; echo "-DAD_P=$1 -DAD_VW=$2"; done ;;
    *) echo "-" ;;
  esac
}

# The self-check: option names the host passes vs prelude() and specs().
check_specs() {
  local bad=0 n=0 name fam fams all
  for name in $(grep -rhoE --include='*.c' -- '-D[A-Z_][A-Z0-9_]*=' host/ | sed 's/^-D//; s/=$//' | sort -u); do
    n=$((n + 1))
    [[ "$(prelude cpu 1)" == *"-D$name="* ]] && continue
    fams=$(grep -lw -- "$name" cl/*.cl | xargs -r -n1 basename | sed 's/\.cl$//')
    if [ -z "$fams" ]; then
      echo "portability-check: the host passes -D$name but no cl/*.cl file reads it"; bad=1; continue
    fi
    for fam in $fams; do
      all="$(specs "$fam" cpu; specs "$fam" gpu)" # (not piped into grep -q: SIGPIPE + pipefail)
      if [[ "$all" != *"-D$name="* ]]; then
        echo "portability-check: the host passes -D$name and cl/$fam.cl reads it, but specs() gives $fam no value for it"
        bad=1
      fi
    done
  done
  [ $bad = 0 ] && echo "portability-check: specs cover all $n -D options the host code passes"
  return $bad
}
check_specs || exit 1
[ $check_only = 1 ] && exit 0
mkdir -p "$out"
CLANG=${CLANG:-}
if [ -z "$CLANG" ]; then
  for c in clang-15 clang-14 clang; do command -v $c >/dev/null && { CLANG=$c; break; }; done
fi
[ -n "$CLANG" ] || { echo "portability-check: clang not found (tools/install-deps.sh installs it)"; exit 1; }
# a small OpenCL program that builds a source with options on the local device
clbuild=$out/clbuild
if [ ! -x "$clbuild" ] || [ "$0" -nt "$clbuild" ]; then
  cat > "$out/clbuild.c" <<'EOF'
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: clbuild DEVICE_INDEX FILE OPTIONS\n"); return 2; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 2;
    static char src[1 << 20];
    size_t n = fread(src, 1, sizeof src - 1, f);
    src[n] = 0;
    fclose(f);
    cl_platform_id pl[16];
    cl_uint np = 0, want = (cl_uint)atoi(argv[1]), seen = 0;
    clGetPlatformIDs(16, pl, &np);
    for (cl_uint i = 0; i < np; i++) {
        cl_device_id d[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_ALL, 16, d, &nd) != CL_SUCCESS) continue;
        for (cl_uint j = 0; j < nd; j++, seen++) {
            if (seen != want) continue;
            cl_int e;
            cl_context cx = clCreateContext(NULL, 1, &d[j], NULL, NULL, &e);
            const char *s = src;
            cl_program p = clCreateProgramWithSource(cx, 1, &s, NULL, &e);
            e = clBuildProgram(p, 1, &d[j], argv[3], NULL, NULL);
            if (e != CL_SUCCESS) {
                static char log[1 << 16];
                clGetProgramBuildInfo(p, d[j], CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
                fprintf(stderr, "build failed (%d):\n%s\n", (int)e, log);
            }
            clReleaseProgram(p);
            clReleaseContext(cx);
            return e == CL_SUCCESS ? 0 : 1;
        }
    }
    fprintf(stderr, "no OpenCL device %u\n", want);
    return 2;
}
EOF
  cc -O1 -o "$clbuild" "$out/clbuild.c" -lOpenCL || { echo "portability-check: cannot build clbuild"; exit 1; }
fi

# PORTABILITY_FAMILIES / PORTABILITY_EXCLUDE entries: FAMILY (both variants) or FAMILY:VARIANT
selected() { # family variant -> status 0 if it is to be compiled
  local f=$1 v=$2
  if [ -n "${PORTABILITY_FAMILIES:-}" ] && [[ " $PORTABILITY_FAMILIES " != *" $f "* ]] &&
     [[ " $PORTABILITY_FAMILIES " != *" $f:$v "* ]]; then return 1; fi
  [[ " ${PORTABILITY_EXCLUDE:-} " == *" $f "* || " ${PORTABILITY_EXCLUDE:-} " == *" $f:$v "* ]] && return 1
  return 0
}
report=$out/report.txt times=$out/times.txt # times: one line per compile, its seconds first
: > "$report"
: > "$times"
fails=0 total=0
t0=$(date +%s)
for cl in cl/*.cl; do
  fam=$(basename "$cl" .cl)
  [ "$fam" = common ] && continue
  src=$out/$fam.cl
  { cat cl/common.cl; echo; echo "#line 1 \"$fam.cl\""; cat "$cl"; } > "$src"
  # fp64 off as well only where the family's code depends on it (double or WBCL_HAS_FP64);
  # elsewhere the flag changes nothing but the (common) pragma
  fp64s="1"
  code=$(sed -e 's://.*$::' "$cl" | perl -0pe 's:/\*.*?\*/::gs') # comments stripped: a mention is no dependence
  grep -qE 'double|WBCL_HAS_FP64' <<< "$code" && fp64s="1 0"
  [ "$fam" = core ] && fp64s="1 0"
  for variant in cpu gpu; do
    selected "$fam" $variant || continue
    for fp64 in $fp64s; do
      pre=$(prelude $variant $fp64)
      while IFS= read -r extra; do
        [ "$extra" = "-" ] && extra=""
        base=$pre # a spec that sets WBCL_SIMD replaces the prelude's value (build options have no -U)
        [[ "$extra" == *-DWBCL_SIMD=* ]] && base=$(sed 's/-DWBCL_SIMD=[0-9]*//' <<< "$pre")
        opts="-cl-std=CL1.2 $base $extra"
        for target in nvptx gfx90a gfx1030 pocl; do
          # PoCL: the device's own fp64 setting only (it has fp64); GPU targets: both
          [ "$target" = pocl ] && [ "$fp64" = 0 ] && continue
          # the narrower CPUs' attention programs (-DWBCL_ATT_SP=1, QB 6): host/ops/attention.c gives them to CPU
          # devices only; PTX and PoCL compile them, the AMD GPU back ends are skipped
          case " $extra " in *" -DWBCL_ATT_SP=1 "*) [[ $target == gfx* ]] && continue ;; esac
          total=$((total + 1))
          log=$out/log.txt
          tc=$(date +%s%N)
          case $target in
            nvptx) $CLANG -x cl -Xclang -finclude-default-header -target nvptx64-nvidia-nvcl -O2 -S $opts \
                     "$src" -o "$out/$fam.ptx" >"$log" 2>&1 ;;
            gfx*) $CLANG -x cl -Xclang -finclude-default-header -target amdgcn-amd-amdhsa -mcpu=$target -nogpulib \
                     -O2 -c $opts -Rpass-analysis=kernel-resource-usage "$src" -o "$out/$fam.$target.o" >"$log" 2>&1 ;;
            pocl) POCL_CACHE_DIR=$out/pocl-cache "$clbuild" "${PORTABILITY_DEVICE:-0}" "$src" "$opts" >"$log" 2>&1 ;;
          esac
          rc=$?
          printf '%7.1f s  %-8s %s [%s fp64=%s]%s\n' "$(( ($(date +%s%N) - tc) / 1000000 ))e-3" "$target" "$fam" \
            "$variant" "$fp64" "${extra:+ $extra}" >> "$times"
          if [ $rc != 0 ]; then
            fails=$((fails + 1))
            echo "FAIL $target $fam [$variant fp64=$fp64] $extra"
            grep -v 'remark:' "$log" | head -30
            continue
          fi
          tag="$fam [$variant fp64=$fp64${extra:+ $extra}]"
          case $target in
            gfx*) # one line per kernel: VGPRs SGPRs spills LDS scratch occupancy
              awk -v t="$target" -v tag="$tag" '
                { sub(/ \[-Rpass-analysis=kernel-resource-usage\]$/, "") }
                /Function Name:/ {k=$NF}
                /SGPRs:/ && !/Spill/ {s=$NF} /VGPRs:/ && !/Spill/ {v=$NF} /VGPRs Spill:/ {vs=$NF}
                /ScratchSize/ {sc=$NF} /Occupancy/ {o=$NF}
                /LDS Size/ {printf "%-8s %-28s VGPR %4s SGPR %4s VGPR-spill %3s LDS %6s scratch %6s occ %2s  %s\n", t, k, v, s, vs, $NF, sc, o, tag}
              ' "$log" >> "$report" ;;
            nvptx) # .shared (local memory, module-scope "<kernel>.<var>[bytes]") and .local (stack) bytes
              awk -v tag="$tag" '
                NR == FNR { if ($0 ~ /^[ \t]*\.shared/ && match($0, /[A-Za-z_0-9]+_\$_[A-Za-z_0-9]+\[[0-9]+\]/)) {
                              d = substr($0, RSTART, RLENGTH); kn = substr(d, 1, index(d, "_$_") - 1)
                              match(d, /\[[0-9]+\]/); sh[kn] += substr(d, RSTART + 1, RLENGTH - 2) }
                            next }
                $1 == ".entry" || ($1 == ".visible" && $2 == ".entry") {k = $1 == ".entry" ? $2 : $3; sub(/\(.*/, "", k); lo = 0}
                /\.local/ && match($0, /\[[0-9]+\]/) {lo += substr($0, RSTART + 1, RLENGTH - 2)}
                /^}/ && k != "" {printf "nvptx    %-28s shared %6d local %6d  %s\n", k, sh[k] + 0, lo, tag; k = ""}
              ' "$out/$fam.ptx" "$out/$fam.ptx" >> "$report" ;;
          esac
        done
      done < <(specs "$fam" $variant)
    done
  done
done
echo "portability-check: $((total - fails)) of $total compiles passed ($(( $(date +%s) - t0 )) s; $CLANG)"
echo "portability-check: per-kernel resource use in $report ($(wc -l < "$report") lines); the largest:"
grep -E '^gfx' "$report" | sort -k4 -n -r | awk '!seen[$2]++' | head -8
echo "portability-check: compile time by family and target (every compile's in $times):"
awk '{ k = $4 ":" substr($5, 2) " " $3; t[k] += $1; n[k]++ } END { for (k in t) printf "%8.0f s %4d  %s\n", t[k], n[k], k }' "$times" |
  sort -k1 -n -r | head -12
[ $fails = 0 ]
