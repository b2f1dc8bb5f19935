#include "transports/ofi/ofi_endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>
#include <rdma/fi_tagged.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "core/socket.h"
#include "transports/ofi/stale_shm_regions.h"

namespace tidal::ofi {

namespace {

// How long a sleeping wait sleeps when the provider cannot be slept on (waitFd).
constexpr auto kProgressStep = std::chrono::microseconds(50);

// 1.10: FI_MR_HMEM and the fi_context2 mode bit exist.
constexpr uint32_t kApiVersion = FI_VERSION(1, 10);
// Every mr_mode bit this endpoint knows how to honour. FI_MR_VIRT_ADDR,
// FI_MR_ALLOCATED and FI_MR_PROV_KEY only constrain remote access (RMA),
// which this transport does not use; FI_MR_LOCAL and FI_MR_ENDPOINT change
// how a send or receive is posted and are handled in describeMemory; with
// host memory only, FI_MR_HMEM asks nothing more.
constexpr int kMrModes =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT | FI_MR_HMEM;
// Completions read per fi_cq_read.
constexpr size_t kCqBatch = 16;
// EFA's "retry receiver-not-ready forever" (7, the verbs encoding): a
// receiver that has not posted its buffer yet delays a send instead of
// failing it.
constexpr size_t kEfaRnrRetryInfinite = 7;

// The hints every search uses; `provider` may be empty. `transmitComplete`
// asks that a send complete only once the peer's provider has its data
// (FI_TRANSMIT_COMPLETE), not when it was queued (see SendCompletion).
// Completion is not enough when the message arrived before its receive was
// posted: the net provider drops such a message once its sender's endpoint
// closes, which is why a destroyed communicator keeps its endpoint open
// (comm/close_when_all_done.h).
fi_info* makeHints(const OfiApi& api, const std::string& provider, bool transmitComplete) {
  fi_info* hints = api.dupinfo(nullptr);  // fi_allocinfo, without its inline
  if (hints == nullptr) fail(tidalSystemError, "fi_dupinfo(NULL) failed: out of memory");
  hints->caps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = kMrModes;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (transmitComplete) hints->tx_attr->op_flags = FI_TRANSMIT_COMPLETE;
  if (!provider.empty()) hints->fabric_attr->prov_name = ::strdup(provider.c_str());
  return hints;
}

std::string offeredProviders(const OfiApi& api) {
  fi_info* hints = makeHints(api, "", false);
  fi_info* list = nullptr;
  const int ret = api.getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list);
  api.freeinfo(hints);
  if (ret != 0) return "none";
  std::set<std::string> names;
  for (fi_info* i = list; i; i = i->next) names.insert(i->fabric_attr->prov_name);
  api.freeinfo(list);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// fi_tostr writes into a buffer of its own; one caller at a time.
std::string toText(const OfiApi& api, const void* data, fi_type type) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  const char* s = api.tostr(data, type);
  std::string text = s ? s : "?";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Providers whose default send completion already means that the data no
// longer needs this process, so that Auto leaves it: net (xnet) reports a
// send when all of it is in the kernel's socket buffer (xnet_progress_tx in
// libfabric 1.17; FI_TRANSMIT_COMPLETE makes it wait for the receiver's
// acknowledgement instead). Not tcp;ofi_rxm: rxm completes a small send at
// once while its bytes may still wait in the process for the socket.
bool defaultCompletionSuffices(const std::string& provider) { return provider == "net"; }

}  // namespace

SendCompletion parseSendCompletion(const std::string& text, int rank) {
  if (text == "auto" || text.empty()) return SendCompletion::Auto;
  if (text == "transmit") return SendCompletion::Transmit;
  if (text == "provider") return SendCompletion::Provider;
  fail(tidalInvalidArgument,
       "rank {}: TIDAL_OFI_COMPLETION='{}' is not one of auto, transmit, provider", rank, text);
}

Endpoint::Endpoint(const OfiApi& api, int rank, const std::string& provider, bool registerAlways,
                   SendCompletion completion)
    : api_(api), rank_(rank), registerAlways_(registerAlways) {
  // With FI_TRANSMIT_COMPLETE first (unless told not to); a provider
  // without it is still used, and its path line says so.
  int found = -FI_ENODATA;
  const std::vector<bool> tries = completion == SendCompletion::Provider
                                      ? std::vector<bool>{false}
                                      : std::vector<bool>{true, false};
  for (const bool transmitComplete : tries) {
    fi_info* hints = makeHints(api, provider, transmitComplete);
    found = api.getinfo(kApiVersion, nullptr, nullptr, 0, hints, &info_);
    api.freeinfo(hints);
    transmitComplete_ = transmitComplete;
    if (found == 0 && info_ != nullptr) break;
  }
  if (found != 0 || info_ == nullptr) {
    const char* envProvider = std::getenv("FI_PROVIDER");
    const std::string asked = !provider.empty() ? fmt::format("TIDAL_OFI_PROVIDER='{}'", provider)
                              : envProvider     ? fmt::format("FI_PROVIDER='{}'", envProvider)
                                                : std::string("any provider");
    fail(tidalInvalidArgument,
         "rank {}: ofi: fi_getinfo offers no reliable-datagram endpoint (FI_EP_RDM, FI_TAGGED) "
         "for {}: {}; providers offered: {}",
         rank, asked, api.errorText(found), offeredProviders(api));
  }
  // The endpoint takes its default send flags from info_ (fi_endpoint).
  if (completion == SendCompletion::Auto && transmitComplete_ &&
      defaultCompletionSuffices(info_->fabric_attr->prov_name)) {
    info_->tx_attr->op_flags &= ~static_cast<uint64_t>(FI_TRANSMIT_COMPLETE);
    transmitComplete_ = false;
  }
  watch_ =
      std::make_unique<StuckCallWatch>(rank, fmt::format("ofi {}", info_->fabric_attr->prov_name),
                                       std::chrono::seconds(timeoutSeconds()));
  try {
    int ret = api.fabric(info_->fabric_attr, &fabric_, nullptr);
    if (ret) failCall("fi_fabric", ret);
    if ((ret = fi_domain(fabric_, info_, &domain_, nullptr))) failCall("fi_domain", ret);

    txCapacity_ = std::max<size_t>(1, info_->tx_attr->size);
    rxCapacity_ = std::max<size_t>(1, info_->rx_attr->size);
    fi_cq_attr cqAttr{};
    cqAttr.size = txCapacity_ + rxCapacity_;
    cqAttr.format = FI_CQ_FORMAT_TAGGED;
    cqAttr.wait_obj = FI_WAIT_FD;
    if (fi_cq_open(domain_, &cqAttr, &cq_, nullptr) == 0) {
      if (fi_control(&cq_->fid, FI_GETWAIT, &cqFd_) != 0) cqFd_ = -1;
    } else {
      cqAttr.wait_obj = FI_WAIT_NONE;
      if ((ret = fi_cq_open(domain_, &cqAttr, &cq_, nullptr))) failCall("fi_cq_open", ret);
    }
    fi_av_attr avAttr{};
    avAttr.type =
        info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : info_->domain_attr->av_type;
    if ((ret = fi_av_open(domain_, &avAttr, &av_, nullptr))) failCall("fi_av_open", ret);
    if ((ret = fi_endpoint(domain_, info_, &ep_, nullptr))) failCall("fi_endpoint", ret);
    if ((ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV))) failCall("fi_ep_bind(cq)", ret);
    if ((ret = fi_ep_bind(ep_, &av_->fid, 0))) failCall("fi_ep_bind(av)", ret);
    const std::string prov = info_->fabric_attr->prov_name;
    if (prov.find("efa") != std::string::npos) {
      size_t rnr = kEfaRnrRetryInfinite;
      ret = fi_setopt(&ep_->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &rnr, sizeof rnr);
      if (ret) {
        TIDAL_WARN(Net, "rank {}: ofi {}: setting the RNR retry failed: {}", rank_, prov,
                   api_.errorText(ret));
      }
    }
    // A region an earlier process with our pid left (SIGKILLed) would make
    // fi_enable fail with EBUSY (stale_shm_regions.h).
    for (const std::string& stale :
         removeStaleShmRegions("/dev/shm", ::getpid(), ::getuid(), processStartTime())) {
      TIDAL_WARN(Net,
                 "rank {}: removed /dev/shm/{}, a libfabric shm region left by an earlier process "
                 "with this pid",
                 rank_, stale);
    }
    if ((ret = fi_enable(ep_))) failCall("fi_enable", ret);

    uint8_t name[kMaxConnectHandleBytes];
    size_t len = sizeof name;
    if ((ret = fi_getname(&ep_->fid, name, &len))) failCall("fi_getname", ret);
    address_.assign(name, name + len);

    readyFd_ = ::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
    if (readyFd_ < 0) fail(tidalSystemError, "rank {}: ofi: eventfd: {}", rank_, errnoText(errno));
    stepFd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (stepFd_ < 0) {
      fail(tidalSystemError, "rank {}: ofi: timerfd_create: {}", rank_, errnoText(errno));
    }

    maxMessageBytes_ = std::max<size_t>(1, info_->ep_attr->max_msg_size);
    const uint64_t mrMode = static_cast<uint64_t>(info_->domain_attr->mr_mode);
    localMr_ = registerAlways_ || (mrMode & FI_MR_LOCAL) != 0;
    if (localMr_) {
      RegistrationCache::Backend backend;
      backend.tryRegister = [this](uintptr_t start, uintptr_t end, bool writable, int& err) {
        return registerWindow(start, end, writable, err);
      };
      backend.deregister = [](fid_mr* mr) { fi_close(&mr->fid); };
      backend.failed = [this](uintptr_t start, uintptr_t end, int err) {
        fail(tidalSystemError,
             "rank {}: ofi {}: fi_mr_reg of {} bytes at {:#x} failed: {}; the locked-memory "
             "limit (ulimit -l) is {}",
             rank_, info_->fabric_attr->prov_name, end - start, start, api_.errorText(-err),
             memlockText());
      };
      cache_ = std::make_unique<RegistrationCache>(std::move(backend));
    }
    pathText_ = fmt::format("{} fabric={} domain={} addr={} mr=[{}] completion={}{}", prov,
                            info_->fabric_attr->name ? info_->fabric_attr->name : "?",
                            info_->domain_attr->name ? info_->domain_attr->name : "?",
                            toText(api_, &info_->addr_format, FI_TYPE_ADDR_FORMAT),
                            toText(api_, &info_->domain_attr->mr_mode, FI_TYPE_MR_MODE),
                            transmitComplete_ ? "transmit" : "provider-default",
                            registerAlways_ ? " register-always" : "");
  } catch (...) {
    close();
    throw;
  }
}

