#include "core/dtype.h"

#include <array>
#include <string>

namespace tidal {

namespace {
struct TypeInfo {
  const char* name;
  size_t size;
};
constexpr std::array<TypeInfo, tidalNumTypes> kTypes = {{{"int8", 1},
                                                         {"uint8", 1},
                                                         {"int32", 4},
                                                         {"uint32", 4},
                                                         {"int64", 8},
                                                         {"uint64", 8},
                                                         {"half", 2},
                                                         {"float", 4},
                                                         {"double", 8},
                                                         {"bfloat16", 2},
                                                         {"f8e4m3", 1},
                                                         {"f8e5m2", 1}}};
constexpr std::array<const char*, tidalNumOps> kOps = {"sum", "prod", "max", "min", "avg"};
}  // namespace

size_t typeSize(tidalDataType_t type) { return isValidType(type) ? kTypes[type].size : 0; }

const char* typeName(tidalDataType_t type) {
  return isValidType(type) ? kTypes[type].name : "invalid";
}

const char* opName(tidalRedOp_t op) { return isValidOp(op) ? kOps[op] : "invalid"; }

std::optional<tidalDataType_t> parseType(std::string_view name) {
  for (int t = 0; t < tidalNumTypes; ++t) {
    if (name == kTypes[t].name) return static_cast<tidalDataType_t>(t);
  }
  struct Alias {
    const char* alias;
    tidalDataType_t type;
  };
  static constexpr Alias kAliases[] = {
      {"char", tidalInt8},          {"int", tidalInt32},       {"float16", tidalFloat16},
      {"fp16", tidalFloat16},       {"float32", tidalFloat32}, {"fp32", tidalFloat32},
      {"float64", tidalFloat64},    {"fp64", tidalFloat64},    {"bf16", tidalBfloat16},
      {"bfloat", tidalBfloat16},    {"uint", tidalUint32},     {"float8e4m3", tidalFloat8e4m3},
      {"fp8e4m3", tidalFloat8e4m3}, {"e4m3", tidalFloat8e4m3}, {"float8e5m2", tidalFloat8e5m2},
      {"fp8e5m2", tidalFloat8e5m2}, {"e5m2", tidalFloat8e5m2},
  };
  for (const auto& a : kAliases) {
    if (name == a.alias) return a.type;
  }
  return std::nullopt;
}

std::optional<tidalRedOp_t> parseOp(std::string_view name) {
  for (int op = 0; op < tidalNumOps; ++op) {
    if (name == kOps[op]) return static_cast<tidalRedOp_t>(op);
  }
  return std::nullopt;
}

}  // namespace tidal
