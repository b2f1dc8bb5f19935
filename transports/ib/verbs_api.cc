#include "transports/ib/verbs_api.h"

#include <dlfcn.h>

#include <cstring>

#include <fmt/format.h>

namespace tidal::ib {

namespace {

struct Loaded {
  VerbsApi api{};
  bool ok = false;
  std::string why;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn*& out, std::string& why) {
  out = reinterpret_cast<Fn*>(::dlsym(lib, name));
  if (out == nullptr && why.empty()) why = fmt::format("libibverbs.so.1 has no symbol {}", name);
  return out != nullptr;
}

Loaded loadOnce() {
  Loaded l;
  // RTLD_NODELETE: providers keep pointers into the library after any
  // dlclose, and nothing here ever unloads it.
  void* lib = ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    l.why = fmt::format(
        "libibverbs.so.1 not found ({}); install rdma-core (libibverbs1 and "
        "ibverbs-providers)",
        e ? e : "dlopen failed");
    return l;
  }
  VerbsApi& a = l.api;
  std::string& w = l.why;
  bool ok = true;
  ok &= resolve(lib, "ibv_get_device_list", a.getDeviceList, w);
  ok &= resolve(lib, "ibv_free_device_list", a.freeDeviceList, w);
  ok &= resolve(lib, "ibv_get_device_name", a.getDeviceName, w);
  ok &= resolve(lib, "ibv_open_device", a.openDevice, w);
  ok &= resolve(lib, "ibv_close_device", a.closeDevice, w);
  ok &= resolve(lib, "ibv_query_device", a.queryDevice, w);
  ok &= resolve(lib, "ibv_query_port", a.queryPortCompat, w);
  ok &= resolve(lib, "ibv_query_gid", a.queryGid, w);
  ok &= resolve(lib, "ibv_alloc_pd", a.allocPd, w);
  ok &= resolve(lib, "ibv_dealloc_pd", a.deallocPd, w);
  ok &= resolve(lib, "ibv_reg_mr", a.regMr, w);
  ok &= resolve(lib, "ibv_dereg_mr", a.deregMr, w);
  ok &= resolve(lib, "ibv_create_comp_channel", a.createCompChannel, w);
  ok &= resolve(lib, "ibv_destroy_comp_channel", a.destroyCompChannel, w);
  ok &= resolve(lib, "ibv_create_cq", a.createCq, w);
  ok &= resolve(lib, "ibv_destroy_cq", a.destroyCq, w);
  ok &= resolve(lib, "ibv_get_cq_event", a.getCqEvent, w);
  ok &= resolve(lib, "ibv_ack_cq_events", a.ackCqEvents, w);
  ok &= resolve(lib, "ibv_create_qp", a.createQp, w);
  ok &= resolve(lib, "ibv_modify_qp", a.modifyQp, w);
  ok &= resolve(lib, "ibv_destroy_qp", a.destroyQp, w);
  ok &= resolve(lib, "ibv_get_async_event", a.getAsyncEvent, w);
  ok &= resolve(lib, "ibv_ack_async_event", a.ackAsyncEvent, w);
  ok &= resolve(lib, "ibv_event_type_str", a.eventTypeStr, w);
  ok &= resolve(lib, "ibv_wc_status_str", a.wcStatusStr, w);
  // Optional: GPUDirect through dma-buf needs it, nothing else does.
  a.regDmabufMr = reinterpret_cast<decltype(a.regDmabufMr)>(::dlsym(lib, "ibv_reg_dmabuf_mr"));
  l.ok = ok;
  return l;
}

}  // namespace

int VerbsApi::queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  std::memset(attr, 0, sizeof *attr);
  verbs_context* vctx = verbs_get_ctx_op(context, query_port);
  if (vctx == nullptr) return queryPortCompat(context, port, attr);
  return vctx->query_port(context, port, attr, sizeof *attr);
}

const VerbsApi* VerbsApi::load(std::string* why) {
  static const Loaded loaded = loadOnce();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace tidal::ib