Endpoint::~Endpoint() { close(); }

void Endpoint::close() {
  // The endpoint first: closing it ends every operation still posted, so
  // no provider touches an Operation or a registration after this.
  if (ep_) {
    StuckCallWatch::Scope watched(*watch_, "fi_close(endpoint)");
    fi_close(&ep_->fid);
  }
  ep_ = nullptr;
  for (auto& op : operations_) op->registration = nullptr;
  if (cache_) TIDAL_INFO(Net, "rank {}: ofi registration cache: {}", rank_, cache_->statsText());
  cache_.reset();  // closes every registration, before the domain
  if (av_) fi_close(&av_->fid);
  av_ = nullptr;
  if (cq_) fi_close(&cq_->fid);
  cq_ = nullptr;
  if (domain_) fi_close(&domain_->fid);
  domain_ = nullptr;
  if (fabric_) fi_close(&fabric_->fid);
  fabric_ = nullptr;
  if (info_) api_.freeinfo(info_);
  info_ = nullptr;
  if (readyFd_ >= 0) ::close(readyFd_);
  readyFd_ = -1;
  if (stepFd_ >= 0) ::close(stepFd_);
  stepFd_ = -1;
}

void Endpoint::failCall(const char* call, int ret) const {
  fail(tidalSystemError, "rank {}: ofi {}: {} failed: {}", rank_,
       info_ ? info_->fabric_attr->prov_name : "?", call, api_.errorText(ret));
}

