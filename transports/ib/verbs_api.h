// libibverbs, loaded at run time with dlopen.
//
// libtidal does not link rdma-core: the same binary must load (and run over
// tcp/shm) on machines that have no RDMA stack at all, which is most CI
// hosts, laptops and containers. The first ib transport that is created
// calls VerbsApi::load(), which dlopens libibverbs.so.1 and resolves the
// exported entry points below. Everything in verbs.h that is a static inline
// dispatching through the context's ops table (ibv_post_send, ibv_post_recv,
// ibv_poll_cq, ibv_req_notify_cq) needs no symbol and is called directly;
// verbs.h macros that expand to calls of exported symbols (ibv_query_port,
// ibv_reg_mr) are never used: everything goes through this table. A test
// (tests/vm) checks that libtidal has no undefined ibv_* symbol and no
// libibverbs NEEDED entry.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace tidal::ib {

struct VerbsApi {
  ibv_device** (*getDeviceList)(int* count);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  // The compat entry point, used only when the provider has no extended op.
  int (*queryPortCompat)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  // Null with rdma-core older than 34 (no dma-buf registration).
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_comp_channel* (*createCompChannel)(ibv_context* context);
  int (*destroyCompChannel)(ibv_comp_channel* channel);
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int compVector);
  int (*destroyCq)(ibv_cq* cq);
  int (*getCqEvent)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext);
  void (*ackCqEvents)(ibv_cq* cq, unsigned int nevents);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  int (*getAsyncEvent)(ibv_context* context, ibv_async_event* event);
  void (*ackAsyncEvent)(ibv_async_event* event);
  const char* (*eventTypeStr)(ibv_event_type event);
  const char* (*wcStatusStr)(ibv_wc_status status);

  // Port attributes the way verbs.h's ibv_query_port macro gets them: the
  // provider's extended op when it has one (it fills the whole struct).
  int queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;

  // The loaded table, or null with `why` saying what is missing ("libibverbs.so.1
  // not found: ..."). Loaded once per process; the library stays loaded.
  static const VerbsApi* load(std::string* why);
};

}  // namespace tidal::ib
