// Which ranks share a host (and so can use shared memory).
//
// The identity is the machine id, the boot id and the network namespace: two
// containers on one host with different machine ids or network namespaces do
// not share memory (shm connects through abstract unix sockets, which are
// per namespace), and a rebooted host is a different host. TIDAL_HOSTID overrides it, which is how
// tests make network namespaces on one machine look like separate hosts.
#pragma once

#include <string>

namespace tidal {

// At most kMaxHostIdBytes - 1 characters, so it fits a fixed bootstrap slot.
inline constexpr size_t kMaxHostIdBytes = 64;
std::string localHostIdentity();

}  // namespace tidal
