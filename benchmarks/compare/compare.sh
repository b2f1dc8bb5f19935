#!/usr/bin/env bash
# Runs Tidal, Open MPI and Gloo allreduce (float32 sum) or alltoall (float32)
# side by side on this host and prints one markdown table per rank count, or
# Tidal's and Open MPI's two-rank Send/Recv ping-pong and one table, ready for
# docs/benchmarks.md, followed by the exact commands that produced it.
#
#   benchmarks/compare/compare.sh [-C allreduce|alltoall|pingpong] [-B build] [-t tcp|shm|ofi]
#                                 [-r "2 4"] [-b 8] [-e 64M] [-f 4] [-n 20] [-w 5] [-R 1]
#                                 [-p in|out] [-o out.md] [-L logdir] [-P "tidal mpi gloo"]
#
#   -C  what to compare                                        (default: allreduce)
#         allreduce: all_reduce_perf, MPI_Allreduce, gloo::AllreduceRing
#         alltoall:  alltoall_perf, MPI_Alltoall, gloo::alltoall; size = one rank's
#                    whole buffer, n blocks of it (nccl-tests' convention)
#         pingpong:  tidal_pingpong and mpi_pingpong (benchmarks/compare/pingpong.cc),
#                    2 ranks (-r is ignored): latency = half a round trip, bandwidth =
#                    a window of 64 sends then an ack; defaults -f 2 -n 10000 -w 1000
#   -t  the path between ranks of this host (default: tcp)
#         tcp: all three over loopback TCP (TIDAL_NET=tcp, Open MPI's ob1 with btl tcp,self)
#         shm: each library's fastest same-host path: Tidal's shm transport, Open MPI's
#              default shared-memory BTL (vader, with its single-copy mechanism), and
#              Gloo's TCP (the only transport Gloo has here)
#         ofi: Tidal and Open MPI over the same libfabric provider (TIDAL_OFI_PROVIDER,
#              default tcp;ofi_rxm): TIDAL_NET=ofi, and Open MPI's cm PML with its ofi
#              MTL (--mca mtl_ofi_provider_include); the third column is Tidal's own
#              tcp transport instead of Gloo (peer "tidaltcp")
#   -B  build directory holding tools/tidalrun and benchmarks/*  (default: build)
#   -r  rank counts to run                                     (default: "2 4")
#   -b -e -f -n -w   sizes, step factor, iterations, warm-up as in nccl-tests
#                                                              (default: 8 64M 4 20 5)
#   -R  run each program this many times and keep each size's best time: on a
#       shared or small host one run's noise can be larger than the differences
#   -p  which column of the tables to compare: in-place or out-of-place
#       (default: in for allreduce, Gloo's ring is in-place and its out-of-place
#       adds a memcpy; out for alltoall, Gloo's alltoall is out-of-place and its
#       in-place adds a memcpy)
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
factor=
iters=
warmup=
place=
outfile=
logdir=
reps=1
path=tcp
coll=allreduce
peers="tidal mpi gloo"
while getopts "C:B:t:r:b:e:f:n:w:R:p:o:L:P:h" opt; do
  case $opt in
    C) coll=$OPTARG ;;
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
    *) sed -n '2,50p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
# Per comparison: the Tidal program, the peers' extra flags, the defaults.
case $coll in
  allreduce) tidal_prog=all_reduce_perf tidal_extra=(-o sum) peer_extra=() ;;
  alltoall) tidal_prog=alltoall_perf tidal_extra=() peer_extra=(--collective alltoall) ;;
  pingpong) tidal_prog=tidal_pingpong tidal_extra=() peer_extra=() ranks=2 ;;
  *) echo "-C must be 'allreduce', 'alltoall' or 'pingpong'" >&2; exit 2 ;;
esac
if [[ $coll == pingpong ]]; then
  factor=${factor:-2} iters=${iters:-10000} warmup=${warmup:-1000}
else
  factor=${factor:-4} iters=${iters:-20} warmup=${warmup:-5}
