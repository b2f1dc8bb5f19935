#include "transports/transport.h"

#include "core/error.h"

namespace tidal {

void Connection::postReduce(void*, const void*, size_t, const ArrivalReducer&) {
  // The engine asks canReduceOnArrival() first; reaching this is a bug.
  fail(tidalInternalError, "{}: this connection cannot reduce on arrival", describe());
}

}  // namespace tidal