fi_addr_t Endpoint::insertPeer(int peer, const ConnectHandle& handle) {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(peer); it != peers_.end()) return it->second;
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  StuckCallWatch::Scope watched(*watch_, "fi_av_insert", peer);
  const int n = fi_av_insert(av_, handle.data(), 1, &addr, 0, nullptr);
  if (n != 1 || addr == FI_ADDR_NOTAVAIL) {
    fail(tidalRemoteError,
         "rank {}: ofi {}: the address vector refused the address of rank {} ({} bytes): {}", rank_,
         info_->fabric_attr->prov_name, peer, handle.size(),
         n < 0 ? api_.errorText(n) : std::string("not inserted"));
  }
  peers_[peer] = addr;
  return addr;
}

std::string Endpoint::peerText(fi_addr_t addr) {
  std::lock_guard lock(mutex_);
  uint8_t raw[kMaxConnectHandleBytes];
  size_t rawLen = sizeof raw;
  if (fi_av_lookup(av_, addr, raw, &rawLen) != 0 || rawLen > sizeof raw) return "?";
  char text[256];
  size_t textLen = sizeof text;
  fi_av_straddr(av_, raw, text, &textLen);
  text[sizeof text - 1] = '\0';
  return text;
}

Operation* Endpoint::acquire(CompletionSink& sink, size_t bytes, uint64_t transfer, bool recv) {
  if (free_.empty()) {
    operations_.push_back(std::make_unique<Operation>());
    free_.push_back(operations_.back().get());
  }
  Operation* op = free_.back();
  free_.pop_back();
  *op = Operation{};
  op->sink = &sink;
  op->bytes = bytes;
  op->transfer = transfer;
  op->recv = recv;
  return op;
}