fi
[[ $coll == alltoall ]] && place=${place:-out}
place=${place:-in}
place_text=in-place
[[ $place == out ]] && place_text="out-of-place"
case $place in in | out) ;; *) echo "-p must be 'in' or 'out'" >&2; exit 2 ;; esac
third=gloo third_text=Gloo
case $path in
  tcp)
    export TIDAL_NET=${TIDAL_NET:-tcp}
    mpi_btl=(--mca pml ob1 --mca btl "tcp,self")
    path_text="loopback TCP"
    ;;
  shm)
    export TIDAL_NET=${TIDAL_NET:-}
    [[ -n $TIDAL_NET ]] || unset TIDAL_NET
    mpi_btl=(--mca pml ob1 --mca btl "vader,self")
    path_text="shared memory (Gloo: loopback TCP)"
    ;;
  ofi)
    export TIDAL_NET=ofi TIDAL_OFI_PROVIDER=${TIDAL_OFI_PROVIDER:-tcp;ofi_rxm}
    mpi_btl=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$TIDAL_OFI_PROVIDER")
    path_text="libfabric $TIDAL_OFI_PROVIDER (Tidal tcp: loopback TCP)"
    [[ $peers == "tidal mpi gloo" ]] && peers="tidal mpi tidaltcp"
    third=tidaltcp third_text="Tidal tcp"
    ;;
  *) echo "-t must be 'tcp', 'shm' or 'ofi'" >&2; exit 2 ;;
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
  local np=$1 rep=$2 name=${3:-tidal}
  local cmd=("$tidalrun" -np "$np" --bind none "$bindir/$tidal_prog" "${common[@]}")
  [[ $coll == pingpong ]] || cmd+=(-d float "${tidal_extra[@]}")
  local env_text="${TIDAL_NET:+TIDAL_NET=$TIDAL_NET }"
  [[ ${TIDAL_NET:-} == ofi ]] && env_text+="TIDAL_OFI_PROVIDER='${TIDAL_OFI_PROVIDER:-}' "
  ((rep == 1)) && commands+=("$env_text${cmd[*]}")
  if [[ -x $tidalrun && -x $bindir/$tidal_prog ]]; then
    run "${name}_np$np.r$rep" "${cmd[@]}"
  else
    echo "skipping Tidal: $tidalrun or $tidal_prog not built" >&2
  fi
}

# Tidal over its own tcp transport, beside -t ofi.
run_tidaltcp() {
  TIDAL_NET=tcp run_tidal "$1" "$2" tidaltcp
}

run_mpi() {
  local np=$1 rep=$2
  # -t tcp: ob1 + tcp, the same loopback TCP path as the other two; -t shm:
  # ob1 + vader, Open MPI's default on one host. No binding (see the top).
  local prog=mpi_allreduce_perf
  [[ $coll == pingpong ]] && prog=mpi_pingpong
  local cmd=(mpirun --allow-run-as-root --oversubscribe -np "$np" --bind-to none
    "${mpi_btl[@]}" "$bindir/$prog" "${common[@]}" "${peer_extra[@]}")
  # %q: the ofi provider's ';' must survive a copy into a shell.
  ((rep == 1)) && commands+=("$(printf '%q ' "${cmd[@]}")")
  if [[ -x $bindir/$prog ]] && command -v mpirun >/dev/null; then
    run "mpi_np$np.r$rep" "${cmd[@]}"
  else
    echo "skipping MPI: $prog not built or no mpirun" >&2
  fi
}

