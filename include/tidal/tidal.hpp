// Tidal's C++20 layer: RAII and spans over the C API in tidal.h, nothing more.
//
// Header-only on purpose: it compiles into the user's program against the
// stable C ABI, so no C++ ABI (std::string, exceptions, std::vector layout)
// ever crosses the library boundary.
//
//   auto comm = tidal::Communicator::fromEnv();
//   std::vector<float> grad(n);
//   comm.allReduce(std::span<float>(grad));          // in place, sum
//   comm.allReduce(in, std::span(out), tidalMax);     // in: any contiguous range
//
// Every failure throws tidal::Error carrying the tidalResult_t and the text of
// tidalGetLastError(). Collectives on host memory with no stream block until
// the result is in the receive buffer, as in the C API.
#ifndef TIDAL_TIDAL_HPP_
#define TIDAL_TIDAL_HPP_

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidal/tidal.h"

namespace tidal {

// A failed Tidal call: the result code plus the library's explanation.
class Error : public std::runtime_error {
 public:
  Error(tidalResult_t code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  tidalResult_t code() const noexcept { return code_; }

 private:
  tidalResult_t code_;
};

namespace detail {

// Turns a non-success result into tidal::Error. `comm` selects whose last
// error text to fetch (nullptr: the calling thread's).
inline void check(tidalResult_t result, const char* call, tidalComm_t comm) {
  if (result == tidalSuccess) return;
  std::string message = std::string(call) + ": " + tidalGetErrorString(result);
  const char* detail = tidalGetLastError(comm);
  if (detail != nullptr && *detail != '\0') message += std::string(": ") + detail;
  throw Error(result, std::move(message));
}

[[noreturn]] inline void invalid(const std::string& message) {
  throw Error(tidalInvalidArgument, message);
}

}  // namespace detail

// DataType<T>::value is the tidalDataType_t for element type T. Defined for
// float, double and the 8-, 32- and 64-bit integers (whatever they are called
// on the platform: int64_t may be long or long long). Specialise it to make
// your own types (a half-precision struct, say) usable with the span overloads.
template <typename T>
struct DataType {};

template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
         (sizeof(T) == 1 || sizeof(T) == 4 || sizeof(T) == 8)) struct DataType<T> {
  static constexpr tidalDataType_t value =
      sizeof(T) == 1   ? (std::is_signed_v<T> ? tidalInt8 : tidalUint8)
      : sizeof(T) == 4 ? (std::is_signed_v<T> ? tidalInt32 : tidalUint32)
                       : (std::is_signed_v<T> ? tidalInt64 : tidalUint64);
};
template <>
struct DataType<float> {
  static constexpr tidalDataType_t value = tidalFloat32;
};
template <>
struct DataType<double> {
  static constexpr tidalDataType_t value = tidalFloat64;
};

// An element type the span overloads accept.
template <typename T>
concept Element = requires {
  { DataType<std::remove_cv_t<T>>::value } -> std::convertible_to<tidalDataType_t>;
};

template <Element T>
inline constexpr tidalDataType_t dataTypeOf = DataType<std::remove_cv_t<T>>::value;

// The NCCL API level the library implements (TIDAL_VERSION_CODE: 23000 for 2.30.0).
inline int version() {
  int v = 0;
  detail::check(tidalGetVersion(&v), "tidalGetVersion", nullptr);
  return v;
}

// The rendezvous token for tidalCommInitRank: created once (on the process that
// will be rank 0), then sent to every other rank by any means (MPI, a file, a
// socket). bytes()/fromBytes() are for that shipping.
class UniqueId {
 public:
  UniqueId() : raw_{} {}
  explicit UniqueId(const tidalUniqueId& raw) : raw_(raw) {}

  // Makes the calling process the rendezvous root; it must become rank 0.
  static UniqueId create() {
    UniqueId id;
    detail::check(tidalGetUniqueId(&id.raw_), "tidalGetUniqueId", nullptr);
    return id;
  }

  static UniqueId fromBytes(std::span<const std::byte> bytes) {
    if (bytes.size() != sizeof(tidalUniqueId)) {
      detail::invalid("UniqueId::fromBytes: expected " + std::to_string(sizeof(tidalUniqueId)) +
                      " bytes, got " + std::to_string(bytes.size()));
    }
    UniqueId id;
    std::memcpy(&id.raw_, bytes.data(), bytes.size());
    return id;
  }

  std::span<const std::byte, sizeof(tidalUniqueId)> bytes() const {
    return std::span<const std::byte, sizeof(tidalUniqueId)>(
        reinterpret_cast<const std::byte*>(&raw_), sizeof(tidalUniqueId));
  }
  const tidalUniqueId& raw() const { return raw_; }

