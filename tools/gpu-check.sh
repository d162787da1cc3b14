#!/usr/bin/env bash
# GPU check without a GPU (issue 16): every GPU-shaped kernel, compiled for NVIDIA sm_90 (H100) and
# sm_80 (A100), with its registers, spills, stack frame and shared memory as ptxas reports them, and
# the occupancy its register count allows. ../shared/PERF-NOTES.md, "Checking GPU kernels without a GPU".
#
# Route, per kernel family F and specialization S (one program per family, as the library builds it):
#   cat cl/common.cl cl/F.cl                           (as tools/portability-check.sh assembles it)
#   clang-14 -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -O3 -emit-llvm -c  <GPU prelude> <S>
#            -cl-no-stdinc -Xclang -finclude-default-header   (the full opencl-c.h: clang-14's default
#            table of builtins lacks vload_half*/vstore_half* on __global pointers, which the float16
#            storage kernels use; the other kernels compile to the same PTX either way)
#   llvm-link-14 with libclc's /usr/lib/clc/nvptx64--nvidiacl.bc   (Debian libclc-14; the warning about
#                                                                   two target triples is harmless)
#   llc-14 -march=nvptx64 -mcpu=sm_80     llc-14 knows up to sm_86 / PTX 7.5, not sm_90: the PTX is
#                                         written for sm_80 (.version 7.0) and, PTX being forward
#                                         compatible, ptxas compiles the same PTX for both targets
#   ptxas -arch=sm_90 -v ; ptxas -arch=sm_80 -v
# The GPU prelude and the specializations S are prelude gpu 1 and specs F gpu of
# tools/portability-check.sh, read from that file (so both checks follow the host code in step);
# fp64 on only (NVIDIA devices have it). Not checked: the CPU variant's kernels that the GPU build
# also holds but a GPU-shaped context never launches, found by name: *_cpu (host/ops/attention.c,
# host/ops/basic.c take *_gpu) and X where the family also has X_g (host/ops/circulant_pipeline.c
# takes X_g); they are listed, not compiled by ptxas. Any other CPU-only kernel goes in the allow-list.
# NVIDIA's own OpenCL compiler allocates differently (it gives the fused attention kernel 255 registers
# where this route gives 116 + a 512-byte stack frame): read a stack frame here as a kernel that
# would be register-bound on NVIDIA; exact figures come from the driver's PTX (PERF-NOTES.md).
#
# Output: one line per arch x kernel x specialization:
#   arch family kernel regs spill-st spill-ld stack smem thr/SM [specialization]
# (spill bytes of non-inlined callees, i.e. libclc builtins, are added to the kernel's; stack is the
# cumulative stack size). Then the kernels with spills or a stack frame with their verdicts (allowed /
# NEW / WORSE than allowed, the latter two with the allow-list line the measured figures would give),
# stale allow-list entries, a summary and the time taken (wall, and the three slowest programs).
# Files in OUT (build/gpu-check): report.txt (the table), results.tsv, problems.tsv, per program the
# assembled source, .bc, .ptx and ptxas's output per arch.
# Time: one job per program (family x specialization: 36 today), run by xargs -P (nproc) slowest first
# (the last run's times); all families take about 2 minutes of wall time on 2 busy shared cores
# (wbcl_gemm_packed alone: ptxas about 8 s per arch), --family F seconds.
#
# Allow-list: tools/gpu-check.allow (GPU_CHECK_ALLOW overrides), one entry a line, '|'-separated:
#   KERNEL | SPECIALIZATION | stack<=BYTES spill<=BYTES | REASON
# SPECIALIZATION is the kernel's -D options beyond the prelude exactly as printed here ("-" for none,
# "*" for every specialization); the figures are the measured ones (the largest over sm_90 and
# sm_80; spill = stores + loads): a listed kernel still fails if it gets worse. Entries no longer
# needed are reported (remove them). '#' starts a comment.
#
# Exit status: 1 on any spill or stack frame in a GPU-shaped kernel that the allow-list does not
# cover, on a failing compile, or on a malformed allow-list; 0 otherwise. Where clang-14, llvm-link-14,
# llc-14, libclc or ptxas is missing it prints exactly what is missing and "skipped", and exits 0.
#
# usage: tools/gpu-check.sh [--family F] [--out DIR] [--jobs N]   (default: all families,
#                                                                   build/gpu-check, nproc jobs)
#        tools/gpu-check.sh --check-allow    the allow-list's format, kernel names and specializations
#                                            against cl/*.cl and specs(); no compiler needed (CTest)
# Tools: CLANG14, LLVM_LINK14, LLC14, LIBCLC (the .bc), PTXAS override the search; ptxas is looked for
# on PATH, in $CUDA_HOME/bin and /usr/local/cuda/bin. GPU_CHECK_ARCHS="sm_90 sm_80" sets the targets.
#
# Occupancy (register-limited only; sm_90 and sm_80 alike: 65536 registers per SM, at most 2048
# threads per SM, registers allocated per warp in units of 256):
#   regs/warp = ceil(regs * 32 / 256) * 256
#   thr/SM    = min(2048, floor(65536 / regs/warp) * 32)
# e.g. 64 registers -> 1024 threads, 116 -> 512, 255 -> 256. Shared memory and work-group size limits
# are not applied.
set -uo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.." || exit 1
root=$PWD

