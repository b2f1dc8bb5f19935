// Which RDMA devices of a host are AWS EFA adapters, read from sysfs: a
// device under class/infiniband whose PCI function is bound to the kernel's
// "efa" driver (class/infiniband/<dev>/device/driver -> .../drivers/efa).
//
// The communicator offers the ofi transport on its own (without TIDAL_NET)
// only where this finds one, so that hosts without EFA never load libfabric
// (docs/transports.md, "ofi": when it is chosen).
#pragma once

#include <string>
#include <vector>

namespace tidal::topo {

// The EFA devices under `sysfsRoot` ("/sys" on a real host), sorted by name;
// empty when there are none or the tree cannot be read.
std::vector<std::string> efaDevices(const std::string& sysfsRoot);

}  // namespace tidal::topo
