// NCCL 2.30's parameter API over Tidal's parameter registry
// (src/core/params.h): a handle is the address of a setting's declaration,
// so it stays valid for the life of the process, and every read resolves
// the value afresh (the environment, then TIDAL_CONF_FILE, then the default),
// as the library itself does. Errors name the argument and the value, and
// reach tidalGetLastError(NULL).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "comm/api_guard.h"
#include "core/params.h"

using namespace tidal;

namespace {

const params::Definition& declarationOf(tidalParamHandle_t h, const char* fn) {
  if (!h) fail(tidalInvalidArgument, "{}: h is NULL", fn);
  const auto* def = reinterpret_cast<const params::Definition*>(h);
  for (const auto& d : params::definitions()) {
    if (&d == def) return d;
  }
  fail(tidalInvalidArgument, "{}: h {} is not a handle from tidalParamBind", fn,
       static_cast<void*>(h));
}

const params::Definition& settingOf(const char* key, const char* fn) {
  const params::Definition* def = params::lookup(key);
  if (!def) {
    fail(tidalInvalidArgument,
         "{}: key '{}' is not a Tidal setting (docs/env.md lists them; tidal-info --params "
         "prints them)",
         fn, key);
  }
  return *def;
}

// An integer setting's value (a boolean reads as 0 or 1), checked against
// the range of T.
template <typename T>
tidalResult_t getInteger(tidalParamHandle_t h, T* out, const char* fn) {
  return guarded(nullptr, [&] {
    const params::Definition& def = declarationOf(h, fn);
    if (!out) fail(tidalInvalidArgument, "{}: out is NULL ({})", fn, def.name);
    if (def.kind == params::Kind::String) {
      fail(tidalInvalidArgument, "{}: {} is a string setting ('{}'); read it with tidalParamGetStr",
           fn, def.name, params::getString(def.name));
    }
    const int64_t v = def.kind == params::Kind::Bool ? (params::getBool(def.name) ? 1 : 0)
                                                     : params::getInt(def.name);
    const bool fits = std::numeric_limits<T>::is_signed
                          ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                v <= static_cast<int64_t>(std::numeric_limits<T>::max())
                          : v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max();
    if (!fits) {
      fail(tidalInvalidArgument, "{}: {}={} does not fit the {}-bit {} integer asked for", fn,
           def.name, v, sizeof(T) * 8, std::numeric_limits<T>::is_signed ? "signed" : "unsigned");
    }
    *out = static_cast<T>(v);
  });
}

// The value as text, as the library reads it (an integer or boolean setting
// is checked to parse, so a bad value is reported here, not later).
std::string textOf(const params::Definition& def) {
  if (def.kind == params::Kind::Int) (void)params::getInt(def.name);
  if (def.kind == params::Kind::Bool) (void)params::getBool(def.name);
  return params::getString(def.name);
}

}  // namespace

