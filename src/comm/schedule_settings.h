// Settings that every rank must share: the ones that decide how a collective
// is cut into chunks and which algorithm runs (TIDAL_CHUNK_SIZE,
// TIDAL_STAGING_SLOTS, TIDAL_ALLREDUCE_RD_BYTES, the *_ALGO choices), and the
// ones both ends of a connection must agree on (TIDAL_NET, TIDAL_SHM_DISABLE).
// Two ranks with different chunk sizes post receives of sizes the sender never
// sends: the job hangs or corrupts. So init compares them.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace tidal {

// The settings compared, by name, with this process's values as text
// (parsed, so 65536 and 0x10000 compare equal).
std::vector<std::pair<std::string, std::string>> scheduleSettings();

// Collective over the bootstrap: every rank's settings travel in one
// allGather; when any rank differs, every rank throws InvalidUsage naming the
// first differing variable, this rank's value and the lowest differing rank's.
void checkScheduleSettingsAgree(Bootstrap& bootstrap, int rank, int nranks);

}  // namespace tidal
