// What moving bytes costs, per class of link, for the tuner's predictions
// (schedule_time.h).
//
// Each link class has an alpha (a message's start-up: software, wire and
// wake-up latency, microseconds) and a beta (bytes per microsecond, i.e.
// MB/s): a message of b bytes occupies its sender's link for b / beta and
// arrives alpha + b / beta after it starts. Two classes, because the
// topology has two levels: ranks on one host (shared memory) and ranks on
// different hosts (the network). Reductions run at reduceBytesPerUs, local
// copies at copyBytesPerUs.
//
// The defaults are this project's development machine's measurements (two
// ranks, each with a core), over shm and over TCP between namespaced hosts
// (docs/benchmarks.md, "The tuner's model"); a real cluster's NICs differ by
// orders of magnitude, so a file (TIDAL_TUNER_FILE) replaces any of them:
//
//   # comment
//   same_host_alpha_us 1.5
//   same_host_mb_per_s 6000
//   network_alpha_us 20
//   network_mb_per_s 1250
//   reduce_mb_per_s 8000
//   copy_mb_per_s 10000
//
// Above the hosts, optionally, a two-level fat tree (leaf and spine
// switches): hosts in groups of hosts_per_leaf under one leaf, whose links to
// the spines carry, all together, (ranks under the leaf) x network_mb_per_s /
// oversubscription; a message between leaves shares them with every other
// message crossing at the same time and takes spine_alpha_us longer.
//
//   hosts_per_leaf 16       # 0 (default): one non-blocking switch
//   oversubscription 4      # at least 1
//   spine_alpha_us 1
#pragma once

#include <string>

namespace tidal::tuner {

struct LinkCost {
  double alphaUs;
  double bytesPerUs;  // == MB/s
};

struct LinkModel {
  // tidal_pingpong, 2 ranks: over shm on one host, and over tcp between two
  // namespaced hosts (veths, no delay): half round trip at 8 B, and 16 MiB
  // one way. Reduce and copy: reduce_bench's float32 sum and memcpy at
  // 64 MiB, per byte of result.
  LinkCost sameHost{0.7, 9000.0};
  LinkCost network{8.5, 4800.0};
  double reduceBytesPerUs = 10000.0;
  double copyBytesPerUs = 16000.0;
  // The fat tree above the hosts; hostsPerLeaf 0: none.
  int hostsPerLeaf = 0;
  double oversubscription = 1.0;
  double spineAlphaUs = 0.0;

  // Reads `text` (the format above) over these values; throws
  // InvalidArgument naming `source`, the line and what is wrong.
  void read(const std::string& text, const std::string& source);
  // The defaults, then TIDAL_TUNER_FILE when it is set.
  static LinkModel fromParams();
};

}  // namespace tidal::tuner
