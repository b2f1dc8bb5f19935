#include "comm/signal_inbox.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>

#include "core/cpu_relax.h"
#include "core/error.h"

namespace tidal {

namespace {

constexpr uint64_t kMagic = 0x7469'6461'6c53'6967;  // "tidalSig"
constexpr size_t kTokenBytes = 64;
// The longest sleep between two looks at the deadline and the stop flag.
constexpr std::chrono::milliseconds kSleepSlice{20};

void futexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds wait) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(wait.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(wait.count() % 1'000'000'000);
  // Not FUTEX_PRIVATE: the word lives in a page other processes map.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

struct SignalInbox::Header {
  uint64_t magic;
  int32_t owner;
  int32_t nranks;
  char token[kTokenBytes];
  // Bumped by every post: a sleeping waiter's futex word.
  std::atomic<uint32_t> wake;
  // Waiters asleep or about to sleep: a post without any skips the wake call.
  std::atomic<uint32_t> sleepers;
};

size_t SignalInbox::bytesFor(int nranks) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = 128 + sizeof(uint64_t) * static_cast<size_t>(nranks);
  return (bytes + page - 1) / page * page;
}

SignalInbox::Header* SignalInbox::header() const { return static_cast<Header*>(data_); }

std::atomic<uint64_t>* SignalInbox::counters() const {
  static_assert(sizeof(Header) <= 128, "the counters start 128 bytes into the page");
  return reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(data_) + 128);
}

SignalInbox SignalInbox::create(int owner, int nranks, const std::string& token) {
  SignalInbox inbox;
  inbox.nranks_ = nranks;
  inbox.bytes_ = bytesFor(nranks);
  inbox.fd_ = ::memfd_create("tidal-signal-inbox", MFD_CLOEXEC);
  if (inbox.fd_ < 0) {
    fail(tidalSystemError, "rank {}: memfd_create for the signal inbox failed: {}", owner,
         errnoText(errno));
  }
  if (::ftruncate(inbox.fd_, static_cast<off_t>(inbox.bytes_)) != 0) {
    fail(tidalSystemError, "rank {}: sizing the signal inbox ({} bytes) failed: {}", owner,
         inbox.bytes_, errnoText(errno));
  }
  void* p = ::mmap(nullptr, inbox.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, inbox.fd_, 0);
  if (p == MAP_FAILED) {
    fail(tidalSystemError, "rank {}: mapping the signal inbox failed: {}", owner, errnoText(errno));
  }
  inbox.data_ = p;
  Header* h = new (p) Header{};
  h->owner = owner;
  h->nranks = nranks;
  std::memcpy(h->token, token.data(), std::min(token.size(), kTokenBytes));
  for (int r = 0; r < nranks; ++r) new (&inbox.counters()[r]) std::atomic<uint64_t>(0);
  // Last: a peer that sees the magic sees the rest.
  std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
  return inbox;
}

SignalInbox SignalInbox::attach(int owner, int nranks, const std::string& token, int pid, int fd,
                                const std::string& what) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int opened = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened < 0) {
    fail(tidalSystemError,
         "{}: cannot open rank {}'s signal inbox {} (process {}): {}; one-sided calls need "
         "ranks of one user on one host that may trace each other (ptrace permission, as "
         "process_vm_writev)",
         what, owner, path, pid, errnoText(errno));
  }
  SignalInbox inbox;
  inbox.nranks_ = nranks;
  inbox.bytes_ = bytesFor(nranks);
  void* p = ::mmap(nullptr, inbox.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, opened, 0);
  const int mapErrno = errno;
  ::close(opened);
  if (p == MAP_FAILED) {
    fail(tidalSystemError, "{}: mapping rank {}'s signal inbox {} failed: {}", what, owner, path,
         errnoText(mapErrno));
  }
  inbox.data_ = p;
  const Header* h = inbox.header();
  const bool same =
      std::atomic_ref<uint64_t>(const_cast<uint64_t&>(h->magic)).load(std::memory_order_acquire) ==
          kMagic &&
      h->owner == owner && h->nranks == nranks &&
      std::memcmp(h->token, token.data(), std::min(token.size(), kTokenBytes)) == 0;
  if (!same) {
    fail(tidalRemoteError,
         "{}: {} is not rank {}'s signal inbox of this communicator (process {} is another "
         "process, or in another PID namespace)",
         what, path, owner, pid);
  }
  return inbox;
}

SignalInbox::SignalInbox(SignalInbox&& other) noexcept { *this = std::move(other); }

SignalInbox& SignalInbox::operator=(SignalInbox&& other) noexcept {
  if (this != &other) {
    this->~SignalInbox();
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    nranks_ = other.nranks_;
  }
  return *this;
}

SignalInbox::~SignalInbox() {
  if (data_) ::munmap(data_, bytes_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
}

void SignalInbox::post(int origin) {
  counters()[origin].fetch_add(1, std::memory_order_seq_cst);
  header()->wake.fetch_add(1, std::memory_order_seq_cst);
  if (header()->sleepers.load(std::memory_order_seq_cst) > 0) futexWakeAll(&header()->wake);
}

uint64_t SignalInbox::arrived(int origin) const {
  return counters()[origin].load(std::memory_order_acquire);
}

bool SignalInbox::waitUntil(const std::function<bool()>& done, std::chrono::microseconds spin,
                            std::chrono::steady_clock::time_point deadline,
                            const std::function<bool()>& stop) const {
  if (done()) return true;
  const auto spinUntil = std::chrono::steady_clock::now() + spin;
  while (std::chrono::steady_clock::now() < spinUntil) {
    for (int i = 0; i < 64; ++i) cpuRelax();
    if (done()) return true;
    std::this_thread::yield();
  }
  Header* h = header();
  for (;;) {
    // Read the word before looking: a post after this read changes it, and
    // the futex then returns at once instead of sleeping through the post.
    const uint32_t seen = h->wake.load(std::memory_order_seq_cst);
    if (done()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || stop()) return false;
    h->sleepers.fetch_add(1, std::memory_order_seq_cst);
    futexWait(&h->wake, seen, std::min<std::chrono::nanoseconds>(kSleepSlice, deadline - now));
    h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace tidal
