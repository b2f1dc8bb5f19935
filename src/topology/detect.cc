#include "topology/detect.h"

#include "core/log.h"
#include "core/params.h"
#include "topology/sysfs_discovery.h"
#include "topology/topo_file.h"

namespace tidal::topo {

Detected detectTopology(bool writeDump) {
  Detected d;
  const std::string file = params::getString("TIDAL_TOPO_FILE");
  if (!file.empty()) {
    d.topology = readTopologyFile(file);
    d.source = "TIDAL_TOPO_FILE=" + file;
  } else {
    const std::string root = params::getString("TIDAL_TOPO_SYSFS");
    d.topology = discoverFromSysfs(root);
    d.source = "sysfs " + root;
  }
  const std::string dump = params::getString("TIDAL_TOPO_DUMP_FILE");
  if (writeDump && !dump.empty()) {
    writeTopologyFile(d.topology, dump);
    TIDAL_INFO(Init, "topology from {} written to TIDAL_TOPO_DUMP_FILE={}", d.source, dump);
  }
  return d;
}

ChoiceSettings choiceSettingsFromParams() {
  ChoiceSettings s;
  s.gdrLevel = parseGdrLevel(params::getString("TIDAL_NET_GDR_LEVEL"));
  return s;
}

}  // namespace tidal::topo
