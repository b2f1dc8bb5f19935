#include "transports/ib/ib_device.h"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "transports/ib/loopback_flush.h"

namespace tidal::ib {

namespace {

const char* portStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN:
      return "DOWN";
    case IBV_PORT_INIT:
      return "INIT";
    case IBV_PORT_ARMED:
      return "ARMED";
    case IBV_PORT_ACTIVE:
      return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "ACTIVE_DEFER";
    default:
      return "NOP";
  }
}

// Closes a device context on every path out of a scope.
struct ContextCloser {
  const VerbsApi& api;
  ibv_context* context;
  ~ContextCloser() {
    if (context) api.closeDevice(context);
  }
};

bool isFatal(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_SRQ_ERR:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string sysfsPortDir(const std::string& device, int port) {
  return fmt::format("/sys/class/infiniband/{}/ports/{}", device, port);
}

PortScan scanPorts(const VerbsApi& api, const HcaSpec& spec, const std::string& sysfsRoot) {
  PortScan scan;
  // Without the kernel's uverbs interface libibverbs would only complain
  // on stderr; say it plainly instead.
  std::error_code ec;
  if (!std::filesystem::exists(sysfsRoot + "/class/infiniband_verbs", ec)) {
    scan.seen = "no RDMA device: the kernel has no uverbs (/sys/class/infiniband_verbs is missing)";
    return scan;
  }
  int count = 0;
  ibv_device** list = api.getDeviceList(&count);
  if (list == nullptr || count == 0) {
    if (list) api.freeDeviceList(list);
    scan.seen = "no RDMA device: ibv_get_device_list found none";
    return scan;
  }
  auto note = [&](const std::string& what) { scan.seen += (scan.seen.empty() ? "" : ", ") + what; };
  for (int d = 0; d < count; ++d) {
    const std::string name = api.getDeviceName(list[d]);
    if (list[d]->node_type == IBV_NODE_UNSPECIFIED) {
      // EFA (and other non-InfiniBand, non-RoCE devices): no RC queue pairs.
      note(
          fmt::format("{} (not InfiniBand or RoCE: node type unspecified, as EFA's; TIDAL_NET=ofi "
                      "drives EFA)",
                      name));
      continue;
    }
    ContextCloser ctx{api, api.openDevice(list[d])};
    if (ctx.context == nullptr) {
      note(fmt::format("{} (cannot open: {})", name, errnoText(errno)));
      continue;
    }
    ibv_device_attr attr{};
    if (api.queryDevice(ctx.context, &attr) != 0) {
      note(fmt::format("{} (ibv_query_device failed)", name));
      continue;
    }
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ++scan.ports;
      ibv_port_attr pa{};
      if (api.queryPort(ctx.context, static_cast<uint8_t>(p), &pa) != 0) {
        note(fmt::format("{}:{} (ibv_query_port failed)", name, p));
        continue;
      }
      if (!hcaMatches(spec, name, p)) {
        note(fmt::format("{}:{} (not selected by TIDAL_IB_HCA)", name, p));
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        note(fmt::format("{}:{} ({})", name, p, portStateName(pa.state)));
        continue;
      }
      note(fmt::format("{}:{} (ACTIVE)", name, p));
      scan.usable.push_back({name, p, pa.link_layer == IBV_LINK_LAYER_ETHERNET});
    }
  }
  api.freeDeviceList(list);
  return scan;
}

IbDevice::IbDevice(const VerbsApi& api, int rank, GpuDirect gpu)
    : api_(api), rank_(rank), gpu_(gpu) {}

std::shared_ptr<IbDevice> IbDevice::open(const VerbsApi& api, const PortCandidate& port,
                                         const GidPolicy& policy, const std::string& gdrSetting,
                                         int rank, const std::optional<GdrDistance>& gdrDistance) {
  std::shared_ptr<IbDevice> d(
      new IbDevice(api, rank, GpuDirect::detect(api, gdrSetting, rank, gdrDistance)));
  d->name_ = port.device;
  d->port_ = port.port;
  d->ethernet_ = port.ethernet;
  int count = 0;
  ibv_device** list = api.getDeviceList(&count);
  for (int i = 0; list && i < count && !d->context_; ++i) {
    if (port.device == api.getDeviceName(list[i])) d->context_ = api.openDevice(list[i]);
  }
  if (list) api.freeDeviceList(list);
  const std::string where = fmt::format("rank {}: ib {} port {}", rank, port.device, port.port);
  if (d->context_ == nullptr) fail(tidalSystemError, "{}: cannot open the device", where);
  if (api.queryDevice(d->context_, &d->deviceAttr_) != 0 ||
      api.queryPort(d->context_, static_cast<uint8_t>(port.port), &d->portAttr_) != 0) {
    fail(tidalSystemError, "{}: querying the device failed: {}", where, errnoText(errno));
  }
  if (d->ethernet_) {
    d->gid_ = chooseRoceGid(readGidTable(sysfsPortDir(port.device, port.port)), policy,
                            fmt::format("{} port {}", port.device, port.port), rank);
  } else {
    // InfiniBand routes by LID; the GID (index 0 unless overridden) only
    // names the port in messages and fills the GRH when one is used.
    d->gid_.index = policy.overrideIndex >= 0 ? policy.overrideIndex : 0;
    ibv_gid g{};
    if (api.queryGid(d->context_, static_cast<uint8_t>(port.port), d->gid_.index, &g) != 0) {
      fail(tidalInvalidArgument, "{}: TIDAL_IB_GID_INDEX={} cannot be read: {}", where,
           d->gid_.index, errnoText(errno));
    }
    std::copy(g.raw, g.raw + 16, d->gid_.raw.begin());
    d->gid_.type = "IB";
  }
  d->pd_ = api.allocPd(d->context_);
  if (d->pd_ == nullptr)
    fail(tidalSystemError, "{}: ibv_alloc_pd failed: {}", where, errnoText(errno));
  d->cache_ = makeRegistrationCache(api, d->pd_, where);
  d->countersAtStart_ = readHwCounters(sysfsPortDir(port.device, port.port));
  // Non-blocking, so the watcher can poll() it together with its stop fd.
  const int flags = ::fcntl(d->context_->async_fd, F_GETFL);
  ::fcntl(d->context_->async_fd, F_SETFL, flags | O_NONBLOCK);
  d->watcher_ = std::thread([raw = d.get()] { raw->watchAsyncEvents(); });
  TIDAL_INFO(Net, "rank {}: ib using {} (GID {}), GDR {}: {}", rank, d->pathText(),
             d->gid_.address(), d->gpu_.modeName(), d->gpu_.reason());
  return d;
}