void Endpoint::release(Operation* op) {
  if (op->registration) cache_->release(op->registration);
  op->registration = nullptr;
  op->sink = nullptr;
  (op->recv ? rxInFlight_ : txInFlight_)--;
  free_.push_back(op);
}

// FI_MR_LOCAL: the provider needs a registration's descriptor for every
// local buffer. The registration cache registers page windows around the
// buffer, so the next chunks of it hit; its transient windows are closed
// when a transfer opens while no transfer of any connection is open
// (transferOpened), which is always so between two calls, so nothing stale
// survives a free between calls.
void* Endpoint::describeMemory(Operation& op, const void* buf, size_t bytes) {
  if (!localMr_ || bytes == 0) return nullptr;
  op.registration = cache_->acquire(buf, bytes);
  return fi_mr_desc(op.registration->mr);
}

// A window for the cache: send and receive access (send only where the
// mapping is read-only). `err` is a positive errno value on failure.
fid_mr* Endpoint::registerWindow(uintptr_t start, uintptr_t end, bool writable, int& err) {
  const uint64_t mrMode = static_cast<uint64_t>(info_->domain_attr->mr_mode);
  const uint64_t key = (mrMode & FI_MR_PROV_KEY) ? 0 : nextKey_++;
  const uint64_t access = writable ? (FI_SEND | FI_RECV) : FI_SEND;
  fid_mr* mr = nullptr;
  StuckCallWatch::Scope watched(*watch_, "fi_mr_reg");
  int ret = fi_mr_reg(domain_, reinterpret_cast<void*>(start), end - start, access, 0, key, 0, &mr,
                      nullptr);
  if (ret == 0 && (mrMode & FI_MR_ENDPOINT)) {
    if ((ret = fi_mr_bind(mr, &ep_->fid, 0)) == 0) ret = fi_mr_enable(mr);
    if (ret) fi_close(&mr->fid);
  }
  if (ret) {
    err = -ret;
    return nullptr;
  }
  return mr;
}

Operation* Endpoint::startSend(CompletionSink& sink, const void* buf, size_t bytes, int peer,
                               fi_addr_t dest, uint64_t tag, uint64_t transfer) {
  return start(sink, buf, bytes, transfer, false, [&](void* desc, Operation& op) {
    StuckCallWatch::Scope watched(*watch_, "fi_tsend", peer);
    return fi_tsend(ep_, buf, bytes, desc, dest, tag, &op.context);
  });
}

Operation* Endpoint::startRecv(CompletionSink& sink, void* buf, size_t bytes, int peer,
                               uint64_t tag, uint64_t transfer) {
  return start(sink, buf, bytes, transfer, true, [&](void* desc, Operation& op) {
    StuckCallWatch::Scope watched(*watch_, "fi_trecv", peer);
    return fi_trecv(ep_, buf, bytes, desc, FI_ADDR_UNSPEC, tag, 0, &op.context);
  });
}

template <typename PostCall>
Operation* Endpoint::start(CompletionSink& sink, const void* buf, size_t bytes, uint64_t transfer,
                           bool recv, PostCall&& postCall) {
  std::lock_guard lock(mutex_);
  if ((recv ? rxInFlight_ : txInFlight_) >= (recv ? rxCapacity_ : txCapacity_)) return nullptr;
  ++(recv ? rxInFlight_ : txInFlight_);
  Operation* op = acquire(sink, bytes, transfer, recv);
  try {
    void* desc = describeMemory(*op, buf, bytes);
    const ssize_t ret = postCall(desc, *op);
    if (ret == 0) {
      sink.onStarted(*op);
      return op;
    }
    release(op);
    if (ret == -FI_EAGAIN) return nullptr;
    failCall(recv ? "fi_trecv" : "fi_tsend", static_cast<int>(ret));
  } catch (...) {
    if (op->sink) release(op);
    throw;
  }
}

