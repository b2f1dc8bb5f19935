/*
 * MPI_Allreduce timed the way all_reduce_perf times tidalAllReduce, or (with
 * --collective alltoall) MPI_Alltoall timed the way alltoall_perf times
 * tidalAlltoAll, or (--collective broadcast) MPI_Bcast from rank 0 timed the
 * way broadcast_perf times tidalBroadcast, printing the same nccl-tests table
 * so compare.sh can line them up.
 *
 *   mpirun -np 4 build/benchmarks/mpi_allreduce_perf -b 8 -e 64M -f 4
 *   mpirun -np 4 build/benchmarks/mpi_allreduce_perf --collective alltoall -b 8 -e 64M -f 4
 *
 * Flags (nccl-tests spelling): -b/--minbytes -e/--maxbytes (K/M/G suffixes),
 * -i/--stepbytes, -f/--stepfactor, -n/--iters, -w/--warmup_iters,
 * -m/--agg_iters, -c/--check, -a/--average, -z/--blocking, -d/--datatype
 * (float|double), -o/--op (sum; allreduce only), and --collective
 * (allreduce|alltoall|broadcast, default allreduce; -C is nccl-tests'
 * report_cputime), and --start-together 0|1 (as the *_perf benchmarks: each call
 * starts at a moment all ranks agreed on, on one machine's clock).
 *
 * Out-of-place passes separate buffers; in-place passes MPI_IN_PLACE.
 * Allreduce inputs are small integers so the float sum is exact in any order
 * and the result is checked bit for bit, as all_reduce_perf does.
 *
 * AllToAll follows alltoall_perf: "size" is one rank's whole buffer, of
 * count / n * n elements, and each of the n blocks (count / n elements, the
 * count printed) goes to one rank; busbw = algbw * (n-1)/n. Every element
 * names its sender and its place, so a block landing at the wrong rank or
 * offset is counted wrong.
 *
 * Broadcast: MPI_Bcast is in place, so out-of-place copies the root's send
 * buffer into its receive buffer first (a copy of the message, as NCCL's
 * out-of-place broadcast makes); busbw = algbw. In place every rank but the
 * root fills its buffer with values of its own, and out of place every
 * checked output starts as NaNs, so a broadcast that moved nothing is
 * counted wrong.
 */
#define _GNU_SOURCE /* getopt_long, gethostname, posix_memalign */
#include <getopt.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  size_t minBytes, maxBytes, stepBytes, stepFactor;
  int iters, warmupIters, aggIters, check, average, blocking;
  int isDouble;      /* 0: float, 1: double */
  int collective;    /* 0: MPI_Allreduce, 1: MPI_Alltoall, 2: MPI_Bcast */
  int startTogether; /* --start-together 1: all_reduce_perf's, see timeStartingTogether */
} Options;

static int rank_ = 0, nranks_ = 1;

/* What differs between the timed collectives; the sweep, timing and table
 * are shared. `count` is the element count a size gives (size / element). */
typedef struct {
  const char* peerName; /* MPI call, printed in the header */
  const char* opName;   /* the redop column */
  /* Elements in one rank's buffer, as the size column shows them. */
  size_t (*bufferCount)(size_t count);
  /* The count argument of the call, as the count column shows it. */
  size_t (*callCount)(size_t count);
  double (*busFactor)(void);
  void (*call)(const void* send, void* recv, size_t callCount, MPI_Datatype type);
  void (*fill)(void* buf, size_t bufferCount, int isDouble);
  long long (*countWrong)(const void* buf, size_t bufferCount, int isDouble);
} Collective;