# ---- one job (internal): compile one family x specialization, run ptxas per arch -------------------
if [ "${1:-}" = --job ]; then # --job OUT ID FAMILY EXTRA (EXTRA "-" = none)
  out=$2 id=$3 fam=$4 extra=$5
  [ "$extra" = - ] && extra=""
  t0=$(date +%s%N)
  b=$out/$fam.$id
  # shellcheck disable=SC2086  # the options are word lists
  if ! { $CLANG14 -x cl -cl-std=CL1.2 $CLANG14_HEADER -target nvptx64-nvidia-nvcl -O3 -emit-llvm -c $GPU_PRELUDE $extra \
           "$out/$fam.cl" -o "$b.bc" &&
         $LLVM_LINK14 "$b.bc" "$LIBCLC" -o "$b.linked.bc" &&
         $LLC14 -march=nvptx64 -mcpu=sm_80 "$b.linked.bc" -o "$b.ptx"; } >"$b.log" 2>&1; then
    { echo "FAIL compile $fam [${extra:--}]"; grep -v 'Linking two modules of different target triples' "$b.log" | head -30; } > "$b.fail"
    printf '%d\t%s\t%s\n' $(( ($(date +%s%N) - t0) / 1000000 )) "$fam" "${extra:--}" > "$b.time"
    exit 0
  fi
  # the kernels (.entry); CPU-variant kernels are not compiled further: *_cpu, and X where the family
  # has X_g (the GPU-shaped context launches X_g: host/ops/circulant_pipeline.c)
  entries=$(sed -nE 's/^[[:space:]]*(\.visible[[:space:]]+)?\.entry[[:space:]]+([A-Za-z_0-9$]+).*/\2/p' "$b.ptx")
  gpu=""
  for e in $entries; do
    if [[ $e == *_cpu ]] || grep -qx "${e}_g" <<< "$entries"; then echo "$fam	$e" >> "$b.cpuonly"
    else gpu=${gpu:+$gpu,}$e; fi
  done
  if [ -n "$gpu" ]; then
    for arch in $GPU_CHECK_ARCHS; do # the archs in parallel: the slowest kernels take seconds each
      ( if ! "$PTXAS" -arch="$arch" -v -e "$gpu" "$b.ptx" -o /dev/null > "$b.$arch.txt" 2>&1; then
          { echo "FAIL ptxas $arch $fam [${extra:--}]"; head -30 "$b.$arch.txt"; } > "$b.$arch.fail"
          exit 0
        fi
        # entry lines: arch fam kernel regs spill-st spill-ld stack smem spec   (callees' spills added)
        awk -v arch="$arch" -v fam="$fam" -v spec="${extra:--}" '
          function flush() { if (k != "") printf "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", arch, fam, k, r, ss, sl, st, sm, spec; k = "" }
          /Compiling entry function/ { flush(); k = $0; sub(/.*function \047/, "", k); sub(/\047.*/, "", k)
                                       r = ss = sl = st = sm = 0; next }
          /Function properties for/ { f = $NF; next }
          /bytes stack frame/ && k != "" { if (f == k) st = $1 + 0; ss += $5; sl += $9; next }
          /Used [0-9]+ registers/ && k != "" {
            for (i = 1; i <= NF; i++) {
              if ($i ~ /^registers/) r = $(i - 1) + 0
              if ($i == "cumulative") { v = $(i - 2) + 0; if (v > st) st = v }
              if ($i ~ /^smem/) sm = $(i - 2) + 0
            } }
          END { flush() }' "$b.$arch.txt" > "$b.$arch.res" ) &
    done
    wait
  fi
  printf '%d\t%s\t%s\n' $(( ($(date +%s%N) - t0) / 1000000 )) "$fam" "${extra:--}" > "$b.time"
  exit 0
fi

# ---- specializations: prelude() and specs() from tools/portability-check.sh --------------------------
pc=$root/tools/portability-check.sh
eval "$(sed -n '/^prelude() {/,/^}/p; /^att_opts() {/,/^}/p; /^specs() {/,/^}/p' "$pc")"
for fn in prelude att_opts specs; do
  declare -F $fn >/dev/null || { echo "gpu-check: cannot read $fn() from $pc"; exit 1; }
done

allow=${GPU_CHECK_ALLOW:-$root/tools/gpu-check.allow}
# the allow-list as "kernel<TAB>spec<TAB>stack<TAB>spill<TAB>reason"; format errors to stderr, rc 1
read_allow() {
  [ -f "$allow" ] || return 0
  awk -F'|' -v file="$allow" '
    function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
    /^[ \t]*(#|$)/ { next }
    { if (NF != 4) { printf "gpu-check: %s:%d: want KERNEL | SPEC | stack<=N spill<=N | REASON\n", file, NR > "/dev/stderr"; bad = 1; next }
      k = trim($1); s = trim($2); f = trim($3); why = trim($4)
      if (k !~ /^[A-Za-z_][A-Za-z_0-9]*$/ || s == "" || why == "" ||
          f !~ /^stack<=[0-9]+[ \t]+spill<=[0-9]+$/) {
        printf "gpu-check: %s:%d: bad entry (kernel name, specialization, figures \"stack<=N spill<=N\", reason)\n", file, NR > "/dev/stderr"; bad = 1; next }
      split(f, a, /[ \t]+/); sub(/stack<=/, "", a[1]); sub(/spill<=/, "", a[2])
      printf "%s\t%s\t%d\t%d\t%s\n", k, s, a[1], a[2], why }
    END { exit bad }' "$allow"
}

if [ "${1:-}" = --check-allow ]; then
  entries=$(read_allow) || exit 1
  bad=0 n=0
  while IFS=$'\t' read -r k s _ _ _; do
    [ -n "$k" ] || continue
    n=$((n + 1))
    fam=$(grep -lE "__kernel.*[[:space:]]${k}[[:space:]]*\(" cl/*.cl | head -1 | xargs -r basename | sed 's/\.cl$//')
    if [ -z "$fam" ]; then echo "gpu-check: allow-list kernel $k is not a kernel in cl/*.cl"; bad=1; continue; fi
    all=$'\n'$(specs "$fam" gpu | sed 's/^$/-/')$'\n' # (not piped into grep -q: SIGPIPE + pipefail)
    if [ "$s" != "*" ] && [[ "$all" != *$'\n'"$s"$'\n'* ]]; then
      echo "gpu-check: allow-list entry $k: '$s' is not a GPU specialization of $fam (specs $fam gpu in $pc)"; bad=1
    fi
  done <<< "$entries"
  [ $bad = 0 ] && echo "gpu-check: allow-list $allow: $n entries, all well-formed and current"
  exit $bad
fi

family="" out=build/gpu-check jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
  case $1 in
    --family) family=${2:?--family needs a name}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (see --help)"; exit 1 ;;
  esac
done
if [ -n "$family" ] && { [ "$family" = common ] || [ ! -f "cl/$family.cl" ]; }; then
  echo "gpu-check: no kernel family $family (cl/$family.cl)"; exit 1
fi

# ---- the tools; anything missing: say what, and skip -----------------------------------------------
missing=()
find_tool() { # VAR name...
  local var=$1 c; shift
  if [ -n "${!var:-}" ]; then command -v "${!var}" >/dev/null && return 0; missing+=("$var=${!var} (not found)"); return 1; fi
  for c in "$@"; do
    if command -v "$c" >/dev/null; then printf -v "$var" %s "$(command -v "$c")"; return 0; fi
  done
  missing+=("$1 (Debian: ${PKG[$1]:-?})"); return 1
}
declare -A PKG=([clang-14]=clang-14 [llvm-link-14]=llvm-14 [llc-14]=llvm-14)
find_tool CLANG14 clang-14
find_tool LLVM_LINK14 llvm-link-14
find_tool LLC14 llc-14
LIBCLC=${LIBCLC:-/usr/lib/clc/nvptx64--nvidiacl.bc}
[ -f "$LIBCLC" ] || missing+=("libclc $LIBCLC (Debian: libclc-14; tools/install-deps.sh)")
if [ -z "${PTXAS:-}" ]; then
  for c in "$(command -v ptxas 2>/dev/null)" "${CUDA_HOME:+$CUDA_HOME/bin/ptxas}" /usr/local/cuda/bin/ptxas; do
    [ -n "$c" ] && [ -x "$c" ] && { PTXAS=$c; break; }
  done
fi
if [ -n "${PTXAS:-}" ]; then
  [ -x "$PTXAS" ] || missing+=("PTXAS=$PTXAS (not an executable)")
else
  missing+=("ptxas (NVIDIA CUDA toolkit): not on PATH, in \$CUDA_HOME/bin${CUDA_HOME:+ ($CUDA_HOME/bin)} or in /usr/local/cuda/bin")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-check: missing:"
  printf '  %s\n' "${missing[@]}"
  echo "gpu-check: skipped (nothing was checked)"
  exit 0
fi
allow_entries=$(read_allow) || exit 1

# ---- the jobs -----------------------------------------------------------------------------------------
t0=$(date +%s%N)
prev=$(cat "$out/times.tsv" 2>/dev/null) # the last run's job times: the slowest jobs start first
# OUT is this script's own folder (the marker file): anything else is refused, never removed
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/.gpu-check" ]; then
  echo "gpu-check: $out is not empty and not a gpu-check output folder: give --out a new or former one"; exit 1
fi
rm -rf "$out" && mkdir -p "$out" && : > "$out/.gpu-check" || exit 1
export CLANG14 LLVM_LINK14 LLC14 LIBCLC PTXAS
export GPU_CHECK_ARCHS=${GPU_CHECK_ARCHS:-sm_90 sm_80}
GPU_PRELUDE=$(prelude gpu 1); export GPU_PRELUDE
export CLANG14_HEADER="-cl-no-stdinc -Xclang -finclude-default-header"
joblist=$out/jobs
: > "$joblist.tsv"
for cl in cl/*.cl; do
  fam=$(basename "$cl" .cl)
  [ "$fam" = common ] && continue
  [ -n "$family" ] && [ "$fam" != "$family" ] && continue
  { cat cl/common.cl; echo; echo "#line 1 \"$fam.cl\""; cat "$cl"; } > "$out/$fam.cl"
  i=0
  while IFS= read -r extra; do
    # a spec that sets WBCL_SIMD replaces the prelude's (build options have no -U): none on the GPU today
    [[ "$extra" == *-DWBCL_SIMD=* ]] && { echo "gpu-check: $fam spec '$extra' sets WBCL_SIMD: not supported here"; exit 1; }
    [ -z "$extra" ] && extra=-
    # estimated cost: the last run's time, else the family's source size (any unknown job goes first)
    cost=$(awk -F'\t' -v f="$fam" -v x="$extra" '$2 == f && $3 == x {print $1; exit}' <<< "$prev")
    printf '%s\t%s\t%s\t%s\n' "${cost:-$((1000000 + $(wc -c < "$cl")))}" "$i" "$fam" "$extra" >> "$joblist.tsv"
    i=$((i + 1))
  done < <(specs "$fam" gpu)
done
sort -t$'\t' -k1,1 -n -r "$joblist.tsv" | while IFS=$'\t' read -r _ i fam extra; do
  printf '%s\0' --job "$out" "$i" "$fam" "$extra"; done > "$joblist"
njobs=$(wc -l < "$joblist.tsv")
xargs -0 -n5 -P"$jobs" bash "$self" < "$joblist"
t1=$(date +%s%N)
cat "$out"/*.time > "$out/times.tsv" 2>/dev/null

# ---- report -------------------------------------------------------------------------------------------
cat "$out"/*.fail 2>/dev/null
nfail=$(cat "$out"/*.fail 2>/dev/null | grep -c '^FAIL')
# every job leaves a .time file at its end (a compile failure a .fail file): one that left neither died
ndone=$(cat "$out"/*.time 2>/dev/null | wc -l)
if [ "$ndone" -lt "$njobs" ]; then
  echo "FAIL $((njobs - ndone)) of $njobs programs left no result (a job died: see $out/*.log)"; nfail=$((nfail + njobs - ndone))
fi
res=$out/results.tsv
cat "$out"/*.res 2>/dev/null | sort -t$'\t' -k2,2 -k3,3 -k9,9 -k1,1r > "$res"
cpuonly=$(cat "$out"/*.cpuonly 2>/dev/null | sort -u)
report=$out/report.txt
# thr/SM = min(2048, floor(65536 / (ceil(regs*32/256)*256)) * 32)
occ='function occ(r,  w) { if (r < 1) r = 1; w = int((r * 32 + 255) / 256) * 256; w = int(65536 / w) * 32; return w > 2048 ? 2048 : w }'
awk -F'\t' "$occ"'
  BEGIN { printf "%-6s %-10s %-32s %5s %8s %8s %6s %6s %6s  %s\n", "arch", "family", "kernel", "regs", "spill-st", "spill-ld", "stack", "smem", "thr/SM", "[specialization]" }
  { printf "%-6s %-10s %-32s %5d %8d %8d %6d %6d %6d  [%s]\n", $1, $2, $3, $4, $5, $6, $7, $8, occ($4), $9 }' \
  "$res" > "$report"
cat "$report"
if [ -n "$cpuonly" ]; then
  echo "gpu-check: CPU-variant kernels, not compiled by ptxas (a GPU-shaped context launches the GPU one):" \
       "$(cut -f2 <<< "$cpuonly" | tr '\n' ' ')"
fi

# problems: GPU-shaped kernels with spills or stack, per kernel x spec (worst over archs)
probs=$out/problems.tsv # kernel spec stack spill figures-text family
awk -F'\t' '$5 + $6 > 0 || $7 > 0 {
    key = $3 "\t" $9; if (!(key in st)) { order[++n] = key; fam[key] = $2 }
    if ($7 > st[key]) st[key] = $7; if ($5 + $6 > sp[key]) sp[key] = $5 + $6
    txt[key] = txt[key] sprintf("%s%s regs %d stack %d spill-st %d spill-ld %d", txt[key] == "" ? "" : "; ", $1, $4, $7, $5, $6) }
  END { for (i = 1; i <= n; i++) { k = order[i]; printf "%s\t%d\t%d\t%s\t%s\n", k, st[k], sp[k], txt[k], fam[k] } }' "$res" > "$probs"

new=0 allowed=0 worse=0
echo
echo "gpu-check: GPU-shaped kernels with spills or a stack frame:"
[ -s "$probs" ] || echo "  none"
used=$out/allow-used
: > "$used"
while IFS=$'\t' read -r k s st sp txt fam; do
  verdict="NEW"
  while IFS=$'\t' read -r ak as ast asp _; do
    [ -n "$ak" ] && [ "$ak" = "$k" ] || continue
    [ "$as" = "*" ] || [ "$as" = "$s" ] || continue
    echo "$ak|$as" >> "$used"
    if [ "$st" -le "$ast" ] && [ "$sp" -le "$asp" ]; then verdict="allowed" # (the reason: in the allow-list)
    else verdict="WORSE than allowed (stack<=$ast spill<=$asp)"; fi
    break
  done <<< "$allow_entries"
  case $verdict in allowed) allowed=$((allowed + 1)) ;; NEW) new=$((new + 1)) ;; *) worse=$((worse + 1)) ;; esac
  echo "  $verdict: $fam $k [$s]: $txt"
  [ "$verdict" = allowed ] || echo "    measured, for $(basename "$allow"): $k | $s | stack<=$st spill<=$sp | <why it is accepted for now>"
done < "$probs"
stale=0
while IFS=$'\t' read -r ak as _ _ _; do
  [ -n "$ak" ] || continue
  # only entries whose kernel was compiled in this run can be judged
  awk -F'\t' -v k="$ak" '$3 == k {f = 1; exit} END {exit !f}' "$res" || continue
  if ! grep -qxF "$ak|$as" "$used"; then
    echo "  no longer needed (remove from $(basename "$allow")): $ak [$as]"; stale=$((stale + 1))
  fi
done <<< "$allow_entries"

nk=$(cut -f2,3,9 "$res" | sort -u | wc -l)
ncpu=$(grep -c . <<< "$cpuonly")
echo
echo "gpu-check: $nk GPU-shaped kernel x specialization pairs (${family:-all families}, $njobs programs) on ${GPU_CHECK_ARCHS// /, }" \
     "($ncpu CPU-variant kernels not checked); with spills or stack: $((new + allowed + worse))" \
     "(allowed $allowed, NEW $new, worse than allowed $worse); compiles failed: $nfail; stale allow entries: $stale"
echo "gpu-check: time $(( (t1 - t0) / 1000000 )) ms wall for $njobs programs on $jobs jobs; slowest:" \
     "$(cat "$out"/*.time 2>/dev/null | sort -n -r | head -3 | awk -F'\t' '{printf "%s%s [%s] %.1f s", (NR > 1 ? "; " : ""), $2, $3, $1 / 1000}')"
echo "gpu-check: table in $report; tools: $CLANG14, $LLVM_LINK14, $LLC14 -mcpu=sm_80, $LIBCLC, $PTXAS"
if [ $new -gt 0 ] || [ $worse -gt 0 ] || [ $nfail -gt 0 ]; then
  echo "gpu-check: FAILED"; exit 1
fi
echo "gpu-check: passed"
