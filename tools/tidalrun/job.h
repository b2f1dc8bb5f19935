// One tidalrun job: N child processes, their output pipes, and the rules for
// signals, failures and timeouts.
//
// Life of a job:
//  - Each rank runs in its own process group (so a terminal's Ctrl-C reaches
//    tidalrun alone, and tidalrun's forwarded signal also reaches anything the
//    rank started), with stdin from /dev/null, stdout/stderr into pipes, and
//    PR_SET_PDEATHSIG so it dies if tidalrun is SIGKILLed.
//  - SIGINT/SIGTERM/SIGHUP/SIGQUIT received by tidalrun are forwarded to every
//    running rank. Ranks still running --abort-grace seconds later get SIGTERM;
//    a third signal to tidalrun sends SIGKILL at once.
//  - When a rank exits non-zero or dies of a signal, the others get
//    --abort-grace seconds to finish (they usually fail on their own once a peer
//    is gone), then SIGTERM, then SIGKILL after --kill-grace seconds.
//  - --timeout: SIGTERM (then SIGKILL) to all, exit status 124.
//  - --bind: before exec, each rank is bound inside the set tidalrun itself
//    may run on (its affinity, which taskset and cgroup cpusets narrow):
//    core gives rank i the i-th CPU of it (modulo its size), numa a NUMA
//    node's CPUs, gpu the CPUs near the rank's GPU (topology/binding.h has
//    the rules); the default is gpu where the topology lists GPUs, else
//    core. --bind none leaves the ranks on tidalrun's whole set. The
//    topology is read as the ranks would read it (TIDAL_TOPO_FILE, else
//    TIDAL_TOPO_SYSFS, -x settings included); one that cannot be read is an
//    error for --bind numa|gpu and means core for the default.
// Exit status: the first failure observed (exit code, or 128+S for signal S),
// 124 for a timeout, 128+S when tidalrun itself was signalled but every rank
// exited 0, else 0.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tidalrun/job_env.h"
#include "tidalrun/options.h"
#include "tidalrun/output.h"
#include "tidalrun/unique_fd.h"
#include "topology/binding.h"

struct signalfd_siginfo;

namespace tidalrun {

class Job {
 public:
  explicit Job(Options options);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs the job to the end and returns tidalrun's exit status.
  int run();

 private:
  using Clock = std::chrono::steady_clock;

  struct Stream {
    UniqueFd fd;
    LineForwarder forwarder;
  };
  struct Rank {
    int index = 0;
    pid_t pid = -1;
    bool running = false;
    bool terminatedByUs = false;  // tidalrun sent it SIGTERM/SIGKILL
    Stream out;
    Stream err;
  };

  void setUpSignals();
  void startRanks();
  // A non-empty `binding`: bind the child to its CPUs before exec.
  void spawn(Rank& rank, const std::vector<std::string>& env,
             const tidal::topo::RankBinding& binding);
  // The CPUs each rank is bound to (empty: not bound), from tidalrun's own
  // set. Throws tidal::Error when --bind numa|gpu cannot read the topology.
  std::vector<tidal::topo::RankBinding> rankBindings() const;
  void handleSignal(const signalfd_siginfo& info);
  void reap();
  void rankExited(Rank& rank, int status);
  void readStream(Stream& stream);
  void runDeadlines(Clock::time_point now);
  int pollTimeoutMs(Clock::time_point now) const;
  // Sends sig to every running rank's process group; returns how many.
  int signalRunning(int sig, bool byUs);
  std::string runningList() const;
  void fail(int exitCode);

  Options options_;
  JobIdentity identity_;
  std::vector<Rank> ranks_;
  int running_ = 0;
  UniqueFd signalFd_;
  UniqueFd devNull_;
  sigset_t originalMask_{};
  rlimit originalFileLimit_{};

  std::optional<int> exitCode_;  // set by the first failure or the timeout
  int userSignal_ = 0;           // last signal tidalrun received
  int userSignalCount_ = 0;
  bool escalated_ = false;  // tidalrun has started terminating ranks itself
  std::optional<Clock::time_point> timeoutAt_;
  std::optional<Clock::time_point> terminateAt_;  // SIGTERM what still runs
  std::optional<Clock::time_point> killAt_;       // SIGKILL what still runs
  std::optional<Clock::time_point> drainUntil_;   // stop waiting for pipe EOF
};

}  // namespace tidalrun