IbDevice::~IbDevice() {
  if (watcher_.joinable()) {
    stopFd_.signal();
    watcher_.join();
  }
  if (!name_.empty() && cache_) {
    TIDAL_INFO(Net, "rank {}: ib {} registration cache: {}", rank_, pathText(),
               cache_->statsText());
    TIDAL_INFO(Net, "rank {}: ib {} hw_counters during this communicator: {}", rank_, pathText(),
               counterDeltaText(countersAtStart_, readHwCounters(sysfsPortDir(name_, port_))));
  }
  flush_.reset();
  cache_.reset();
  if (pd_) api_.deallocPd(pd_);
  if (context_) api_.closeDevice(context_);
}

std::string IbDevice::pathText() const {
  if (!ethernet_) return fmt::format("{}:{} IB lid {}", name_, port_, portAttr_.lid);
  return fmt::format("{}:{} {} gid {}", name_, port_, gid_.roceV2() ? "RoCEv2" : "RoCEv1",
                     gid_.index);
}

std::string IbDevice::whereText() const {
  return fmt::format("{} port {} GID index {} ({})", name_, port_, gid_.index, gid_.address());
}

std::string IbDevice::asyncError() const {
  std::lock_guard lock(mutex_);
  return asyncError_;
}

void IbDevice::watchQp(uint32_t qpNum, std::string owner) {
  std::lock_guard lock(mutex_);
  qpOwners_[qpNum] = std::move(owner);
}

void IbDevice::unwatchQp(uint32_t qpNum) {
  std::lock_guard lock(mutex_);
  qpOwners_.erase(qpNum);
}

void IbDevice::flushWrites(const RegistrationCache::Entry& registration, const void* addr) {
  if (registration.kind != MemoryKind::Cuda) return;
  if (!flush_) flush_ = std::make_unique<LoopbackFlush>(*this);
  flush_->flush(registration.mr, addr);
}

void IbDevice::transferStarted() {
  if (inFlight_++ == 0) cache_->retireTransient();
}

void IbDevice::recordError(std::string text) {
  {
    std::lock_guard lock(mutex_);
    if (!asyncError_.empty()) return;
    asyncError_ = std::move(text);
  }
  hasAsyncError_ = true;
  errorFd_.signal();
}

void IbDevice::watchAsyncEvents() {
  for (;;) {
    pollfd fds[2] = {{context_->async_fd, POLLIN, 0}, {stopFd_.fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    ibv_async_event event{};
    while (api_.getAsyncEvent(context_, &event) == 0) {
      const char* name = api_.eventTypeStr(event.event_type);
      std::string subject;
      bool ours = true;
      switch (event.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_QP_LAST_WQE_REACHED: {
          const uint32_t qpn = event.element.qp->qp_num;
          std::lock_guard lock(mutex_);
          const auto it = qpOwners_.find(qpn);
          subject = fmt::format("QP {} ({})", qpn, it == qpOwners_.end() ? "not ours" : it->second);
          ours = it != qpOwners_.end();
          break;
        }
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_GID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
          subject = fmt::format("port {}", event.element.port_num);
          ours = event.element.port_num == port_;
          break;
        default:
          subject = "the device";
          break;
      }
      const std::string text =
          fmt::format("rank {}: ib {} reported {} on {}", rank_, name_, name, subject);
      if (isFatal(event.event_type) && ours) {
        TIDAL_WARN(Net, "{}", text);
        recordError(text);
      } else {
        TIDAL_INFO(Net, "{}", text);
      }
      api_.ackAsyncEvent(&event);
    }
  }
}

}  // namespace tidal::ib
