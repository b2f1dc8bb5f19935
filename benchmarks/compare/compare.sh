#!/usr/bin/env bash
# Runs Tidal, Open MPI and Gloo allreduce (float32 sum) side by side on this
# host and prints one markdown table per rank count, ready for
# docs/benchmarks.md, followed by the exact commands that produced it.
#
#   benchmarks/compare/compare.sh [-B build] [-t tcp|shm] [-r "2 4"] [-b 8] [-e 64M] [-f 4]
#                                 [-n 20] [-w 5] [-R 1] [-p in|out] [-o out.md] [-L logdir]
#                                 [-P "tidal mpi gloo"]
#
#   -t  the path between ranks of this host (default: tcp)
#         tcp: all three over loopback TCP (TIDAL_NET=tcp, Open MPI's ob1 with btl tcp,self)
#         shm: each library's fastest same-host path: Tidal's shm transport, Open MPI's
#              default shared-memory BTL (vader, with its single-copy mechanism), and
#              Gloo's TCP (the only transport Gloo has here)
#   -B  build directory holding tools/tidalrun and benchmarks/*  (default: build)
#   -r  rank counts to run                                     (default: "2 4")
#   -b -e -f -n -w   sizes, step factor, iterations, warm-up as in nccl-tests
#                                                              (default: 8 64M 4 20 5)
#   -R  run each program this many times and keep each size's best time: on a
#       shared or small host one run's noise can be larger than the differences
#   -p  which column of the tables to compare: in-place or out-of-place
#       (default: in; Gloo's ring is in-place, its out-of-place adds a memcpy)
#   -o  also write the markdown to this file
#   -L  keep every program's raw output here (default: a fresh temp directory)
#   -P  which libraries to run                                 (default: "tidal mpi gloo")
#
# No library binds its ranks (tidalrun --bind none, mpirun --bind-to none, the
# Gloo loop starts plain processes): the kernel places all three alike.
#
# Environment: TIDAL_NET overrides the transport -t picks for Tidal; RUN_TIMEOUT
# seconds per run (default 900).
#
# A peer whose program was not built (no MPI / no Gloo) or that fails shows
# "n/a" and the script goes on; the exit status is non-zero if any run failed.
set -uo pipefail

build=build
ranks="2 4"
minb=8
maxb=64M
factor=4
iters=20
warmup=5
place=in
outfile=
logdir=
reps=1
path=tcp
peers="tidal mpi gloo"
while getopts "B:t:r:b:e:f:n:w:R:p:o:L:P:h" opt; do
  case $opt in
    B) build=$OPTARG ;;
    t) path=$OPTARG ;;
    r) ranks=$OPTARG ;;
    b) minb=$OPTARG ;;
    e) maxb=$OPTARG ;;
    f) factor=$OPTARG ;;
    n) iters=$OPTARG ;;
    w) warmup=$OPTARG ;;
    R) reps=$OPTARG ;;
    p) place=$OPTARG ;;
    o) outfile=$OPTARG ;;
    L) logdir=$OPTARG ;;
    P) peers=$OPTARG ;;
    *) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
case $place in in | out) ;; *) echo "-p must be 'in' or 'out'" >&2; exit 2 ;; esac
case $path in
  tcp)
    export TIDAL_NET=${TIDAL_NET:-tcp}
    mpi_btl=(--mca pml ob1 --mca btl tcp,self)
    path_text="loopback TCP"
    ;;
  shm)
    export TIDAL_NET=${TIDAL_NET:-}
    [[ -n $TIDAL_NET ]] || unset TIDAL_NET
    mpi_btl=(--mca pml ob1 --mca btl vader,self)
    path_text="shared memory (Gloo: loopback TCP)"
    ;;
  *) echo "-t must be 'tcp' or 'shm'" >&2; exit 2 ;;
esac
timeout_s=${RUN_TIMEOUT:-900}
bindir=$build/benchmarks
tidalrun=$build/tools/tidalrun
[[ -n $logdir ]] || logdir=$(mktemp -d -t tidal-compare.XXXXXX)
mkdir -p "$logdir"
common=(-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1)
status=0
commands=()

# Runs one benchmark; $1 = log name, rest = command. Rank 0's table -> $logdir/$1.log.
run() {
  local name=$1
  shift
  echo "running: $*" >&2
  if ! timeout "$timeout_s" "$@" >"$logdir/$name.log" 2>"$logdir/$name.err"; then
    echo "FAILED ($name), see $logdir/$name.err:" >&2
    tail -n 5 "$logdir/$name.err" >&2
    status=1
    : >"$logdir/$name.log"
  fi
}

# Each run_* takes the rank count and the repetition number; the command is
# recorded once, and rank 0's table goes to $logdir/<peer>_np<N>.r<rep>.log.
run_tidal() {
  local np=$1 rep=$2
  local cmd=("$tidalrun" -np "$np" --bind none "$bindir/all_reduce_perf" "${common[@]}" -d float -o sum)
  ((rep == 1)) && commands+=("${TIDAL_NET:+TIDAL_NET=$TIDAL_NET }${cmd[*]}")
  if [[ -x $tidalrun && -x $bindir/all_reduce_perf ]]; then
    run "tidal_np$np.r$rep" "${cmd[@]}"
  else
    echo "skipping Tidal: $tidalrun or all_reduce_perf not built" >&2
  fi
}

