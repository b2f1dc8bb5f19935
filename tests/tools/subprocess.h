// Runs a program with captured stdout/stderr for the tools tests, with a hard
// time limit so a broken tidalrun fails a test instead of hanging it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tidal::testing {

struct RunResult {
  int exitCode = -1;      // 128+S when killed by signal S
  bool timedOut = false;  // the test harness had to kill it
  std::string out;
  std::string err;
  double seconds = 0;
};

class Subprocess {
 public:
  using Clock = std::chrono::steady_clock;

  // env: extra NAME=VALUE settings on top of this process's environment.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env = {})
      : start_(Clock::now()) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return;
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      for (auto& e : env) ::putenv(e.data());
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::execv(args[0], args.data());
      ::_exit(126);
    }
    ::close(out[1]);
    ::close(err[1]);
    outFd_ = out[0];
    errFd_ = err[0];
  }
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (outFd_ >= 0) ::close(outFd_);
    if (errFd_ >= 0) ::close(errFd_);
  }

  pid_t pid() const { return pid_; }
  const std::string& out() const { return result_.out; }

  // Collects output until done(out) holds or the limit passes; false on timeout
  // or when both pipes closed first.
  bool readUntil(const std::function<bool(const std::string&)>& done, double limitSeconds) {
    const auto deadline = Clock::now() + toDuration(limitSeconds);
    while (!done(result_.out)) {
      if (!pump(deadline)) return false;
    }
    return true;
  }

  // Stops reading stdout, as `| head` does.
  void closeOut() {
    if (outFd_ >= 0) ::close(outFd_);
    outFd_ = -1;
  }

  // Waits for the process to finish (killing it after limitSeconds).
  RunResult finish(double limitSeconds = 30) {
    const auto deadline = Clock::now() + toDuration(limitSeconds);
    while (outFd_ >= 0 || errFd_ >= 0) {
      if (!pump(deadline)) {
        result_.timedOut = true;
        ::kill(pid_, SIGKILL);
        break;
      }
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    result_.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return result_;
  }

 private:
  static Clock::duration toDuration(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  // One poll round; false when the deadline passed or nothing is left to read.
  bool pump(Clock::time_point deadline) {
    if (outFd_ < 0 && errFd_ < 0) return false;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    pollfd fds[2] = {{outFd_, POLLIN, 0}, {errFd_, POLLIN, 0}};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    if (::poll(fds, 2, static_cast<int>(ms) + 1) < 0) return true;
    drain(fds[0], outFd_, result_.out);
    drain(fds[1], errFd_, result_.err);
    return true;
  }

  static void drain(const pollfd& p, int& fd, std::string& into) {
    if (fd < 0 || p.revents == 0) return;
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
    } else {
      ::close(fd);
      fd = -1;
    }
  }

  Clock::time_point start_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int outFd_ = -1;
  int errFd_ = -1;
  RunResult result_;
};

inline RunResult run(std::vector<std::string> argv, std::vector<std::string> env = {},
                     double limitSeconds = 30) {
  Subprocess p(std::move(argv), std::move(env));
  return p.finish(limitSeconds);
}

// Splits text into lines (without the '\n').
inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

}  // namespace tidal::testing
