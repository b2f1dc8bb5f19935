#include "tuner/link_model.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/params.h"

namespace tidal::tuner {

void LinkModel::read(const std::string& text, const std::string& source) {
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string key, extra;
    double value = 0;
    if (!(words >> key)) continue;
    if (!(words >> value) || (words >> extra)) {
      fail(tidalInvalidArgument, "{} line {}: expected 'NAME NUMBER', got '{}'", source, number,
           line);
    }
    if (!std::isfinite(value) || value < 0 ||
        (value == 0 && key.find("alpha") == std::string::npos && key != "hosts_per_leaf")) {
      fail(tidalInvalidArgument, "{} line {}: {} must be a positive number, got {}", source, number,
           key, value);
    }
    if (key == "same_host_alpha_us") {
      sameHost.alphaUs = value;
    } else if (key == "same_host_mb_per_s") {
      sameHost.bytesPerUs = value;
    } else if (key == "network_alpha_us") {
      network.alphaUs = value;
    } else if (key == "network_mb_per_s") {
      network.bytesPerUs = value;
    } else if (key == "reduce_mb_per_s") {
      reduceBytesPerUs = value;
    } else if (key == "copy_mb_per_s") {
      copyBytesPerUs = value;
    } else if (key == "hosts_per_leaf") {
      if (value != std::floor(value) || value > 1e6) {
        fail(tidalInvalidArgument, "{} line {}: hosts_per_leaf must be a whole number, got {}",
             source, number, value);
      }
      hostsPerLeaf = static_cast<int>(value);
    } else if (key == "oversubscription") {
      if (value < 1) {
        fail(tidalInvalidArgument,
             "{} line {}: oversubscription must be at least 1 (1: non-blocking), got {}", source,
             number, value);
      }
      oversubscription = value;
    } else if (key == "spine_alpha_us") {
      spineAlphaUs = value;
    } else {
      fail(tidalInvalidArgument,
           "{} line {}: unknown name '{}' (known: same_host_alpha_us, same_host_mb_per_s, "
           "network_alpha_us, network_mb_per_s, reduce_mb_per_s, copy_mb_per_s, "
           "hosts_per_leaf, oversubscription, spine_alpha_us)",
           source, number, key);
    }
  }
}

LinkModel LinkModel::fromParams() {
  LinkModel m;
  const std::string path = params::getString("TIDAL_TUNER_FILE");
  if (path.empty()) return m;
  std::ifstream in(path);
  if (!in) fail(tidalInvalidArgument, "TIDAL_TUNER_FILE={}: cannot be read", path);
  std::ostringstream text;
  text << in.rdbuf();
  m.read(text.str(), "TIDAL_TUNER_FILE=" + path);
  return m;
}

}  // namespace tidal::tuner
