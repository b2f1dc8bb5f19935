#!/usr/bin/env bash
# AllReduce latency beside CPU-bound work: starts K busy-loop processes, then
# runs Tidal and Open MPI side by side (compare.sh -P "tidal mpi", ranks left
# unbound by both launchers) R times back to back, and prints, per rank count
# and size, the Tidal/MPI time ratio of every run and the worst one. A ratio
# above the target (-x, default 2) is marked with '!'; the exit status is 1 if
# any is.
#
#   benchmarks/compare/contention.sh [-k "1 2"] [-r "2 4"] [-R 10] [-x 2] [-L logdir] [-q]
#                                    [-- COMPARE_OPTIONS...]
#
#   -k  background loads to run, one after the other: K busy processes each (default: "1 2")
#   -r  rank counts                                        (default: "2 4")
#   -R  back-to-back runs per load                         (default: 10)
#   -x  the target: Tidal time / MPI time at most this     (default: 2)
#   -L  raw output (default: a fresh temp directory); one subdirectory per load
#   -q  before each load, wait (up to 20 min) until no compiler runs and the
#       1-minute load average is below 1 (after this script's own load: until
#       nothing else is runnable)
#   COMPARE_OPTIONS go to compare.sh after these defaults, so they override
#   them: -t shm -b 8 -e 64K -f 2 -n 200 -w 20 (-B build selects the build).
#
# The busy loops are bounded (timeout) and killed when the script exits.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
loads="1 2"
ranks="2 4"
reps=10
target=2
logdir=
quiet=0
while getopts "k:r:R:x:L:qh" opt; do
  case $opt in
    k) loads=$OPTARG ;;
    r) ranks=$OPTARG ;;
    R) reps=$OPTARG ;;
    x) target=$OPTARG ;;
    L) logdir=$OPTARG ;;
    q) quiet=1 ;;
    *) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
compare_args=(-t shm -b 8 -e 64K -f 2 -n 200 -w 20 "$@")
[[ -n $logdir ]] || logdir=$(mktemp -d -t tidal-contention.XXXXXX)
mkdir -p "$logdir"

hogs=()
loaded=0
stop_hogs() {
  local p
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
  hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

start_hogs() {
  local k
  for ((k = 0; k < $1; k++)); do
    timeout 3600 sh -c 'while :; do :; done' &
    hogs+=($!)
  done
}

# Quiet: no compiler runs, and the 1-minute load average is below 1 or, right
# after this script's own load (which the average still remembers), nothing
# but the sampling process was runnable in any of 10 one-second samples.
quiet_now() {
  pgrep -f 'cc1plus|cc1 |nvcc|cicc' >/dev/null && return 1
  awk '{ exit !($1 < 1) }' /proc/loadavg && return 0
  ((${#hogs[@]} == 0 && loaded)) || return 1
  local i
  for ((i = 0; i < 10; i++)); do
    awk '/^procs_running/ { exit !($2 <= 1) }' /proc/stat || return 1
    sleep 1
  done
}

wait_quiet() {
  local tries
  for ((tries = 0; tries < 40; tries++)); do
    quiet_now && return 0
    echo "waiting for a quiet machine: load $(cut -d' ' -f1 /proc/loadavg)" >&2
    sleep 30
  done
  echo "the machine did not get quiet in 20 minutes; measuring anyway" >&2
}

# Ratios of every run and the worst, per size, from compare.sh's logs in $1
# (in-place time, column 10 of the nccl-tests table).
ratios() {
  local dir=$1 np=$2 rep tidal mpi
  for ((rep = 1; rep <= reps; rep++)); do
    tidal=$dir/tidal_np$np.r$rep.log mpi=$dir/mpi_np$np.r$rep.log
    awk -v rep="$rep" '!/^#/ && NF >= 13 { print FILENAME ~ /tidal_/ ? "t" : "m", rep, $1, $10 }' \
      "$tidal" "$mpi"
  done | awk -v reps="$reps" -v target="$target" '
    { t[$1, $2, $3] = $4; if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 } }
    END {
      printf "| Size |"
      for (r = 1; r <= reps; r++) printf " %d |", r
      printf " worst |\n|---:|"
      for (r = 1; r <= reps; r++) printf "---:|"
      printf "---:|\n"
      bad = 0
      for (i = 1; i <= n; i++) {
        s = order[i]; worst = -1; printf "| %s |", s
        for (r = 1; r <= reps; r++) {
          if (!(("t", r, s) in t) || !(("m", r, s) in t) || t["m", r, s] + 0 == 0) {
            printf " n/a |"; bad = 1; continue
          }
          x = t["t", r, s] / t["m", r, s]
          if (x > worst) worst = x
          printf " %.2f%s |", x, (x > target) ? "!" : ""
        }
        if (worst > target || worst < 0) bad = 1
        printf " %s |\n", (worst < 0) ? "n/a" : sprintf("%.2f%s", worst, (worst > target) ? "!" : "")
      }
      exit bad
    }'
}

status=0
for k in $loads; do
  ((quiet)) && wait_quiet
  dir=$logdir/k$k
  mkdir -p "$dir"
  start_hogs "$k"
  loaded=1
  "$here/compare.sh" "${compare_args[@]}" -P "tidal mpi" -r "$ranks" -R "$reps" -L "$dir" \
    >"$dir/compare.md" || status=1
  stop_hogs
  echo "## AllReduce beside $k CPU-bound process(es), Tidal time / MPI time"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs; $reps back-to-back runs of compare.sh"
  echo "${compare_args[*]}; in-place times; '!': above the ${target}x target."
  for np in $ranks; do
    echo
    echo "### $np ranks"
    echo
    ratios "$dir" "$np" || status=1
  done
  echo
done
echo "Raw output: $logdir"
exit $status
