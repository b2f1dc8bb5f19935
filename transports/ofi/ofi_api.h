// libfabric, loaded at run time with dlopen.
//
// libtidal does not link libfabric, for the reason it does not link
// libibverbs (transports/ib/verbs_api.h): the same binary must load and run
// over tcp/shm where libfabric is absent. Almost all of libfabric's calls
// (fi_domain, fi_endpoint, fi_tsend, fi_cq_read, fi_mr_reg, fi_close, ...)
// are static inlines in the headers that dispatch through a fid's ops table,
// so they need no symbol. Only the few real exports below go through this
// table; calling one of them directly (or an inline that wraps one, such as
// fi_allocinfo) would give libtidal an undefined fi_* symbol.
#pragma once

#include <rdma/fabric.h>

#include <string>

namespace tidal::ofi {

struct OfiApi {
  uint32_t (*version)();
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags,
                 const fi_info* hints, fi_info** info);
  void (*freeinfo)(fi_info* info);
  fi_info* (*dupinfo)(const fi_info* info);
  int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
  const char* (*strerror)(int errnum);
  char* (*tostr)(const void* data, enum fi_type datatype);

  // fi_strerror of a negative or positive libfabric return code.
  std::string errorText(int ret) const;

  // The loaded table, or null with `why` saying what is missing. Loaded once
  // per process; the library stays loaded.
  static const OfiApi* load(std::string* why);
};

}  // namespace tidal::ofi
