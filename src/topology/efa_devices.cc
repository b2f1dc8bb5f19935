#include "topology/efa_devices.h"

#include <algorithm>
#include <filesystem>

namespace tidal::topo {

std::vector<std::string> efaDevices(const std::string& sysfsRoot) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  std::error_code ec;
  const fs::path dir = fs::path(sysfsRoot) / "class/infiniband";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code linkError;
    // The driver link's last component is the driver's name.
    const fs::path driver = fs::read_symlink(it->path() / "device/driver", linkError);
    if (!linkError && driver.filename() == "efa") found.push_back(it->path().filename().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace tidal::topo
