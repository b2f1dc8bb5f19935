#include "tidalrun/job.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>

#include <fmt/format.h>

extern char** environ;

namespace tidalrun {

namespace {

// Once every rank has exited, something it started may still hold a pipe open;
// do not wait for that longer than this.
constexpr auto kDrainTime = std::chrono::seconds(1);
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

template <typename... Args>
void note(fmt::format_string<Args...> format, Args&&... args) {
  // One write per message, like the forwarded lines, so it never splits one.
  writeAll(STDERR_FILENO, "tidalrun: " + fmt::format(format, std::forward<Args>(args)...) + "\n");
}

// The CPUs this process may run on, in increasing order (empty if unknown).
std::vector<int> allowedCpus() {
  for (int ncpus = 1024; ncpus <= (1 << 20); ncpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(static_cast<size_t>(ncpus));
    if (set == nullptr) return {};
    const size_t bytes = CPU_ALLOC_SIZE(static_cast<size_t>(ncpus));
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) != 0) {
      CPU_FREE(set);
      if (errno == EINVAL) continue;  // the kernel's mask is larger: retry
      return {};
    }
    std::vector<int> cpus;
    for (int c = 0; c < ncpus; ++c) {
      if (CPU_ISSET_S(static_cast<size_t>(c), bytes, set)) cpus.push_back(c);
    }
    CPU_FREE(set);
    return cpus;
  }
  return {};
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  return fmt::format("was killed by signal {} ({}){}", sig, ::strsignal(sig),
                     WCOREDUMP(status) ? ", core dumped" : "");
}

int exitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

UniqueFd openOrThrow(const char* path, int flags) {
  UniqueFd fd(::open(path, flags | O_CLOEXEC));
  if (!fd.valid()) throw std::system_error(errno, std::generic_category(), path);
  return fd;
}

}  // namespace

Job::Job(Options options) : options_(std::move(options)) {}

void Job::setUpSignals() {
  // A SIGCHLD ignored by whoever started us would make the kernel reap the
  // ranks itself and hide their exit status.
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int sig : kForwardedSignals) sigaddset(&set, sig);
  // Blocked but not read: a vanished reader of our stdout shows up as EPIPE.
  sigaddset(&set, SIGPIPE);
  if (::sigprocmask(SIG_BLOCK, &set, &originalMask_) != 0) {
    throw std::system_error(errno, std::generic_category(), "sigprocmask");
  }
  sigdelset(&set, SIGPIPE);
  signalFd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signalFd_.valid()) throw std::system_error(errno, std::generic_category(), "signalfd");
}