int Endpoint::poll() {
  std::lock_guard lock(mutex_);
  int done = 0;
  for (;;) {
    fi_cq_tagged_entry entries[kCqBatch];
    ssize_t n = 0;
    {
      StuckCallWatch::Scope watched(*watch_, "fi_cq_read");
      n = fi_cq_read(cq_, entries, kCqBatch);
    }
    if (n == -FI_EAGAIN) return done;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      ssize_t errors = 0;
      {
        StuckCallWatch::Scope watched(*watch_, "fi_cq_readerr");
        errors = fi_cq_readerr(cq_, &err, 0);
      }
      if (errors < 1) return done;
      auto* op = static_cast<Operation*>(err.op_context);
      if (op == nullptr) continue;
      if (op->sink && err.err != FI_ECANCELED) {
        char provText[256] = "";
        const char* detail =
            fi_cq_strerror(cq_, err.prov_errno, err.err_data, provText, sizeof provText);
        op->sink->onError(
            *op, fmt::format("{}: {}{}{}", op->recv ? "receive" : "send", api_.errorText(-err.err),
                             detail ? "; provider: " : "", detail ? detail : ""));
      }
      release(op);
      ++done;
      continue;
    }
    if (n < 0) failCall("fi_cq_read", static_cast<int>(n));
    for (ssize_t i = 0; i < n; ++i) {
      auto* op = static_cast<Operation*>(entries[i].op_context);
      if (op == nullptr) continue;
      if (op->sink) op->sink->onComplete(*op, op->recv ? entries[i].len : op->bytes);
      release(op);
    }
    done += static_cast<int>(n);
    if (static_cast<size_t>(n) < kCqBatch) return done;
  }
}

void Endpoint::transferOpened() {
  if (openTransfers_++ == 0 && cache_) cache_->retireTransient();
}

void Endpoint::transfersClosed(size_t n) { openTransfers_ -= std::min(n, openTransfers_); }

void Endpoint::forget(const std::set<Operation*>& ops) {
  std::lock_guard lock(mutex_);
  StuckCallWatch::Scope watched(*watch_, "fi_cancel");
  for (Operation* op : ops) {
    op->sink = nullptr;
    fi_cancel(&ep_->fid, &op->context);
  }
}

// When the engine's wait goes to sleep: on the CQ's wait fd when the
// provider says nothing needs progress now (fi_trywait), else on a descriptor
// that is readable at once (it has events: progress them without sleeping).
// A CQ without an FD wait object (udp;ofi_rxd here) can never be slept on:
// then the wait sleeps kProgressStep on a timer and progresses again, since
// rxd must be progressed to acknowledge and resend packets. The
// always-readable descriptor, used for that case too before, made such a
// "sleeping" rank spin through poll() and recvmsg(): with 3 ranks on 2 CPUs
// beside one busy process, the correctness suite over udp;ofi_rxd took
// 43-63 s (3.5 s on a quiet machine), and 5.6 s with the step. The step is
// the one the engine sleeps in for planes without descriptors (50 us), and
// it is only taken once a wait has stopped spinning. A failed fi_trywait
// keeps the readable descriptor: stepping there too made the net provider's
// loss of a job's last messages more frequent (that loss is now prevented at
// destroy, comm/close_when_all_done.h).
int Endpoint::waitFd() {
  std::lock_guard lock(mutex_);
  if (cqFd_ < 0) {
    itimerspec step{};  // one shot; arming it again clears an earlier expiry
    step.it_value.tv_nsec = std::chrono::nanoseconds(kProgressStep).count();
    ::timerfd_settime(stepFd_, 0, &step, nullptr);
    return stepFd_;
  }
  fid* fids[1] = {&cq_->fid};
  StuckCallWatch::Scope watched(*watch_, "fi_trywait");
  return fi_trywait(fabric_, fids, 1) == FI_SUCCESS ? cqFd_ : readyFd_;
}

}  // namespace tidal::ofi
