// Data types and reduction operators: sizes, names and parsing.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "tidal/tidal.h"

namespace tidal {

inline bool isValidType(int t) { return t >= 0 && t < tidalNumTypes; }
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
