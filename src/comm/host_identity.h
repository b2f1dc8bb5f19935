// Which ranks share a host (and so can use shared memory).
//
// The identity is the machine id plus the boot id: two containers on one
// host with different machine ids do not share memory, and a rebooted host is
// a different host. TIDAL_HOSTID overrides it, which is how tests make
// network namespaces on one machine look like separate hosts.
#pragma once

#include <string>

namespace tidal {

// At most kMaxHostIdBytes - 1 characters, so it fits a fixed bootstrap slot.
inline constexpr size_t kMaxHostIdBytes = 64;
std::string localHostIdentity();

}  // namespace tidal
