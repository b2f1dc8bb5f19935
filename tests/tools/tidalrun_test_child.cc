// A rank program for the tidalrun tests: each mode exercises one promise of
// tidalrun (exit status, signals, environment, output). Needs no Tidal library.
// It is not a test itself: tidalrun_test.cc starts it and asserts on what
// tidalrun reports. A mode it does not know exits 99 with a message, so a
// test that calls it wrongly fails loudly instead of passing by accident.
//
//   env NAME...              print NAME=value (or NAME=<unset>) for each NAME
//   args ARG...              print arg=<ARG> for each argument it received
//   exit CODE:MS ...         rank r sleeps MS ms, then exits CODE (the r-th pair)
//   raise RANK SIG           rank RANK raises SIG after 100 ms; others sleep 30 s
//   fail-hang RANK CODE      rank RANK exits CODE after 100 ms; others sleep 30 s
//   fail-stubborn RANK CODE  like fail-hang, but the others ignore SIGTERM
//   wait-signal              print "ready", wait for a signal, print it, exit 0
//   lines N                  N stdout and N stderr lines, each written in pieces
//   partial                  text without a trailing newline on stdout and stderr
//   sleep SECONDS
//   affinity                 print "rank R cpus C1,C2,..." (its sched_getaffinity set)
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

namespace {

int rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : -1;
}

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Straight to the fd: stdio buffering would hide the partial writes that the
// line-forwarding tests need.
void put(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) std::exit(90);
    text.remove_prefix(static_cast<size_t>(n));
  }
}

volatile sig_atomic_t gSignal = 0;
void onSignal(int sig) { gSignal = sig; }

int waitSignal() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigaction(sig, &sa, nullptr);
  }
  put(1, "ready\n");
  for (int i = 0; i < 3000 && gSignal == 0; ++i) sleepMs(10);
  if (gSignal == 0) return 3;
  put(1, "rank " + std::to_string(rank()) + " got signal " + std::to_string(gSignal) + "\n");
  return 0;
}

int failOrSleep(int failing, int code, bool ignoreTerm) {
  if (rank() == failing) {
    sleepMs(100);
    return code;
  }
  if (ignoreTerm) signal(SIGTERM, SIG_IGN);
  put(1, "sleeping\n");
  sleepMs(30'000);
  return 0;
}

int lines(int n) {
  const std::string body(100, 'x');
  for (int k = 0; k < n; ++k) {
    const std::string head = "rank " + std::to_string(rank()) + " line " + std::to_string(k) + " ";
    for (int fd : {1, 2}) {
      put(fd, head);
      sleepMs(1);
      put(fd, body);
      sleepMs(1);
      put(fd, " end\n");
    }
  }
  return 0;
}

int affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 98;
  std::string text = "rank " + std::to_string(rank()) + " cpus ";
  bool first = true;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    text += (first ? "" : ",") + std::to_string(c);
    first = false;
  }
  put(1, text + "\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "tidalrun_test_child: no mode given\n");
    return 99;
  }
  const std::string_view mode = argv[1];
  if (mode == "env") {
    for (int i = 2; i < argc; ++i) {
      const char* v = std::getenv(argv[i]);
      put(1, std::string(argv[i]) + "=" + (v ? v : "<unset>") + "\n");
    }
    return 0;
  }
  if (mode == "args") {
    for (int i = 2; i < argc; ++i) put(1, std::string("arg=") + argv[i] + "\n");
    return 0;
  }
  if (mode == "exit") {
    const int r = rank();
    if (r < 0 || r + 2 >= argc) return 0;
    const char* spec = argv[r + 2];
    const int code = std::atoi(spec);
    const char* colon = std::strchr(spec, ':');
    sleepMs(colon ? std::atoi(colon + 1) : 0);
    return code;
  }
  if (mode == "raise" && argc == 4) {
    if (rank() == std::atoi(argv[2])) {
      sleepMs(100);
      raise(std::atoi(argv[3]));
    }
    sleepMs(30'000);
    return 0;
  }
  if (mode == "fail-hang" && argc == 4)
    return failOrSleep(std::atoi(argv[2]), std::atoi(argv[3]), false);
  if (mode == "fail-stubborn" && argc == 4) {
    return failOrSleep(std::atoi(argv[2]), std::atoi(argv[3]), true);
  }
  if (mode == "wait-signal") return waitSignal();
  if (mode == "lines" && argc == 3) return lines(std::atoi(argv[2]));
  if (mode == "partial") {
    put(1, "no newline");
    put(2, "err no newline");
    return 0;
  }
  if (mode == "sleep" && argc == 3) {
    sleepMs(std::atoi(argv[2]) * 1000);
    return 0;
  }
  if (mode == "affinity") return affinity();
  std::fprintf(stderr, "tidalrun_test_child: unknown mode or wrong arguments: %s\n", argv[1]);
  return 99;
}
