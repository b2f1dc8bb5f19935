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
    // Shared memory is reached through abstract unix sockets, which live in
    // a network namespace: two containers on one kernel but in different
    // namespaces cannot use it, so the namespace is part of the identity.
    char ns[64] = {0};
    const ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    const std::string netns = n > 0 ? std::string(ns, static_cast<size_t>(n)) : "";
    if (!machine.empty() || !boot.empty()) {
      id = machine.substr(0, 16) + "/" + boot.substr(0, 36) + "/" + netns.substr(0, 9 + 10);
    } else {
      char host[256] = {0};
      gethostname(host, sizeof host - 1);
      id = host;
    }
  }
  return id.substr(0, kMaxHostIdBytes - 1);
}

}  // namespace tidal