/* "64M" -> 67108864; K/M/G are powers of 1024 as in nccl-tests. 0 on error. */
static int parseSize(const char* text, size_t* out) {
  char* end = NULL;
  double value = strtod(text, &end);
  size_t unit = 1;
  if (end == text || value < 0) return 0;
  switch (*end) {
    case 'k':
    case 'K':
      unit = 1024;
      end++;
      break;
    case 'm':
    case 'M':
      unit = 1024 * 1024;
      end++;
      break;
    case 'g':
    case 'G':
      unit = 1024 * 1024 * 1024;
      end++;
      break;
    default:
      break;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0') return 0;
  *out = (size_t)(value * (double)unit);
  return 1;
}

static void usage(const char* argv0) {
  if (rank_ == 0) {
    fprintf(stderr,
            "usage: %s [-b minbytes] [-e maxbytes] [-i stepbytes] [-f stepfactor] [-n iters]\n"
            "          [-w warmup_iters] [-m agg_iters] [-c check] [-a average 0-3]\n"
            "          [-z blocking] [-d float|double] [-o sum] [--collective "
            "allreduce|alltoall|broadcast]\n"
            "          [--start-together 0|1]\n",
            argv0);
  }
}

/* Returns 0 on success, 1 on a bad flag (already reported). */
static int parseOptions(int argc, char** argv, Options* o) {
  static const struct option longOptions[] = {{"minbytes", required_argument, 0, 'b'},
                                              {"maxbytes", required_argument, 0, 'e'},
                                              {"stepbytes", required_argument, 0, 'i'},
                                              {"stepfactor", required_argument, 0, 'f'},
                                              {"iters", required_argument, 0, 'n'},
                                              {"warmup_iters", required_argument, 0, 'w'},
                                              {"agg_iters", required_argument, 0, 'm'},
                                              {"check", required_argument, 0, 'c'},
                                              {"average", required_argument, 0, 'a'},
                                              {"blocking", required_argument, 0, 'z'},
                                              {"datatype", required_argument, 0, 'd'},
                                              {"op", required_argument, 0, 'o'},
                                              {"collective", required_argument, 0, 'K'},
                                              {"start-together", required_argument, 0, 'T'},
                                              {"help", no_argument, 0, 'h'},
                                              {0, 0, 0, 0}};
  int c;
  o->minBytes = o->maxBytes = 32u << 20;
  o->stepBytes = 1u << 20;
  o->stepFactor = 1;
  o->iters = 20;
  o->warmupIters = 5;
  o->aggIters = 1;
  o->check = 1;
  o->average = 1;
  o->blocking = 0;
  o->isDouble = 0;
  o->collective = 0;
  o->startTogether = 0;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:m:c:a:z:d:o:h", longOptions, NULL)) != -1) {
    int ok = 1;
    switch (c) {
      case 'b':
        ok = parseSize(optarg, &o->minBytes);
        break;
      case 'e':
        ok = parseSize(optarg, &o->maxBytes);
        break;
      case 'i':
        ok = parseSize(optarg, &o->stepBytes);
        break;
      case 'f':
        o->stepFactor = strtoul(optarg, NULL, 0);
        break;
      case 'n':
        o->iters = atoi(optarg);
        ok = o->iters > 0;
        break;
      case 'w':
        o->warmupIters = atoi(optarg);
        ok = o->warmupIters >= 0;
        break;
      case 'm':
        o->aggIters = atoi(optarg);
        ok = o->aggIters > 0;
        break;
      case 'c':
        o->check = atoi(optarg);
        ok = o->check >= 0;
        break;
      case 'a':
        o->average = atoi(optarg);
        ok = o->average >= 0 && o->average <= 3;
        break;
      case 'z':
        o->blocking = atoi(optarg);
        break;
      case 'd':
        ok = !strcmp(optarg, "float") || !strcmp(optarg, "double");
        o->isDouble = !strcmp(optarg, "double");
        break;
      case 'o':
        ok = !strcmp(optarg, "sum");
        break;
      case 'K':
        ok = !strcmp(optarg, "allreduce") || !strcmp(optarg, "alltoall") ||
             !strcmp(optarg, "broadcast");
        o->collective = !strcmp(optarg, "alltoall") ? 1 : !strcmp(optarg, "broadcast") ? 2 : 0;
        break;
      case 'T':
        o->startTogether = atoi(optarg);
        ok = o->startTogether == 0 || o->startTogether == 1;
        break;
      default:
        usage(argv[0]);
        return 1;
    }
    if (!ok) {
      if (rank_ == 0) fprintf(stderr, "invalid or unsupported value for -%c: %s\n", c, optarg);
      return 1;
    }
  }
  if (o->startTogether && o->blocking) {
    if (rank_ == 0) fprintf(stderr, "--start-together 1 cannot be combined with -z\n");
    return 1;
  }
  if (o->minBytes > o->maxBytes ||
      (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes != o->maxBytes) ||
      (o->stepFactor > 1 && o->minBytes == 0)) {
    if (rank_ == 0) fprintf(stderr, "inconsistent size sweep\n");
    return 1;
  }
  return 0;
}

