// The link costs the tuner's unit tests work out their expectations from
// (tuner_test, large_scale_test): round numbers, two link classes far apart.
#pragma once

#include "tuner/link_model.h"

namespace tidal::tuner::test {

inline LinkModel testLinkModel() {
  LinkModel m;
  m.sameHost = {1.0, 1000.0};
  m.network = {10.0, 100.0};
  m.reduceBytesPerUs = 500.0;
  m.copyBytesPerUs = 2000.0;
  return m;
}

}  // namespace tidal::tuner::test