 private:
  tidalUniqueId raw_;
};

// Owns one tidalComm_t. Move-only; the destructor calls tidalCommDestroy
// (which waits for outstanding work) and swallows its result, as destructors
// must: call destroy() to see errors.
class Communicator {
 public:
  Communicator() = default;
  // Takes ownership of a communicator made through the C API.
  explicit Communicator(tidalComm_t adopted) noexcept : comm_(adopted) {}
  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() { reset(); }

  // Collective over the nranks processes that pass the same id.
  static Communicator create(int nranks, const UniqueId& id, int rank) {
    tidalComm_t comm = nullptr;
    detail::check(tidalCommInitRank(&comm, nranks, id.raw(), rank), "tidalCommInitRank", nullptr);
    return Communicator(comm);
  }

  // Rank, size and rendezvous from the launcher (tidalrun, torchrun, mpirun,
  // srun); see tidalCommInitFromEnv.
  static Communicator fromEnv() {
    tidalComm_t comm = nullptr;
    detail::check(tidalCommInitFromEnv(&comm), "tidalCommInitFromEnv", nullptr);
    return Communicator(comm);
  }

  // n communicators of one job inside this process, ranks 0..n-1. Their
  // collectives block, so drive each from its own thread.
  static std::vector<Communicator> initAll(int n, std::span<const int> devices = {}) {
    if (n <= 0)
      detail::invalid("Communicator::initAll: n must be positive, got " + std::to_string(n));
    if (!devices.empty() && devices.size() != static_cast<size_t>(n)) {
      detail::invalid("Communicator::initAll: " + std::to_string(devices.size()) + " devices for " +
                      std::to_string(n) + " communicators");
    }
    std::vector<tidalComm_t> raw(static_cast<size_t>(n), nullptr);
    detail::check(tidalCommInitAll(raw.data(), n, devices.empty() ? nullptr : devices.data()),
                  "tidalCommInitAll", nullptr);
    std::vector<Communicator> out;
    out.reserve(raw.size());
    for (tidalComm_t c : raw) out.emplace_back(c);
    return out;
  }

  tidalComm_t get() const noexcept { return comm_; }
  explicit operator bool() const noexcept { return comm_ != nullptr; }
  // Gives up ownership without destroying.
  tidalComm_t release() noexcept { return std::exchange(comm_, nullptr); }

  // Waits for outstanding work, frees, and reports failure (unlike the destructor).
  void destroy() {
    if (comm_ == nullptr) return;
    detail::check(tidalCommDestroy(std::exchange(comm_, nullptr)), "tidalCommDestroy", nullptr);
  }

  // Stops outstanding work (blocked calls on other threads return an error)
  // and frees. Safe to call while another thread is inside a collective.
  void abort() {
    if (comm_ == nullptr) return;
    detail::check(tidalCommAbort(std::exchange(comm_, nullptr)), "tidalCommAbort", nullptr);
  }

  int rank() const {
    int r = -1;
    detail::check(tidalCommUserRank(handle("rank"), &r), "tidalCommUserRank", comm_);
    return r;
  }
  int size() const {
    int n = -1;
    detail::check(tidalCommCount(handle("size"), &n), "tidalCommCount", comm_);
    return n;
  }
  // tidalSuccess while healthy, else the error that broke the communicator.
  tidalResult_t asyncError() const {
    tidalResult_t e = tidalSuccess;
    detail::check(tidalCommGetAsyncError(handle("asyncError"), &e), "tidalCommGetAsyncError",
                  comm_);
    return e;
  }

  // --- raw overloads: exactly the C API, throwing instead of returning ---

  void allReduce(const void* send, void* recv, size_t count, tidalDataType_t type, tidalRedOp_t op,
                 void* stream = nullptr) {
    detail::check(tidalAllReduce(send, recv, count, type, op, handle("allReduce"), stream),
                  "tidalAllReduce", comm_);
  }
  void allGather(const void* send, void* recv, size_t sendCount, tidalDataType_t type,
                 void* stream = nullptr) {
    detail::check(tidalAllGather(send, recv, sendCount, type, handle("allGather"), stream),
                  "tidalAllGather", comm_);
  }
  void reduceScatter(const void* send, void* recv, size_t recvCount, tidalDataType_t type,
                     tidalRedOp_t op, void* stream = nullptr) {
    detail::check(
        tidalReduceScatter(send, recv, recvCount, type, op, handle("reduceScatter"), stream),
        "tidalReduceScatter", comm_);
  }
  void broadcast(const void* send, void* recv, size_t count, tidalDataType_t type, int root,
                 void* stream = nullptr) {
    detail::check(tidalBroadcast(send, recv, count, type, root, handle("broadcast"), stream),
                  "tidalBroadcast", comm_);
  }
  void reduce(const void* send, void* recv, size_t count, tidalDataType_t type, tidalRedOp_t op,
              int root, void* stream = nullptr) {
    detail::check(tidalReduce(send, recv, count, type, op, root, handle("reduce"), stream),
                  "tidalReduce", comm_);
  }
  void barrier(void* stream = nullptr) {
    detail::check(tidalBarrier(handle("barrier"), stream), "tidalBarrier", comm_);
  }

