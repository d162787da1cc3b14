#!/usr/bin/env bash
# MPI benchmark (issue 8): strong scaling of the vector ReduNet construction (wbcl-run-mpi redunet.fit)
# over 1 and 2 ranks on this machine, against the single-process wbcl-run (impl gemm), and the
# communication volume per layer. Needs a -DWBCL_MPI=ON build. Rounds are interleaved (plain, -np 1,
# -np 2 all, -np 2 root); every configuration runs once untimed first (program caches warm).
# Time is the construction as wbcl-run(-mpi) reports it (fit + objective, no process start-up).
#
# Usage: perf/run_mpi.sh [BUILD_DIR] [ROUNDS]     (defaults: build, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
tools="$PWD/$build/tools"
[ -x "$tools/wbcl-run-mpi" ] || { echo "run_mpi.sh: $tools/wbcl-run-mpi not built (-DWBCL_MPI=ON)" >&2; exit 1; }
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/cache/pocl}
export WBCL_CACHE_DIR=${WBCL_CACHE_DIR:-$PWD/$build/cache/wbcl}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi() { local np=$1; shift; mpirun --allow-run-as-root --oversubscribe -np "$np" "$tools/wbcl-run-mpi" "$@"; }

# cases: name m d K L
cases=${CASES:-"wide:1000:784:10:3 wide-tall:8000:784:10:2 tall:20000:32:10:20"}
# a rank waiting in a collective yields its core instead of spinning (the ranks share 2 cores)
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
echo "host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load $(cut -d' ' -f1-3 /proc/loadavg); $(mpirun --version | head -1)"
echo
echo "| case | m, d, K, L | wbcl-run (1 process) | -np 1 | -np 2, every rank builds | -np 2, rank 0 builds + bcast | speed-up 2 ranks (best) | rank 0 in collectives (-np 2 all) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for c in $cases; do
  IFS=: read -r name m d K L <<<"$c"
  dir="$tmp/$name"
  python3 perf/mpi_data.py "$dir" "$m" "$d" "$K" >/dev/null
  args=(redunet.fit --input "$dir/X.npy" --labels "$dir/y.npy" --param layers="$L")
  run_plain() { "$tools/wbcl-run" "${args[@]}" --param impl=gemm | sed -n 's/.*(\([0-9.]*\) s)$/\1/p'; }
  run_np() { WBCL_MPI_BUILD=$2 mpi "$1" "${args[@]}" | sed -n 's/.*): \([0-9.]*\) s, of which \([0-9.]*\) s.*/\1 \2/p'; }
  run_plain >/dev/null; run_np 1 all >/dev/null; run_np 2 all >/dev/null; run_np 2 root >/dev/null
  p=(); a=(); b=(); r=(); w=()
  for ((i = 0; i < rounds; i++)); do
    p+=("$(run_plain)")
    a+=("$(run_np 1 all | cut -d' ' -f1)")
    read -r t coll <<<"$(run_np 2 all)"; b+=("$t"); w+=("$coll")
    r+=("$(run_np 2 root | cut -d' ' -f1)")
  done
  med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
  mp=$(med "${p[@]}"); ma=$(med "${a[@]}"); mb=$(med "${b[@]}"); mr=$(med "${r[@]}"); mw=$(med "${w[@]}")
  best=$(awk -v x="$mb" -v y="$mr" 'BEGIN {print (x < y ? x : y)}')
  echo "| $name | $m, $d, $K, $L | $mp s | $ma s | $mb s | $mr s | $(awk -v a="$ma" -v b="$best" 'BEGIN {printf "%.2fx", a / b}') | $mw s |"
done

echo
echo "Communication per layer: bytes allreduced per rank (-np 2, L = 4 layers) / L. One sum is"
echo "8·(K·d² + K + 1) bytes (doubles: K Gram matrices, K counts, the yhat-vs-label count); a layer makes"
echo "two (objective's ŷ groups, next construction's labels) or one when ŷ equals the labels everywhere."
echo
echo "| m | d | K | bytes allreduced per layer | one sum 8·(K·d²+K+1) | sums per layer | bytes of the samples m·d·4 | allreduced / samples |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
volume=${VOLUME:-"2000:32:10 20000:32:10 200000:32:10 1000:784:10 4000:784:10"}
for c in $volume; do
  IFS=: read -r m d K <<<"$c"
  dir="$tmp/v_${m}_${d}"
  python3 perf/mpi_data.py "$dir" "$m" "$d" "$K" >/dev/null
  bytes=$(mpi 2 redunet.fit --input "$dir/X.npy" --labels "$dir/y.npy" --param layers=4 | sed -n 's/.* \([0-9]*\) bytes allreduced.*/\1/p')
  awk -v m="$m" -v d="$d" -v K="$K" -v b="$bytes" 'BEGIN {
    per = b / 4; one = 8 * (K * d * d + K + 1); s = m * d * 4;
    printf "| %d | %d | %d | %.0f | %.0f | %.2f | %.0f | %.3g |\n", m, d, K, per, one, per / one, s, per / s }'
done