/* Input of rank r at index i: small integers, so any summation order is exact. */
static double inputValue(int r, size_t i) { return (double)((i * 7 + (size_t)r * 13) % 64); }

/* AllToAll input of rank r at index i of its buffer: the sender and the place
 * both show, and every value is exact in float for up to 4096 ranks. */
static double exchangeValue(int r, size_t i) { return (double)((size_t)r * 4096 + i % 4093); }

static void store(void* buf, size_t i, double value, int isDouble) {
  if (isDouble)
    ((double*)buf)[i] = value;
  else
    ((float*)buf)[i] = (float)value;
}

static int differs(const void* buf, size_t i, double want, int isDouble) {
  return isDouble ? ((const double*)buf)[i] != want : ((const float*)buf)[i] != (float)want;
}

static size_t sameCount(size_t count) { return count; }
static double allreduceBusFactor(void) { return 2.0 * (nranks_ - 1) / nranks_; }

static void allreduceCall(const void* send, void* recv, size_t count, MPI_Datatype type) {
  MPI_Allreduce(send, recv, (int)count, type, MPI_SUM, MPI_COMM_WORLD);
}

static void allreduceFill(void* buf, size_t count, int isDouble) {
  size_t i;
  for (i = 0; i < count; i++) store(buf, i, inputValue(rank_, i), isDouble);
}

static long long allreduceWrong(const void* buf, size_t count, int isDouble) {
  long long wrong = 0;
  size_t i;
  int r;
  for (i = 0; i < count; i++) {
    double want = 0;
    for (r = 0; r < nranks_; r++) want += inputValue(r, i);
    wrong += differs(buf, i, want, isDouble);
  }
  return wrong;
}

static size_t alltoallBufferCount(size_t count) { return count / (size_t)nranks_ * nranks_; }
static size_t alltoallCallCount(size_t count) { return count / (size_t)nranks_; }
static double alltoallBusFactor(void) { return (double)(nranks_ - 1) / nranks_; }

static void alltoallCall(const void* send, void* recv, size_t block, MPI_Datatype type) {
  MPI_Alltoall(send, (int)block, type, recv, (int)block, type, MPI_COMM_WORLD);
}

static void alltoallFill(void* buf, size_t count, int isDouble) {
  size_t i;
  for (i = 0; i < count; i++) store(buf, i, exchangeValue(rank_, i), isDouble);
}

/* Block q of the output is block `rank_` of rank q's input. */
static long long alltoallWrong(const void* buf, size_t count, int isDouble) {
  const size_t block = count / (size_t)nranks_;
  long long wrong = 0;
  size_t i;
  for (i = 0; i < block * nranks_; i++) {
    const int from = (int)(i / block);
    wrong += differs(buf, i, exchangeValue(from, (size_t)rank_ * block + i % block), isDouble);
  }
  return wrong;
}

static double broadcastBusFactor(void) { return 1.0; }

static void broadcastCall(const void* send, void* recv, size_t count, MPI_Datatype type) {
  if (send != MPI_IN_PLACE && rank_ == 0) {
    int size = 0;
    MPI_Type_size(type, &size);
    memcpy(recv, send, count * (size_t)size);
  }
  MPI_Bcast(recv, (int)count, type, 0, MPI_COMM_WORLD);
}

static void broadcastFill(void* buf, size_t count, int isDouble) {
  size_t i;
  for (i = 0; i < count; i++) store(buf, i, inputValue(rank_, i) + (rank_ ? 100 : 0), isDouble);
}

