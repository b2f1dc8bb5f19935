#include "comm/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/json_quote.h"
#include "core/log.h"
#include "core/params.h"
#include "core/path_pattern.h"

namespace tidal {

namespace {

int64_t wallMicros() {
  // Coarse: a few nanoseconds to read, millisecond resolution, which is what
  // telling calls apart across ranks needs.
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

const char* stateName(int s) {
  static const char* const kNames[] = {"running", "enqueued", "completed", "failed"};
  return s >= 0 && s < 4 ? kNames[s] : "unknown";
}

// Every live recorder of the process, for the dump signal.
std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::set<const FlightRecorder*>& registry() {
  static std::set<const FlightRecorder*> r;
  return r;
}

int signalPipe[2] = {-1, -1};

void onDumpSignal(int) {
  // Async-signal-safe: one byte to the dumper thread, which does the work.
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(signalPipe[1], &byte, 1);
}

int parseSignal(const std::string& text) {
  std::string name = text;
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  static const struct {
    const char* name;
    int number;
  } kSignals[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                  {"URG", SIGURG},   {"PWR", SIGPWR},   {"WINCH", SIGWINCH}};
  for (const auto& s : kSignals)
    if (name == s.name) return s.number;
  fail(tidalInvalidArgument,
       "TIDAL_DUMP_SIGNAL='{}' is not one of USR1, USR2, HUP, URG, PWR, WINCH (with or without "
       "SIG)",
       text);
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity, int rank, int nranks, std::string commId,
                               std::string name)
    : ring_(capacity),
      rank_(rank),
      nranks_(nranks),
      commId_(std::move(commId)),
      name_(std::move(name)) {
  std::lock_guard lock(registryMutex());
  registry().insert(this);
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard lock(registryMutex());
  registry().erase(this);
}

uint64_t FlightRecorder::begin(const char* what, const CallSignature* signature) {
  std::lock_guard lock(mutex_);
  const uint64_t call = ++calls_;
  if (ring_.empty()) return call;
  Entry& e = ring_[(call - 1) % ring_.size()];
  e.call = call;
  e.what = what;
  e.signed_ = signature != nullptr;
  if (signature) e.signature = *signature;
  e.state.store(State::Running, std::memory_order_relaxed);
  e.startUs = wallMicros();
  e.endUs.store(0, std::memory_order_relaxed);
  e.error.clear();
  return call;
}

void FlightRecorder::end(uint64_t call, bool enqueued, const std::string& error) {
  if (ring_.empty()) return;
  // Only this thread writes entries (under the communicator's call lock), so
  // e.call is stable here; the dump reads state and endUs atomically.
  Entry& e = ring_[(call - 1) % ring_.size()];
  if (e.call != call) return;  // overwritten already (a ring smaller than a group)
  if (error.empty()) {
    e.endUs.store(wallMicros(), std::memory_order_relaxed);
    e.state.store(enqueued ? State::Enqueued : State::Completed, std::memory_order_release);
    return;
  }
  std::lock_guard lock(mutex_);
  e.error = error;
  e.endUs.store(wallMicros(), std::memory_order_relaxed);
  e.state.store(State::Failed, std::memory_order_release);
}

std::string FlightRecorder::toJson() const {
  std::lock_guard lock(mutex_);
  std::string out = fmt::format(
      "{{\"tidal_flight_record\": 1, \"comm\": {}, \"name\": {}, \"rank\": {}, \"nranks\": {}, "
      "\"pid\": {}, \"dumped_us\": {}, \"calls\": {}, \"ops\": [",
      jsonQuote(commId_), jsonQuote(name_), rank_, nranks_, ::getpid(), wallMicros(), calls_);
  const uint64_t kept = std::min<uint64_t>(calls_, ring_.size());
  for (uint64_t call = calls_ - kept + 1, i = 0; call <= calls_; ++call, ++i) {
    const Entry& e = ring_[(call - 1) % ring_.size()];
    out += fmt::format(
        "{}\n  {{\"call\": {}, \"what\": {}, \"detail\": {}, \"signed_call\": {}, \"state\": "
        "\"{}\", \"start_us\": {}, \"end_us\": {}, \"error\": {}}}",
        i ? "," : "", e.call, jsonQuote(e.what),
        jsonQuote(e.signed_ ? e.signature.describe() : std::string(e.what)),
        e.signed_ ? static_cast<int64_t>(e.signature.seq + 1) : -1,
        stateName(static_cast<int>(e.state.load(std::memory_order_acquire))), e.startUs,
        e.endUs.load(std::memory_order_relaxed), jsonQuote(e.error));
  }
  return out + "\n]}\n";
}

std::string FlightRecorder::dump() const {
  const std::string path = expandPathPattern(params::getString("TIDAL_DUMP_FILE"),
                                             {{"%r", std::to_string(rank_)}, {"%c", commId_}});
  std::ofstream out(path, std::ios::trunc);
  out << toJson();
  out.close();
  if (!out) {
    TIDAL_WARN(Init, "rank {}: cannot write the flight record to {}: {}", rank_, path,
               errnoText(errno));
    return {};
  }
  TIDAL_WARN(Init, "rank {}: flight record of {} call(s) written to {}", rank_, calls_, path);
  return path;
}

void FlightRecorder::armSignal() {
  const std::string name = params::getString("TIDAL_DUMP_SIGNAL");
  if (name.empty()) return;
  const int number = parseSignal(name);
  static std::once_flag once;
  std::call_once(once, [number] {
    if (::pipe2(signalPipe, O_CLOEXEC) != 0) {
      TIDAL_WARN(Init, "TIDAL_DUMP_SIGNAL: cannot create a pipe: {}", errnoText(errno));
      return;
    }
    // The dumper lives as long as the process; it only waits on the pipe.
    std::thread([] {
      char byte;
      while (::read(signalPipe[0], &byte, 1) > 0 || errno == EINTR) {
        std::lock_guard lock(registryMutex());
        for (const FlightRecorder* r : registry()) r->dump();
      }
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = onDumpSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(number, &sa, nullptr);
    TIDAL_INFO(Init, "flight records are written on signal {} (TIDAL_DUMP_SIGNAL)", number);
  });
}

}  // namespace tidal