void Job::startRanks() {
  identity_.port = options_.port != 0 ? options_.port : pickFreePort();
  identity_.secret = makeSecret();
  devNull_ = openOrThrow("/dev/null", O_RDONLY);

  // Two pipes per rank: make sure the descriptor limit allows them.
  ::getrlimit(RLIMIT_NOFILE, &originalFileLimit_);
  const auto needed = static_cast<rlim_t>(2 * options_.nranks + 64);
  if (originalFileLimit_.rlim_cur != RLIM_INFINITY && originalFileLimit_.rlim_cur < needed) {
    rlimit raised = originalFileLimit_;
    raised.rlim_cur = std::min(needed, originalFileLimit_.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }

  if (options_.verbose) {
    note("{} ranks, rendezvous {}:{}", options_.nranks, identity_.address, identity_.port);
  }
  ranks_.reserve(static_cast<size_t>(options_.nranks));
  for (int r = 0; r < options_.nranks; ++r) {
    const std::string prefix = options_.tagOutput ? fmt::format("[{}] ", r) : "";
    ranks_.push_back(Rank{r, -1, false, false, Stream{UniqueFd(), {STDOUT_FILENO, prefix}},
                          Stream{UniqueFd(), {STDERR_FILENO, prefix}}});
  }
  const std::vector<int> cpus = rankCpus();
  for (auto& rank : ranks_) {
    const int cpu = cpus[static_cast<size_t>(rank.index)];
    try {
      spawn(rank, rankEnvironment(options_, identity_, rank.index, environ), cpu);
    } catch (const std::system_error& e) {
      note("cannot start rank {}: {}", rank.index, e.what());
      fail(1);
      terminateAt_ = Clock::now();
      return;
    }
    if (options_.verbose) {
      if (cpu >= 0) {
        note("rank {}: pid {}, bound to CPU {}", rank.index, rank.pid, cpu);
      } else {
        note("rank {}: pid {}", rank.index, rank.pid);
      }
    }
  }
}

std::vector<int> Job::rankCpus() const {
  std::vector<int> bound(static_cast<size_t>(options_.nranks), -1);
  if (options_.bind == Binding::None) return bound;
  const std::vector<int> allowed = allowedCpus();
  if (allowed.empty()) {
    note("cannot read the CPUs tidalrun may run on ({}); ranks are not bound", ::strerror(errno));
    return bound;
  }
  for (size_t i = 0; i < bound.size(); ++i) bound[i] = allowed[i % allowed.size()];
  if (options_.verbose && bound.size() > allowed.size()) {
    note(
        "{} ranks on {} allowed CPU(s): rank i gets the (i mod {})-th of them, so ranks "
        "share CPUs",
        bound.size(), allowed.size(), allowed.size());
  }
  return bound;
}

void Job::spawn(Rank& rank, const std::vector<std::string>& env, int cpu) {
  int outPipe[2];
  int errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  UniqueFd outRead(outPipe[0]), outWrite(outPipe[1]);
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  UniqueFd errRead(errPipe[0]), errWrite(errPipe[1]);

  // Everything the child needs is built before fork(): after it, the child
  // only makes system calls.
  std::vector<char*> argv;
  for (const auto& a : options_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string execError =
      fmt::format("tidalrun: rank {}: cannot execute '{}': ", rank.index, options_.command[0]);
  const pid_t parent = ::getpid();
  std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> cpuSet(nullptr,
                                                          [](cpu_set_t* set) { CPU_FREE(set); });
  size_t cpuSetBytes = 0;
  if (cpu >= 0) {
    cpuSet.reset(CPU_ALLOC(static_cast<size_t>(cpu) + 1));
    if (!cpuSet) throw std::system_error(ENOMEM, std::generic_category(), "CPU_ALLOC");
    cpuSetBytes = CPU_ALLOC_SIZE(static_cast<size_t>(cpu) + 1);
    CPU_ZERO_S(cpuSetBytes, cpuSet.get());
    CPU_SET_S(static_cast<size_t>(cpu), cpuSetBytes, cpuSet.get());
  }
  const std::string bindError =
      fmt::format("tidalrun: rank {}: cannot bind to CPU {}: ", rank.index, cpu);

  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // tidalrun died before prctl took effect
    ::dup2(devNull_.get(), STDIN_FILENO);
    ::dup2(outWrite.get(), STDOUT_FILENO);
    ::dup2(errWrite.get(), STDERR_FILENO);
    ::setrlimit(RLIMIT_NOFILE, &originalFileLimit_);
    ::sigprocmask(SIG_SETMASK, &originalMask_, nullptr);
    if (cpuSet && ::sched_setaffinity(0, cpuSetBytes, cpuSet.get()) != 0) {
      // Not fatal: the rank runs, unbound, and the user learns why.
      writeAll(STDERR_FILENO, bindError + ::strerror(errno) + "\n");
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;
    const std::string message = execError + ::strerror(err) + "\n";
    writeAll(STDERR_FILENO, message);
    ::_exit(err == ENOENT ? 127 : 126);
  }
  // Also from the parent, so the group exists before we might signal it.
  ::setpgid(pid, pid);
  ::fcntl(outRead.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(errRead.get(), F_SETFL, O_NONBLOCK);
  rank.pid = pid;
  rank.running = true;
  rank.out.fd = std::move(outRead);
  rank.err.fd = std::move(errRead);
  ++running_;
}

int Job::run() {
  try {
    setUpSignals();
    startRanks();
  } catch (const std::system_error& e) {
    note("{}", e.what());
    return 1;
  }
  if (options_.timeoutSeconds > 0) timeoutAt_ = Clock::now() + seconds(options_.timeoutSeconds);

  std::vector<pollfd> fds;
  std::vector<Stream*> streams;  // streams[i] belongs to fds[i + 1]
  for (;;) {
    fds.clear();
    streams.clear();
    fds.push_back({signalFd_.get(), POLLIN, 0});
    for (auto& rank : ranks_) {
      for (Stream* s : {&rank.out, &rank.err}) {
        if (!s->fd.valid()) continue;
        fds.push_back({s->fd.get(), POLLIN, 0});
        streams.push_back(s);
      }
    }
    if (running_ == 0 && streams.empty()) break;

    const int ready = ::poll(fds.data(), fds.size(), pollTimeoutMs(Clock::now()));
    if (ready < 0 && errno != EINTR) {
      note("poll: {}", std::strerror(errno));
      signalRunning(SIGKILL, true);
      return 1;
    }
    if (ready > 0) {
      if (fds[0].revents != 0) {
        signalfd_siginfo info;
        while (::read(signalFd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
          handleSignal(info);
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) readStream(*streams[i - 1]);
      }
    }
    runDeadlines(Clock::now());
  }

  if (exitCode_) return *exitCode_;
  return userSignal_ != 0 ? 128 + userSignal_ : 0;
}

void Job::readStream(Stream& stream) {
  char buffer[64 * 1024];
  const ssize_t n = ::read(stream.fd.get(), buffer, sizeof buffer);
  if (n > 0) {
    stream.forwarder.feed(std::string_view(buffer, static_cast<size_t>(n)));
    // Nobody reads our output any more: close the rank's pipe too, so its next
    // write fails (SIGPIPE) as it would have without tidalrun in between,
    // instead of `tidalrun -np 2 yes | head` running forever.
    if (stream.forwarder.broken()) stream.fd.reset();
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  stream.forwarder.finish();
  stream.fd.reset();
}

void Job::handleSignal(const signalfd_siginfo& info) {
  const int sig = static_cast<int>(info.ssi_signo);
  if (sig == SIGCHLD) {
    reap();
    return;
  }
  userSignal_ = sig;
  ++userSignalCount_;
  if (userSignalCount_ >= 3) {
    note("received {} for the third time; killing ranks {}", ::strsignal(sig), runningList());
    signalRunning(SIGKILL, true);
    escalated_ = true;
    return;
  }
  const int n = signalRunning(sig, false);
  note("received signal {} ({}); forwarded to {} rank(s)", sig, ::strsignal(sig), n);
  if (!terminateAt_ && !escalated_ && running_ > 0) {
    terminateAt_ = Clock::now() + seconds(options_.abortGraceSeconds);
  }
}

void Job::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;  // 0: none ready; -1/ECHILD: none left
    for (auto& rank : ranks_) {
      if (rank.pid == pid && rank.running) rankExited(rank, status);
    }
  }
}

void Job::rankExited(Rank& rank, int status) {
  rank.running = false;
  --running_;
  const int code = exitCodeOf(status);
  if (running_ == 0) drainUntil_ = Clock::now() + kDrainTime;
  if (code == 0) return;
  const bool first = !exitCode_.has_value();
  // Ranks that tidalrun terminated itself are expected to die; do not report
  // each of them as if it had failed on its own.
  if (!rank.terminatedByUs)
    note("rank {} (pid {}) {}", rank.index, rank.pid, describeStatus(status));
  if (!first) return;
  fail(code);
  if (running_ > 0 && !terminateAt_ && !escalated_) {
    note("terminating the other {} rank(s) in {} s unless they exit", running_,
         options_.abortGraceSeconds);
    terminateAt_ = Clock::now() + seconds(options_.abortGraceSeconds);
  }
}

void Job::fail(int exitCode) {
  if (!exitCode_) exitCode_ = exitCode;
}

void Job::runDeadlines(Clock::time_point now) {
  if (timeoutAt_ && now >= *timeoutAt_) {
    timeoutAt_.reset();
    if (running_ > 0) {
      note("job timed out after {} s; terminating ranks {}", options_.timeoutSeconds,
           runningList());
      fail(124);
      terminateAt_ = now;
    }
  }
  if (terminateAt_ && now >= *terminateAt_) {
    terminateAt_.reset();
    if (running_ > 0) {
      note("sending SIGTERM to ranks {}", runningList());
      signalRunning(SIGTERM, true);
      escalated_ = true;
      killAt_ = now + seconds(options_.killGraceSeconds);
    }
  }
  if (killAt_ && now >= *killAt_) {
    killAt_.reset();
    if (running_ > 0) {
      note("sending SIGKILL to ranks {} ({} s after SIGTERM)", runningList(),
           options_.killGraceSeconds);
      signalRunning(SIGKILL, true);
    }
  }
  if (drainUntil_ && now >= *drainUntil_) {
    // A rank's own children still hold its pipes: keep what was said, move on.
    drainUntil_.reset();
    for (auto& rank : ranks_) {
      for (Stream* s : {&rank.out, &rank.err}) {
        if (!s->fd.valid()) continue;
        s->forwarder.finish();
        s->fd.reset();
      }
    }
  }
}

int Job::pollTimeoutMs(Clock::time_point now) const {
  std::optional<Clock::time_point> next;
  for (const auto& t : {timeoutAt_, terminateAt_, killAt_, drainUntil_}) {
    if (t && (!next || *t < *next)) next = t;
  }
  if (!next) return -1;
  if (*next <= now) return 0;
  // Round up so we never wake just before the deadline and spin.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::min<long long>(ms, 60'000));
}

int Job::signalRunning(int sig, bool byUs) {
  int n = 0;
  for (auto& rank : ranks_) {
    if (!rank.running) continue;
    // The whole group, so helpers the rank started go too; fall back to the
    // pid should the group not exist.
    if (::kill(-rank.pid, sig) != 0) ::kill(rank.pid, sig);
    if (byUs) rank.terminatedByUs = true;
    ++n;
  }
  return n;
}

std::string Job::runningList() const {
  std::string out;
  for (const auto& rank : ranks_) {
    if (!rank.running) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(rank.index);
  }
  return out;
}

}  // namespace tidalrun
