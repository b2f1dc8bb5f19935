// The content of a tidalUniqueId: format version, the rendezvous root's
// address and the job's 128-bit random secret. Every connection a job makes,
// bootstrap or data, presents the secret and is refused without it.
#pragma once

#include "core/secret.h"
#include "core/socket.h"
#include "tidal/tidal.h"

namespace tidal {

struct UniqueId {
  SocketAddress root;
  Secret secret{};
};

// Serialisation into the opaque 128 bytes. decode() validates magic, version
// and address family and throws InvalidArgument ("commId ...") on garbage.
tidalUniqueId encodeUniqueId(const UniqueId& id);
UniqueId decodeUniqueId(const tidalUniqueId& raw);

}  // namespace tidal
