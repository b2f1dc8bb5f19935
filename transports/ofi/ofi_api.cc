#include "transports/ofi/ofi_api.h"

#include <dlfcn.h>

#include <cstdlib>

#include <fmt/format.h>

namespace tidal::ofi {

namespace {

struct Loaded {
  OfiApi api{};
  bool ok = false;
  std::string why;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn*& out, std::string& why) {
  out = reinterpret_cast<Fn*>(::dlsym(lib, name));
  if (out == nullptr && why.empty()) why = fmt::format("libfabric.so.1 has no symbol {}", name);
  return out != nullptr;
}

Loaded loadOnce() {
  Loaded l;
  // RTLD_NODELETE: providers are plugins of libfabric that keep pointers
  // into it, and nothing here ever unloads it.
  void* lib = ::dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    l.why = fmt::format("libfabric.so.1 not found ({}); install libfabric (libfabric1)",
                        e ? e : "dlopen failed");
    return l;
  }
  OfiApi& a = l.api;
  std::string& w = l.why;
  bool ok = true;
  ok &= resolve(lib, "fi_version", a.version, w);
  ok &= resolve(lib, "fi_getinfo", a.getinfo, w);
  ok &= resolve(lib, "fi_freeinfo", a.freeinfo, w);
  ok &= resolve(lib, "fi_dupinfo", a.dupinfo, w);
  ok &= resolve(lib, "fi_fabric", a.fabric, w);
  ok &= resolve(lib, "fi_strerror", a.strerror, w);
  ok &= resolve(lib, "fi_tostr", a.tostr, w);
  l.ok = ok;
  return l;
}

}  // namespace

std::string OfiApi::errorText(int ret) const {
  const char* text = strerror(std::abs(ret));
  return fmt::format("{} ({})", text ? text : "unknown error", ret);
}

const OfiApi* OfiApi::load(std::string* why) {
  static const Loaded loaded = loadOnce();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace tidal::ofi
