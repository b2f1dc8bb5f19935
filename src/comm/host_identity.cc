#include "comm/host_identity.h"

#include <unistd.h>

#include <fstream>

#include "core/params.h"

namespace tidal {

namespace {
std::string firstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}
}  // namespace

std::string localHostIdentity() {
  std::string id = params::getString("TIDAL_HOSTID");
  if (id.empty()) {
    const std::string machine = firstLine("/etc/machine-id");
    const std::string boot = firstLine("/proc/sys/kernel/random/boot_id");
    if (!machine.empty() || !boot.empty()) {
      id = machine.substr(0, 32) + "/" + boot.substr(0, 36);
    } else {
      char host[256] = {0};
      gethostname(host, sizeof host - 1);
      id = host;
    }
  }
  return id.substr(0, kMaxHostIdBytes - 1);
}

}  // namespace tidal
