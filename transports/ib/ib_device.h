// One opened RDMA port: device context, protection domain, the GID in use,
// the registration cache, GPUDirect support, the port counters, and a thread
// that watches the device's asynchronous events.
//
// Async events are how a NIC reports what no completion can: the port went
// down (IBV_EVENT_PORT_ERR), a QP hit a fatal error outside any work request,
// the device itself died (IBV_EVENT_DEVICE_FATAL). The watcher records the
// first such error and makes errorFd() readable; every connection puts that
// fd in its poll set and checks asyncError() in progress(), so an engine
// asleep in poll() wakes and the collective fails with the event's name,
// the device, the port and the peer the failing QP belonged to.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transports/ib/device_select.h"
#include "transports/ib/event_fd.h"
#include "transports/ib/gpu_direct.h"
#include "transports/ib/hw_counters.h"
#include "transports/ib/registration_cache.h"
#include "transports/ib/verbs_api.h"

namespace tidal::ib {

class LoopbackFlush;

struct PortCandidate {
  std::string device;
  int port = 0;
  bool ethernet = false;
};

struct PortScan {
  std::vector<PortCandidate> usable;  // active, selected by TIDAL_IB_HCA
  std::string seen;                   // every port and why it was skipped, for messages
  int ports = 0;                      // ports looked at
};

// Lists the ports of every device. Never throws for a missing device: an
// empty result says "no RDMA here" and `seen` says what was looked at.
// Devices whose node type is unspecified (AWS EFA, whose queue pairs are SRD,
// not RC) are skipped unopened: ib would fail on them at connect, and the
// ofi transport is theirs. `sysfsRoot` is where sysfs is (tests).
PortScan scanPorts(const VerbsApi& api, const HcaSpec& spec, const std::string& sysfsRoot = "/sys");

std::string sysfsPortDir(const std::string& device, int port);

class IbDevice {
 public:
  // Opens `port` and picks its GID (RoCE) per `policy`. Throws
  // InvalidArgument for a bad GID choice, SystemError when verbs fail.
  // `gdrDistance`: the topology's verdict on GDR for this port (gpu_direct.h).
  static std::shared_ptr<IbDevice> open(
      const VerbsApi& api, const PortCandidate& port, const GidPolicy& policy,
      const std::string& gdrSetting, int rank,
      const std::optional<GdrDistance>& gdrDistance = std::nullopt);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  const VerbsApi& api() const { return api_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  int port() const { return port_; }
  int rank() const { return rank_; }
  bool ethernet() const { return ethernet_; }
  ibv_mtu activeMtu() const { return portAttr_.active_mtu; }
  uint16_t lid() const { return portAttr_.lid; }
  uint32_t maxMessageBytes() const { return portAttr_.max_msg_sz; }
  const GidEntry& gid() const { return gid_; }
  const ibv_device_attr& deviceAttr() const { return deviceAttr_; }
  const GpuDirect& gpu() const { return gpu_; }
  RegistrationCache& cache() { return *cache_; }

  // "rxe0:1 RoCEv2 gid 1" or "mlx5_0:1 IB lid 12".
  std::string pathText() const;
  // "rxe0 port 1 GID index 1 (::ffff:10.0.0.1)" for errors.
  std::string whereText() const;

  // Readable once an async error was recorded.
  int errorFd() const { return errorFd_.fd(); }
  // The first async error, or empty. hasAsyncError() is the cheap check.
  bool hasAsyncError() const { return hasAsyncError_.load(std::memory_order_relaxed); }
  std::string asyncError() const;
  // Names the owner of a QP in async-error messages ("connection to rank 3").
  void watchQp(uint32_t qpNum, std::string owner);
  void unwatchQp(uint32_t qpNum);

  // Orders the NIC's writes into GPU memory before a kernel reads them
  // (loopback_flush.h); a no-op for host memory.
  void flushWrites(const RegistrationCache::Entry& registration, const void* addr);

  // Transfers in flight over every connection of this device. When a
  // connection starts a transfer while none is in flight, registrations of
  // user memory from the previous call are retired (registration_cache.h).
  void transferStarted();
  void transferFinished() { --inFlight_; }

 private:
  IbDevice(const VerbsApi& api, int rank, GpuDirect gpu);
  void watchAsyncEvents();
  void recordError(std::string text);

  const VerbsApi& api_;
  int rank_;
  std::string name_;
  int port_ = 0;
  bool ethernet_ = false;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_port_attr portAttr_{};
  ibv_device_attr deviceAttr_{};
  GidEntry gid_;
  GpuDirect gpu_;
  std::unique_ptr<RegistrationCache> cache_;
  std::unique_ptr<LoopbackFlush> flush_;  // made on first use
  CounterSnapshot countersAtStart_;
  int64_t inFlight_ = 0;

  EventFd errorFd_;
  EventFd stopFd_;
  std::thread watcher_;
  mutable std::mutex mutex_;
  std::string asyncError_;
  std::atomic<bool> hasAsyncError_{false};
  std::map<uint32_t, std::string> qpOwners_;
};

}  // namespace tidal::ib
