#include "bootstrap/pmix.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "core/log.h"

#if TIDAL_HAVE_PMIX
#include <pmix.h>
#endif

namespace tidal::pmix {

bool serverAdvertised() {
  if (std::getenv("PMIX_NAMESPACE") != nullptr) return true;
  // PMIx 2..4 spell the server URI variable differently per version.
  for (const char* name : {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                           "PMIX_SERVER_URI21", "PMIX_SERVER_URI2", "PMIX_SERVER_URI"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

#if TIDAL_HAVE_PMIX

namespace {

// Function pointers resolved from libpmix.so.2. Loaded once and never
// unloaded: PMIx keeps threads and handlers that must outlive any call.
struct Api {
  std::string loadError;  // empty when every function resolved
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence) fence = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Error_string) errorString = nullptr;
  decltype(&PMIx_Value_destruct) valueDestruct = nullptr;  // optional
};

template <typename T>
void resolve(void* handle, const char* name, T& fn, std::string& missing) {
  fn = reinterpret_cast<T>(dlsym(handle, name));
  if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

const Api& api() {
  static const Api loaded = [] {
    Api a;
    // RTLD_GLOBAL: PMIx loads its own plugins, which resolve libpmix
    // symbols from the global namespace.
    void* handle = nullptr;
    for (const char* lib : {"libpmix.so.2", "libpmix.so"}) {
      handle = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
      if (handle != nullptr) break;
    }
    if (handle == nullptr) {
      const char* err = dlerror();
      a.loadError = fmt::format("cannot load libpmix.so.2 ({})", err ? err : "not found");
      return a;
    }
    std::string missing;
    resolve(handle, "PMIx_Init", a.init, missing);
    resolve(handle, "PMIx_Finalize", a.finalize, missing);
    resolve(handle, "PMIx_Put", a.put, missing);
    resolve(handle, "PMIx_Commit", a.commit, missing);
    resolve(handle, "PMIx_Fence", a.fence, missing);
    resolve(handle, "PMIx_Get", a.get, missing);
    resolve(handle, "PMIx_Error_string", a.errorString, missing);
    a.valueDestruct =
        reinterpret_cast<decltype(&PMIx_Value_destruct)>(dlsym(handle, "PMIx_Value_destruct"));
    if (!missing.empty()) a.loadError = "libpmix.so.2 lacks " + missing;
    return a;
  }();
  return loaded;
}

void setKey(char* key, const char* name) {
  std::strncpy(key, name, PMIX_MAX_KEYLEN);
  key[PMIX_MAX_KEYLEN] = '\0';
}

}  // namespace

std::string shareFromRank0(const std::function<std::string()>& make, int timeoutSeconds) {
  // Serialise callers: the key counter must advance in the same order in
  // every process, and PMIx init/finalize pairs must not interleave.
  static std::mutex mutex;
  static unsigned calls = 0;
  std::lock_guard lock(mutex);

  const Api& a = api();
  if (!a.loadError.empty()) fail(tidalInvalidUsage, "PMIx: {}", a.loadError);
  auto check = [&](pmix_status_t rc, const char* what) {
    if (rc != PMIX_SUCCESS) {
      fail(tidalInvalidUsage, "PMIx: {} failed: {} ({})", what, a.errorString(rc), rc);
    }
  };

  pmix_proc_t me;
  std::memset(&me, 0, sizeof me);
  check(a.init(&me, nullptr, 0), "PMIx_Init");
  // Finalize on every path: Open MPI's launcher reports a process that
  // initialised PMIx and exits without finalizing as an error.
  struct Finalizer {
    const Api& a;
    ~Finalizer() { a.finalize(nullptr, 0); }
  } finalizer{a};

  const std::string key = fmt::format("tidal.uniqueid.{}", calls++);
  if (me.rank == 0) {
    const std::string value = make();
    pmix_value_t v;
    std::memset(&v, 0, sizeof v);
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(value.c_str());  // PMIx_Put copies it
    check(a.put(PMIX_GLOBAL, key.c_str(), &v), "PMIx_Put");
    check(a.commit(), "PMIx_Commit");
  }

  pmix_info_t info[2];
  std::memset(info, 0, sizeof info);
  setKey(info[0].key, PMIX_COLLECT_DATA);
  info[0].value.type = PMIX_BOOL;
  info[0].value.data.flag = true;
  setKey(info[1].key, PMIX_TIMEOUT);
  info[1].value.type = PMIX_INT;
  info[1].value.data.integer = timeoutSeconds;
  // NULL procs: every process of our namespace.
  check(a.fence(nullptr, 0, info, 2), "PMIx_Fence (waiting for all processes of the job)");

  pmix_proc_t rank0 = me;
  rank0.rank = 0;
  pmix_value_t* got = nullptr;
  check(a.get(&rank0, key.c_str(), nullptr, 0, &got), "PMIx_Get of rank 0's unique id");
  std::string result;
  if (got != nullptr && got->type == PMIX_STRING && got->data.string != nullptr) {
    result = got->data.string;
  }
  const bool wrongType = got == nullptr || got->type != PMIX_STRING;
  if (got != nullptr && a.valueDestruct != nullptr) {
    a.valueDestruct(got);
    std::free(got);
  }
  if (wrongType) fail(tidalInvalidUsage, "PMIx: rank 0's value for {} is not a string", key);
  TIDAL_TRACE(Boot, "PMIx: namespace {} rank {} read {}", me.nspace, me.rank, key);
  return result;
}

#else  // !TIDAL_HAVE_PMIX

std::string shareFromRank0(const std::function<std::string()>&, int) {
  fail(tidalInvalidUsage, "PMIx: this libtidal was built without PMIx support");
}

#endif

}  // namespace tidal::pmix