extern "C" {

tidalResult_t tidalParamBind(tidalParamHandle_t* out, const char* key) {
  constexpr const char* fn = "tidalParamBind";
  return guarded(nullptr, [&] {
    if (!out) fail(tidalInvalidArgument, "{}: out is NULL", fn);
    if (!key) fail(tidalInvalidArgument, "{}: key is NULL", fn);
    *out =
        reinterpret_cast<tidalParamHandle_t>(const_cast<params::Definition*>(&settingOf(key, fn)));
  });
}

// tidalParamGetI8 ... tidalParamGetU64: one reader, eight integer types.
#define TIDAL_PARAM_INTEGER_GETTER(suffix, ctype)                         \
  tidalResult_t tidalParamGet##suffix(tidalParamHandle_t h, ctype* out) { \
    return getInteger(h, out, "tidalParamGet" #suffix);                   \
  }
TIDAL_PARAM_INTEGER_GETTER(I8, int8_t)
TIDAL_PARAM_INTEGER_GETTER(I16, int16_t)
TIDAL_PARAM_INTEGER_GETTER(I32, int32_t)
TIDAL_PARAM_INTEGER_GETTER(I64, int64_t)
TIDAL_PARAM_INTEGER_GETTER(U8, uint8_t)
TIDAL_PARAM_INTEGER_GETTER(U16, uint16_t)
TIDAL_PARAM_INTEGER_GETTER(U32, uint32_t)
TIDAL_PARAM_INTEGER_GETTER(U64, uint64_t)
#undef TIDAL_PARAM_INTEGER_GETTER

tidalResult_t tidalParamGetStr(tidalParamHandle_t h, const char** out) {
  constexpr const char* fn = "tidalParamGetStr";
  return guarded(nullptr, [&] {
    const params::Definition& def = declarationOf(h, fn);
    if (!out) fail(tidalInvalidArgument, "{}: out is NULL ({})", fn, def.name);
    static thread_local std::string text;
    text = textOf(def);
    *out = text.c_str();
  });
}

tidalResult_t tidalParamGet(tidalParamHandle_t h, void* out, int maxLen, int* len) {
  constexpr const char* fn = "tidalParamGet";
  return guarded(nullptr, [&] {
    const params::Definition& def = declarationOf(h, fn);
    if (!len) fail(tidalInvalidArgument, "{}: len is NULL ({})", fn, def.name);
    std::vector<unsigned char> bytes;
    if (def.kind == params::Kind::Int) {
      const int64_t v = params::getInt(def.name);
      bytes.resize(sizeof v);
      std::memcpy(bytes.data(), &v, sizeof v);
    } else if (def.kind == params::Kind::Bool) {
      bytes.push_back(params::getBool(def.name) ? 1 : 0);
    } else {
      const std::string v = params::getString(def.name);
      bytes.assign(v.begin(), v.end());
      bytes.push_back(0);
    }
    *len = static_cast<int>(bytes.size());
    if (!out) fail(tidalInvalidArgument, "{}: out is NULL ({})", fn, def.name);
    if (maxLen < static_cast<int>(bytes.size())) {
      fail(tidalInvalidArgument, "{}: maxLen {} is too small for {} ({} bytes needed, in *len)", fn,
           maxLen, def.name, bytes.size());
    }
    std::memcpy(out, bytes.data(), bytes.size());
  });
}

tidalResult_t tidalParamGetParameter(const char* key, const char** value, int* valueLen) {
  constexpr const char* fn = "tidalParamGetParameter";
  return guarded(nullptr, [&] {
    if (!key) fail(tidalInvalidArgument, "{}: key is NULL", fn);
    if (!value) fail(tidalInvalidArgument, "{}: value is NULL ({})", fn, key);
    if (!valueLen) fail(tidalInvalidArgument, "{}: valueLen is NULL ({})", fn, key);
    *value = nullptr;
    *valueLen = 0;
    static thread_local std::string text;
    text = textOf(settingOf(key, fn));
    *value = text.c_str();
    *valueLen = static_cast<int>(text.size());
  });
}

tidalResult_t tidalParamGetAllParameterKeys(const char*** table, int* tableLen) {
  constexpr const char* fn = "tidalParamGetAllParameterKeys";
  return guarded(nullptr, [&] {
    if (!table) fail(tidalInvalidArgument, "{}: table is NULL", fn);
    if (!tableLen) fail(tidalInvalidArgument, "{}: tableLen is NULL", fn);
    // The names are the declarations' own string literals: they outlive any
    // caller. The table of pointers is per thread, as NCCL promises.
    static thread_local std::vector<const char*> keys;
    keys.clear();
    for (const auto& d : params::definitions()) keys.push_back(d.name);
    *table = keys.data();
    *tableLen = static_cast<int>(keys.size());
  });
}

void tidalParamDumpAll(void) {
  for (const params::Entry& e : params::snapshot()) {
    std::printf("%s=%s (%s, %s)\n", e.def->name, e.value.c_str(), params::kindName(e.def->kind),
                e.source.c_str());
  }
  std::fflush(stdout);
}

}  // extern "C"