run_mpi() {
  local np=$1 rep=$2
  # -t tcp: ob1 + tcp, the same loopback TCP path as the other two; -t shm:
  # ob1 + vader, Open MPI's default on one host. No binding (see the top).
  local cmd=(mpirun --allow-run-as-root --oversubscribe -np "$np" --bind-to none
    "${mpi_btl[@]}" "$bindir/mpi_allreduce_perf" "${common[@]}")
  ((rep == 1)) && commands+=("${cmd[*]}")
  if [[ -x $bindir/mpi_allreduce_perf ]] && command -v mpirun >/dev/null; then
    run "mpi_np$np.r$rep" "${cmd[@]}"
  else
    echo "skipping MPI: mpi_allreduce_perf not built or no mpirun" >&2
  fi
}

run_gloo() {
  local np=$1 rep=$2
  local bin=$bindir/gloo_allreduce_perf name=gloo_np$np.r$rep
  ((rep == 1)) && commands+=("store=\$(mktemp -d); for r in \$(seq 0 $((np - 1))); do RANK=\$r WORLD_SIZE=$np $bin --store-dir \$store ${common[*]} & done; wait")
  if [[ ! -x $bin ]]; then
    echo "skipping Gloo: gloo_allreduce_perf not built" >&2
    return
  fi
  echo "running: Gloo ring, $np processes" >&2
  local store pids=() r failed=0
  store=$(mktemp -d -t gloo-store.XXXXXX)
  for ((r = 0; r < np; r++)); do
    local out=/dev/null
    ((r == 0)) && out=$logdir/$name.log
    RANK=$r WORLD_SIZE=$np timeout "$timeout_s" "$bin" --store-dir "$store" "${common[@]}" \
      >"$out" 2>"$logdir/$name.rank$r.err" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || failed=1; done
  rm -rf "$store"
  if ((failed)); then
    echo "FAILED ($name), see $logdir/$name.rank*.err" >&2
    status=1
    : >"$logdir/$name.log"
  fi
}

# Prints the markdown table for one rank count from all the logs of that
# count, keeping each size's best (lowest) time per peer over repetitions.
table() {
  local np=$1
  local logs=()
  shopt -s nullglob
  logs=("$logdir"/tidal_np"$np".r*.log "$logdir"/mpi_np"$np".r*.log "$logdir"/gloo_np"$np".r*.log)
  shopt -u nullglob
  awk -v place="$place" '
    function human(b) {
      if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) " MiB"
      if (b >= 1024 && b % 1024 == 0) return (b / 1024) " KiB"
      return b " B"
    }
    function cell(p, s) { return ((p, s) in time) ? time[p, s] " | " busbw[p, s] : "n/a | n/a" }
    function ratio(p, s) {
      if (!((p, s) in time) || !(("tidal", s) in time) || time["tidal", s] + 0 == 0) return "n/a"
      return sprintf("%.2fx", time[p, s] / time["tidal", s])
    }
    FNR == 1 { peer = FILENAME; sub(/.*\//, "", peer); sub(/_np.*/, "", peer) }
    /^#/ || NF < 13 { next }
    {
      t = (place == "in") ? $10 : $6
      bw = (place == "in") ? $12 : $8
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      if (!((peer, $1) in time) || t + 0 < time[peer, $1] + 0) {
        time[peer, $1] = t; busbw[peer, $1] = bw
      }
    }
    END {
      printf "| Size | Tidal time (us) | Tidal busbw (GB/s) | MPI time (us) | MPI busbw (GB/s) |"
      printf " Gloo time (us) | Gloo busbw (GB/s) | MPI time / Tidal time | Gloo time / Tidal time |\n"
      printf "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
      for (i = 1; i <= n; i++) {
        s = order[i]
        printf "| %s | %s | %s | %s | %s | %s |\n", human(s), cell("tidal", s), cell("mpi", s),
          cell("gloo", s), ratio("mpi", s), ratio("gloo", s)
      }
    }' "${logs[@]}" /dev/null
}

for np in $ranks; do
  for ((rep = 1; rep <= reps; rep++)); do
    for peer in $peers; do "run_$peer" "$np" "$rep"; done
  done
done

report() {
  local cpu mpiv gloov
  cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
  mpiv=$(mpirun --version 2>/dev/null | head -n 1)
  gloov=$(dpkg-query -W -f '${Version}' libgloo-dev 2>/dev/null)
  echo "## AllReduce, float32 sum, one host over $path_text"
  echo
  echo "$(date -u +%Y-%m-%d), $(uname -sr), ${cpu:-unknown CPU}, $(nproc) cores;"
  echo "${mpiv:-no mpirun}; Gloo ${gloov:-unknown}; TIDAL_NET=${TIDAL_NET:-unset (per pair: shm on one host)}."
  echo "Times are per call, averaged over $iters iterations and over ranks (-a 1), best of $reps run(s);"
  echo "busbw = size / time x 2(n-1)/n; ${place}-place results; a ratio above 1 means Tidal is faster."
  for np in $ranks; do
    echo
    echo "### $np ranks"
    echo
    table "$np"
  done
  echo
  echo "Commands (compare.sh -B $build -t $path -r \"$ranks\" -b $minb -e $maxb -f $factor -n $iters -w $warmup -R $reps -p $place):"
  echo
  local c
  for c in "${commands[@]}"; do echo "    $c"; done
  echo
  echo "Raw output: $logdir"
}

if [[ -n $outfile ]]; then
  report | tee "$outfile"
else
  report
fi
exit $status
