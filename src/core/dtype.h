// Data types and reduction operators: sizes, names and parsing.
#pragma once

#include <cstddef>
#include <cstring>
#include <optional>
#include <string_view>

#include "tidal/tidal.h"

namespace tidal {

inline bool isValidType(int t) { return t >= 0 && t < tidalNumTypes; }

// The int a caller passed for an enum parameter, read without an enum-typed
// load. C callers may pass any int, and in C++ loading an enum object that
// holds a value outside its enumerators' range is undefined (UBSan's
// -fsanitize=enum reports it), so validation reads the bits, and only a
// validated value is ever loaded as the enum.
template <class Enum>
int enumBits(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int));
  int bits;
  std::memcpy(&bits, &e, sizeof bits);
  return bits;
}
inline bool isValidOp(int op) { return op >= 0 && op < tidalNumOps; }

// Bytes per element; 0 for an invalid type.
size_t typeSize(tidalDataType_t type);
// Names as nccl-tests prints them: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16
// f8e4m3 f8e5m2.
const char* typeName(tidalDataType_t type);
// sum prod max min avg
const char* opName(tidalRedOp_t op);

// Accepts nccl-tests names and a few aliases (float32, fp16, bf16, float8e4m3, e5m2, ...).
std::optional<tidalDataType_t> parseType(std::string_view name);
std::optional<tidalRedOp_t> parseOp(std::string_view name);

}  // namespace tidal