static long long broadcastWrong(const void* buf, size_t count, int isDouble) {
  long long wrong = 0;
  size_t i;
  for (i = 0; i < count; i++) wrong += differs(buf, i, inputValue(0, i), isDouble);
  return wrong;
}

static const Collective kAllreduce = {
    "MPI_Allreduce",    "sum",         sameCount,     sameCount,
    allreduceBusFactor, allreduceCall, allreduceFill, allreduceWrong};
static const Collective kAlltoall = {
    "MPI_Alltoall",    "none",       alltoallBufferCount, alltoallCallCount,
    alltoallBusFactor, alltoallCall, alltoallFill,        alltoallWrong};
static const Collective kBroadcast = {
    "MPI_Bcast",        "none",        sameCount,     sameCount,
    broadcastBusFactor, broadcastCall, broadcastFill, broadcastWrong};

static double monotonicSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --start-together 1, as the *_perf benchmarks do it (benchmarks/perf/harness.cc):
 * every call starts at a moment all ranks agreed on, read from CLOCK_MONOTONIC
 * (one clock: ranks of one machine), and is timed from it to this rank's end.
 * Returns this rank's mean seconds per call. */
static double timeStartingTogether(const Options* o, const Collective* coll, const void* src,
                                   void* recv, size_t callCount, MPI_Datatype type) {
  double callSeconds = monotonicSeconds(), period, first, total = 0;
  int i, j;
  for (j = 0; j < o->aggIters; j++) coll->call(src, recv, callCount, type);
  callSeconds = monotonicSeconds() - callSeconds;
  MPI_Allreduce(MPI_IN_PLACE, &callSeconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  period = 2 * callSeconds + 0.002;
  first = monotonicSeconds() + period;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  for (i = 0; i < o->iters; i++) {
    const double start = first + i * period;
    const double early = start - 300e-6 - monotonicSeconds();
    if (early > 0) {
      struct timespec pause;
      pause.tv_sec = (time_t)early;
      pause.tv_nsec = (long)((early - (double)pause.tv_sec) * 1e9);
      nanosleep(&pause, NULL);
    }
    while (monotonicSeconds() < start) sched_yield();
    for (j = 0; j < o->aggIters; j++) coll->call(src, recv, callCount, type);
    total += monotonicSeconds() - start;
  }
  return total / ((double)o->iters * o->aggIters);
}

static double combineTimes(double seconds, int average) {
  double result = seconds;
  switch (average) {
    case 0:
      MPI_Bcast(&result, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      break;
    case 2:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      break;
    case 3:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      break;
    default:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      result /= nranks_;
  }
  return result;
}

static void printTime(double us) {
  if (us >= 10000.0)
    printf("  %7.0f", us);
  else if (us >= 100.0)
    printf("  %7.1f", us);
  else
    printf("  %7.2f", us);
}

static void printHeader(const Options* o, const Collective* coll) {
  char host[120];
  char* all = NULL;
  char line[256];
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int versionLen = 0, r;
  char* newline;
  if (gethostname(host, sizeof(host) - 1) != 0) strcpy(host, "unknown");
  host[sizeof(host) - 1] = '\0';
  snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s",
           rank_, 0, (int)getpid(), host, 0, 0, "host memory");
  if (rank_ == 0) all = malloc(sizeof(line) * (size_t)nranks_);
  MPI_Gather(line, sizeof(line), MPI_CHAR, all, sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Get_library_version(version, &versionLen);
  newline = strchr(version, '\n');
  if (newline) *newline = '\0';
  if (rank_ != 0) return;
  printf(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: 0\n",
      o->minBytes, o->maxBytes, o->stepFactor > 1 ? o->stepFactor : o->stepBytes,
      o->stepFactor > 1 ? "factor" : "bytes", o->warmupIters, o->iters, o->aggIters, o->check);
  printf("# Peer: %s, %s\n#\n# Using devices\n", coll->peerName, version);
  for (r = 0; r < nranks_; r++) printf("%s\n", all + sizeof(line) * (size_t)r);
  free(all);
  printf("#\n");
  printf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
         "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
         "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

int main(int argc, char** argv) {
  Options o;
  const Collective* coll;
  MPI_Datatype type;
  size_t elem, size, bytes;
  char *send = NULL, *recv = NULL;
  int failed = 0, bwCount = 0, i, j, inPlace, pass;
  double bwSum = 0;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
  if (parseOptions(argc, argv, &o) != 0) {
    MPI_Finalize();
    return 1;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* --start-together: the sleeps before each agreed start wake on time. */
  if (o.startTogether) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  coll = o.collective == 1 ? &kAlltoall : o.collective == 2 ? &kBroadcast : &kAllreduce;
  type = o.isDouble ? MPI_DOUBLE : MPI_FLOAT;
  elem = o.isDouble ? sizeof(double) : sizeof(float);
  bytes = o.maxBytes < 4096 ? 4096 : (o.maxBytes + 4095) / 4096 * 4096;
  if (posix_memalign((void**)&send, 4096, bytes) || posix_memalign((void**)&recv, 4096, bytes)) {
    fprintf(stderr, "rank %d: out of memory\n", rank_);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send, 0, bytes); /* fault pages in before timing */
  memset(recv, 0, bytes);
  printHeader(&o, coll);

  for (i = 0; i < o.warmupIters; i++)
    coll->call(send, recv, coll->callCount(o.maxBytes / elem), type);
  for (i = 0; i < o.warmupIters; i++)
    coll->call(send, recv, coll->callCount(o.minBytes / elem), type);

  for (size = o.minBytes; size <= o.maxBytes;
       size = o.stepFactor > 1 ? size * o.stepFactor : size + o.stepBytes) {
    const size_t count = coll->bufferCount(size / elem), callCount = coll->callCount(size / elem);
    if (rank_ == 0) {
      printf("%12zu  %12zu  %8s  %6s  %6i", count * elem, callCount,
             o.isDouble ? "double" : "float", coll->opName, -1);
    }
    for (inPlace = 0; inPlace <= 1; inPlace++) {
      const void* src = inPlace ? MPI_IN_PLACE : send;
      double start, seconds, algBw, busBw;
      long long wrong = 0, mine;
      coll->fill(inPlace ? recv : send, count, o.isDouble);
      coll->call(src, recv, callCount, type);
      MPI_Barrier(MPI_COMM_WORLD);
      if (o.startTogether) {
        seconds = timeStartingTogether(&o, coll, src, recv, callCount, type);
      } else {
        start = MPI_Wtime();
        for (i = 0; i < o.iters; i++) {
          for (j = 0; j < o.aggIters; j++) coll->call(src, recv, callCount, type);
          if (o.blocking) MPI_Barrier(MPI_COMM_WORLD);
        }
        seconds = (MPI_Wtime() - start) / ((double)o.iters * o.aggIters);
      }
      seconds = combineTimes(seconds, o.average);
      algBw = seconds > 0 ? (double)(count * elem) / 1.0e9 / seconds : 0;
      busBw = algBw * coll->busFactor();
      for (pass = 0; pass < o.check && wrong == 0; pass++) {
        coll->fill(inPlace ? recv : send, count, o.isDouble);
        /* Out of place, the output starts as NaNs (all bits set), so a call that
         * leaves it untouched (a broadcast that moved nothing) is counted wrong. */
        if (!inPlace) memset(recv, 0xff, count * elem);
        coll->call(src, recv, callCount, type);
        mine = coll->countWrong(recv, count, o.isDouble);
        MPI_Allreduce(&mine, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      }
      if (wrong) failed++;
      if (rank_ == 0) {
        printTime(seconds * 1e6);
        printf("  %6.2f  %6.2f", algBw, busBw);
        if (o.check)
          printf("  %5lld", wrong);
        else
          printf("  %5s", "N/A");
      }
      bwSum += busBw;
      bwCount++;
    }
    if (rank_ == 0) printf("\n");
    if (o.stepFactor <= 1 && o.stepBytes == 0) break;
  }

  if (rank_ == 0) {
    printf("# Out of bounds values : %d %s\n", failed, failed ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", bwCount ? bwSum / bwCount : 0.0);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return failed ? 1 : 0;
}
