#include "tidalrun/job.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "core/error.h"
#include "core/params.h"
#include "topology/affinity.h"
#include "topology/detect.h"

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

// -x settings that change what the ranks read as their topology or GPUs:
// tidalrun reads it the same way, so it takes them too.
void adoptTopologySettings(const Options& options) {
  bool changed = false;
  for (const auto& [name, value] : options.extraEnv) {
    if (name.rfind("TIDAL_TOPO_", 0) == 0 || name == "TIDAL_CONF_FILE" ||
        name == "CUDA_VISIBLE_DEVICES") {
      ::setenv(name.c_str(), value.c_str(), 1);
      changed = true;
    }
  }
  if (changed) tidal::params::reload();
}

std::optional<std::string> cudaVisibleDevices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? std::optional<std::string>(v) : std::nullopt;
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
  const std::vector<tidal::topo::RankBinding> bindings = rankBindings();
  for (auto& rank : ranks_) {
    const auto& binding = bindings[static_cast<size_t>(rank.index)];
    try {
      spawn(rank, rankEnvironment(options_, identity_, rank.index, environ), binding);
    } catch (const std::exception& e) {
      note("cannot start rank {}: {}", rank.index, e.what());
      fail(1);
      terminateAt_ = Clock::now();
      return;
    }
    if (options_.verbose) {
      if (!binding.cpus.empty()) {
        note("rank {}: pid {}, bound to {}", rank.index, rank.pid, binding.what);
      } else {
        note("rank {}: pid {}", rank.index, rank.pid);
      }
    }
  }
}

std::vector<tidal::topo::RankBinding> Job::rankBindings() const {
  using tidal::topo::BindPolicy;
  const auto n = static_cast<size_t>(options_.nranks);
  std::vector<tidal::topo::RankBinding> unbound(n);
  if (options_.bind == BindPolicy::None) return unbound;
  const auto allowed = tidal::topo::threadAffinity();
  if (!allowed || allowed->empty()) {
    note("cannot read the CPUs tidalrun may run on ({}); ranks are not bound", ::strerror(errno));
    return unbound;
  }
  BindPolicy policy = options_.bind.value_or(BindPolicy::Core);
  tidal::topo::Topology topology;
  if (policy != BindPolicy::Core || !options_.bind) {
    adoptTopologySettings(options_);
    try {
      topology = tidal::topo::detectTopology(/*writeDump=*/false).topology;
      if (!options_.bind) policy = tidal::topo::defaultBindPolicy(topology);
    } catch (const tidal::Error& e) {
      if (options_.bind) {
        tidal::fail(e.code(), "--bind {} needs the topology: {}", bindPolicyName(policy), e.what());
      }
      note("cannot read the topology ({}); ranks are bound to one CPU each", e.what());
    }
  }
  std::string gpuNote;
  const auto gpus =
      tidal::topo::gpusOfLocalRanks(topology, options_.nranks, cudaVisibleDevices(), &gpuNote);
  if (policy == BindPolicy::Gpu && !gpuNote.empty()) note("{}", gpuNote);
  if (options_.verbose) {
    note("binding: {} over CPUs {}", bindPolicyName(policy), allowed->text());
    if (policy == BindPolicy::Core && n > allowed->size()) {
      note(
          "{} ranks on {} allowed CPU(s): rank i gets the (i mod {})-th of them, so ranks "
          "share CPUs",
          n, allowed->size(), allowed->size());
    }
  }
  return tidal::topo::planBindings(topology, policy, *allowed, gpus);
}

void Job::spawn(Rank& rank, const std::vector<std::string>& env,
                const tidal::topo::RankBinding& binding) {
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
  std::optional<tidal::topo::AffinityMask> mask;
  if (!binding.cpus.empty()) mask.emplace(binding.cpus);
  const std::string bindError =
      fmt::format("tidalrun: rank {}: cannot bind to {}: ", rank.index, binding.what);

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
    if (mask) {
      // Not fatal: the rank runs, unbound, and the user learns why.
      if (const int err = mask->apply(); err != 0) {
        writeAll(STDERR_FILENO, bindError + ::strerror(err) + "\n");
      }
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
  } catch (const tidal::Error& e) {
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