run_gloo() {
  local np=$1 rep=$2
  local bin=$bindir/gloo_allreduce_perf name=gloo_np$np.r$rep
  [[ $coll == pingpong ]] && return
  ((rep == 1)) && commands+=("store=\$(mktemp -d); for r in \$(seq 0 $((np - 1))); do RANK=\$r WORLD_SIZE=$np $bin --store-dir \$store ${common[*]}${peer_extra[*]:+ ${peer_extra[*]}} & done; wait")
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
      "${peer_extra[@]}" >"$out" 2>"$logdir/$name.rank$r.err" &
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

# awk code both tables share: `peer`, the library whose log is being read
# (its file name up to "_np"); the sizes in the order first seen; and
# markdown(header), which prints the table, one row per size, the cells after
# the size coming from the program's own row(size).
# shellcheck disable=SC2016 # awk code, not shell expansions
awk_common='
    function human(b) {
      if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) " MiB"
      if (b >= 1024 && b % 1024 == 0) return (b / 1024) " KiB"
      return b " B"
    }
    function markdown(header,   i, k, rule, cells) {
      k = split(header, cells, "|")
      rule = "|"
      for (i = 1; i <= k; i++) rule = rule "---:|"
      print "| " header " |"
      print rule
      for (i = 1; i <= n; i++) print "| " human(order[i]) " | " row(order[i]) " |"
    }
    FNR == 1 { peer = FILENAME; sub(/.*\//, "", peer); sub(/_np.*/, "", peer) }
    /^#/ || NF < 6 { next }
    !($1 in seen) { seen[$1] = 1; order[++n] = $1 }
'

# Prints the ping-pong table from all the logs, keeping each size's best
# (lowest) latency and best (highest) bandwidth per library over repetitions.
pingpong_table() {
  local logs=()
  shopt -s nullglob
  logs=("$logdir"/tidal_np2.r*.log "$logdir"/mpi_np2.r*.log)
  shopt -u nullglob
  awk "$awk_common"'
    function value(a, p, s) { return ((p, s) in a) ? a[p, s] : "n/a" }
    function ratio(a, p, q, s) {
      if (!((p, s) in a) || !((q, s) in a) || a[q, s] + 0 == 0) return "n/a"
      return sprintf("%.2fx", a[p, s] / a[q, s])
    }
    function row(s) {
      return value(lat, "tidal", s) " | " value(lat, "mpi", s) " | " ratio(lat, "mpi", "tidal", s) \
        " | " value(bw, "tidal", s) " | " value(bw, "mpi", s) " | " ratio(bw, "tidal", "mpi", s)
    }
    NF != 6 { next }
    {
      if (!((peer, $1) in lat) || $3 + 0 < lat[peer, $1] + 0) lat[peer, $1] = $3
      if (!((peer, $1) in bw) || $5 + 0 > bw[peer, $1] + 0) bw[peer, $1] = $5
    }
    END {
      markdown("Size | Tidal latency (us) | MPI latency (us) | MPI latency / Tidal latency" \
        " | Tidal bw (MB/s) | MPI bw (MB/s) | Tidal bw / MPI bw")
    }' "${logs[@]}" /dev/null
}

# Prints the markdown table for one rank count from all the logs of that
# count, keeping each size's best (lowest) time per peer over repetitions.
table() {
  local np=$1
  local logs=()
  shopt -s nullglob
  logs=("$logdir"/tidal_np"$np".r*.log "$logdir"/mpi_np"$np".r*.log "$logdir"/"$third"_np"$np".r*.log)
  shopt -u nullglob
  awk -v place="$place" -v third="$third" -v third_text="$third_text" "$awk_common"'
    function cell(p, s) { return ((p, s) in time) ? time[p, s] " | " busbw[p, s] : "n/a | n/a" }
    function ratio(p, s) {
      if (!((p, s) in time) || !(("tidal", s) in time) || time["tidal", s] + 0 == 0) return "n/a"
      return sprintf("%.2fx", time[p, s] / time["tidal", s])
    }
    function row(s) {
      return cell("tidal", s) " | " cell("mpi", s) " | " cell(third, s) " | " ratio("mpi", s) \
        " | " ratio(third, s)
    }
    NF < 13 { next }
    {
      t = (place == "in") ? $10 : $6
      bw = (place == "in") ? $12 : $8
      if (!((peer, $1) in time) || t + 0 < time[peer, $1] + 0) {
        time[peer, $1] = t; busbw[peer, $1] = bw
      }
    }
    END {
      markdown("Size | Tidal time (us) | Tidal busbw (GB/s) | MPI time (us) | MPI busbw (GB/s)" \
        " | " third_text " time (us) | " third_text " busbw (GB/s) | MPI time / Tidal time | " \
        third_text " time / Tidal time")
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
  local title="AllReduce, float32 sum" factor_text="2(n-1)/n"
  [[ $coll == alltoall ]] && title="AllToAll, float32" factor_text="(n-1)/n"
  [[ $coll == pingpong ]] && title="Send/Recv ping-pong, 2 ranks" path_text=${path_text% (Gloo*}
  echo "## $title, one host over $path_text"
  echo
  echo "$(date -u +%Y-%m-%d), $(uname -sr), ${cpu:-unknown CPU}, $(nproc) cores;"
  if [[ $coll == pingpong ]]; then
    echo "${mpiv:-no mpirun}; TIDAL_NET=${TIDAL_NET:-unset (per pair: shm on one host)}."
    echo "Latency = half a round trip, up to $iters iterations after warm-up; bandwidth = windows of"
    echo "64 back-to-back sends and a 4-byte ack, MB/s = 10^6 B/s; large sizes run fewer iterations"
    echo "(about 1 GiB per measurement, at least 2); best of $reps run(s); a ratio above 1 means Tidal is faster."
    echo
    pingpong_table
  else
    if [[ $third == gloo ]]; then
      echo "${mpiv:-no mpirun}; Gloo ${gloov:-unknown}; TIDAL_NET=${TIDAL_NET:-unset (per pair: shm on one host)}."
    else
      echo "${mpiv:-no mpirun} (cm PML, ofi MTL); libfabric $(dpkg-query -W -f '${Version}' libfabric1 2>/dev/null);"
      echo "TIDAL_NET=ofi TIDAL_OFI_PROVIDER='$TIDAL_OFI_PROVIDER'; Tidal tcp: TIDAL_NET=tcp."
    fi
    echo "Times are per call, averaged over $iters iterations and over ranks (-a 1), best of $reps run(s);"
    echo "busbw = size / time x $factor_text; ${place_text} results; a ratio above 1 means Tidal is faster."
    for np in $ranks; do
      echo
      echo "### $np ranks"
      echo
      table "$np"
    done
  fi
  echo
  local cflag=
  [[ $coll == allreduce ]] || cflag="-C $coll "
  echo "Commands (compare.sh ${cflag}-B $build -t $path -r \"$ranks\" -b $minb -e $maxb -f $factor -n $iters -w $warmup -R $reps -p $place):"
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