  // --- span overloads: element type and count from the spans, sizes checked ---
  // T is deduced from the receive span alone (std::type_identity_t blocks it
  // on the send side), so a std::span<float> or a std::vector<float> converts
  // to the send span without help.

  template <Element T>
  requires(!std::is_const_v<T>) void allReduce(std::type_identity_t<std::span<const T>> send,
                                               std::span<T> recv, tidalRedOp_t op = tidalSum,
                                               void* stream = nullptr) {
    sameSize("allReduce", send.size(), recv.size());
    allReduce(send.data(), recv.data(), recv.size(), dataTypeOf<T>, op, stream);
  }
  template <Element T>
  requires(!std::is_const_v<T>) void allReduce(std::span<T> inPlace, tidalRedOp_t op = tidalSum,
                                               void* stream = nullptr) {
    allReduce(inPlace.data(), inPlace.data(), inPlace.size(), dataTypeOf<T>, op, stream);
  }

  // recv holds size() blocks of send.size() elements, rank r's block at r.
  template <Element T>
  requires(!std::is_const_v<T>) void allGather(std::type_identity_t<std::span<const T>> send,
                                               std::span<T> recv, void* stream = nullptr) {
    sameSize("allGather", send.size() * static_cast<size_t>(size()), recv.size());
    allGather(send.data(), recv.data(), send.size(), dataTypeOf<T>, stream);
  }

  // send holds size() blocks of recv.size() elements; rank r gets block r reduced.
  template <Element T>
  requires(!std::is_const_v<T>) void reduceScatter(std::type_identity_t<std::span<const T>> send,
                                                   std::span<T> recv, tidalRedOp_t op = tidalSum,
                                                   void* stream = nullptr) {
    sameSize("reduceScatter", recv.size() * static_cast<size_t>(size()), send.size());
    reduceScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>, op, stream);
  }

  // send is read on root only (other ranks may pass an empty span).
  template <Element T>
  requires(!std::is_const_v<T>) void broadcast(std::type_identity_t<std::span<const T>> send,
                                               std::span<T> recv, int root,
                                               void* stream = nullptr) {
    if (rank() == root) sameSize("broadcast", send.size(), recv.size());
    broadcast(send.empty() ? nullptr : send.data(), recv.data(), recv.size(), dataTypeOf<T>, root,
              stream);
  }
  template <Element T>
  requires(!std::is_const_v<T>) void broadcast(std::span<T> inPlace, int root,
                                               void* stream = nullptr) {
    broadcast(inPlace.data(), inPlace.data(), inPlace.size(), dataTypeOf<T>, root, stream);
  }

  // recv is written on root only (other ranks may pass an empty span).
  template <Element T>
  requires(!std::is_const_v<T>) void reduce(std::type_identity_t<std::span<const T>> send,
                                            std::span<T> recv, int root, tidalRedOp_t op = tidalSum,
                                            void* stream = nullptr) {
    if (rank() == root) sameSize("reduce", send.size(), recv.size());
    reduce(send.data(), recv.empty() ? nullptr : recv.data(), send.size(), dataTypeOf<T>, op, root,
           stream);
  }
  template <Element T>
  requires(!std::is_const_v<T>) void reduce(std::span<T> inPlace, int root,
                                            tidalRedOp_t op = tidalSum, void* stream = nullptr) {
    reduce(inPlace.data(), inPlace.data(), inPlace.size(), dataTypeOf<T>, op, root, stream);
  }

 private:
  // An empty (moved-from, destroyed, aborted) communicator is a usage error
  // here rather than a NULL handed to the C API.
  tidalComm_t handle(const char* what) const {
    if (comm_ == nullptr) {
      throw Error(tidalInvalidUsage, std::string("Communicator::") + what +
                                         " on an empty communicator (moved from, destroyed "
                                         "or aborted)");
    }
    return comm_;
  }

  static void sameSize(const char* what, size_t expected, size_t got) {
    if (expected != got) {
      detail::invalid(std::string("Communicator::") + what + ": receive/send sizes disagree (" +
                      std::to_string(expected) + " expected, " + std::to_string(got) + " given)");
    }
  }

  void reset() noexcept {
    if (comm_ != nullptr) tidalCommDestroy(std::exchange(comm_, nullptr));
  }

  tidalComm_t comm_ = nullptr;
};

}  // namespace tidal

#endif  // TIDAL_TIDAL_HPP_
