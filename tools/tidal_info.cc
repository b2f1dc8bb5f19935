// tidal-info: what this Tidal build is and how it is configured.
//
//   tidal-info           version, compiled-in features, reduction kernel
//   tidal-info --params  every TIDAL_* parameter: type, value, where the value
//                        came from (default / environment / config file), doc
//   tidal-info --topo [--local-ranks N]
//                        GPUs and NICs with the PCIe class between each pair
//                        (as nvidia-smi topo -m), and each local rank's NICs,
//                        GDR decision and CPU set (docs/topology.md)
//   tidal-info --tuning --nranks N [--hosts H] [--min-bytes B] [--max-bytes B]
//              [--step-factor F] [--collective C]
//                        the tuner's predicted time of each algorithm by size,
//                        and what the rules pick (tidal_info_tuning.cc)
//
// Meant for bug reports and for checking what a job will see: run it with the
// job's environment and it resolves parameters exactly as the library does.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/params.h"
#include "cuda/cuda_support.h"
#include "reduce/reduce.h"
#include "tidal/tidal.h"
#include "tidal_info_tuning.h"
#include "topology/detect.h"
#include "topology/nic_choice.h"
#include "topology/report.h"
#include "transports/transport.h"

namespace {

const char* yesNo(bool b) { return b ? "yes" : "no"; }

std::string versionText(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

int printSummary() {
  int version = 0;
  if (tidalGetVersion(&version) != tidalSuccess) {
    std::fprintf(stderr, "tidal-info: tidalGetVersion failed: %s\n", tidalGetLastError(nullptr));
    return 1;
  }
  std::printf("Tidal %s (NCCL API %s", TIDAL_RELEASE_STRING, versionText(version).c_str());
  // A library that differs from the headers tidal-info was built with means a
  // stale libtidal on the loader path: worth pointing out.
  if (version != TIDAL_VERSION_CODE) {
    std::printf(", headers: %s", versionText(TIDAL_VERSION_CODE).c_str());
  }
  std::printf(")");
  // What CMake found at configure time; a dependency found is not yet a
  // transport built on it: the transports list says what runs today.
  std::printf("\n\nTransports:");
  for (const auto& name : tidal::availableTransports()) std::printf(" %s", name.c_str());
  std::printf("\n");
  std::printf("\nDependencies found at configure time:\n");
  std::printf("  %-10s %s\n", "ibverbs", yesNo(TIDAL_HAVE_IBVERBS));
  std::printf("  %-10s %s\n", "ofi", yesNo(TIDAL_HAVE_OFI));
  std::printf("  %-10s %s\n", "cuda", yesNo(TIDAL_HAVE_CUDA));
  std::printf("  %-10s %s\n", "pmix", yesNo(TIDAL_HAVE_PMIX));
  std::printf("\nReduction kernel: %s\n", tidal::reduceKernelName());
  if (tidal::cuda::usable()) {
    std::printf("CUDA at run time: %d device(s)\n", tidal::cuda::deviceCount());
  } else {
    std::printf("CUDA at run time: not used: %s\n", tidal::cuda::unavailableReason().c_str());
  }
  std::printf(
      "\nRun 'tidal-info --params' for every TIDAL_* parameter, 'tidal-info --topo' for the\n"
      "GPUs and NICs and each local rank's choice.\n");
  return 0;
}

// An empty value would leave a hole in the table; show it as "".
std::string shown(const std::string& value) { return value.empty() ? "\"\"" : value; }

int printParams() {
  const auto entries = tidal::params::snapshot();
  // Column widths from the content, so the table stays aligned however long
  // a value or a config file path gets.
  size_t nameW = 4, kindW = 4, valueW = 5, sourceW = 6;
  for (const auto& e : entries) {
    nameW = std::max(nameW, std::strlen(e.def->name));
    kindW = std::max(kindW, std::strlen(tidal::params::kindName(e.def->kind)));
    valueW = std::max(valueW, shown(e.value).size());
    sourceW = std::max(sourceW, e.source.size());
  }
  auto row = [&](const char* name, const char* kind, const std::string& value,
                 const std::string& source, const char* doc) {
    std::printf("%-*s  %-*s  %-*s  %-*s  %s\n", static_cast<int>(nameW), name,
                static_cast<int>(kindW), kind, static_cast<int>(valueW), value.c_str(),
                static_cast<int>(sourceW), source.c_str(), doc);
  };
  row("NAME", "TYPE", "VALUE", "SOURCE", "DESCRIPTION");
  for (const auto& e : entries) {
    row(e.def->name, tidal::params::kindName(e.def->kind), shown(e.value), e.source, e.def->doc);
  }
  return 0;
}

// The same detection and decisions the library makes, on this host or on the
// tree TIDAL_TOPO_SYSFS / the dump TIDAL_TOPO_FILE names.
int printTopology(int localRanks) {
  try {
    const auto detected = tidal::topo::detectTopology();
    const auto& t = detected.topology;
    auto settings = tidal::topo::choiceSettingsFromParams();
    settings.localRanks = localRanks;
    std::printf("Topology from %s\n\n%s\n", detected.source.c_str(),
                tidal::topo::topologyMatrix(t).c_str());
    const int ranks = tidal::topo::effectiveLocalRanks(t, settings);
    std::printf("Choices for %d local rank(s) (TIDAL_NET_GDR_LEVEL=%s):\n", ranks,
                tidal::topo::className(settings.gdrLevel));
    for (int r = 0; r < ranks; ++r) {
      const auto choice = tidal::topo::chooseForRank(t, r, settings);
      std::printf("%s\n", tidal::topo::choiceLine(choice).c_str());
    }
    return 0;
  } catch (const tidal::Error& e) {
    std::fprintf(stderr, "tidal-info: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prints the Tidal version, build features and parameters.", "tidal-info"};
  bool params = false;
  app.add_flag("--params", params,
               "List every TIDAL_* parameter with its type, value, source and description");
  bool topo = false;
  app.add_flag("--topo", topo,
               "Show GPUs, NICs and the PCIe class between them, and each local rank's choice");
  int localRanks = 0;
  app.add_option("--local-ranks", localRanks,
                 "With --topo: local ranks to show choices for (default: one per GPU, or 1)")
      ->check(CLI::Range(1, 4096));
  bool tuning = false;
  app.add_flag("--tuning", tuning,
               "Predicted time of each algorithm by size (the tuner's model) and the rules' pick");
  TuningOptions tuningOptions;
  app.add_option("--nranks", tuningOptions.nranks, "With --tuning: ranks (default 8)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--hosts", tuningOptions.hosts,
                 "With --tuning: hosts the ranks are spread over, in blocks (default 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--min-bytes", tuningOptions.minBytes, "With --tuning: smallest size (default 8)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 34));
  app.add_option("--max-bytes", tuningOptions.maxBytes,
                 "With --tuning: largest size (default 1 GiB)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 34));
  app.add_option("--step-factor", tuningOptions.stepFactor,
                 "With --tuning: each size times this is the next (default 8)")
      ->check(CLI::Range(size_t{2}, size_t{1} << 20));
  app.add_option("--collective", tuningOptions.collective,
                 "With --tuning: only this one (AllReduce, AllGather, ReduceScatter, Broadcast, "
                 "Reduce)")
      ->check(CLI::IsMember({"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tidal-info: error: %s\n\n%s", e.what(), app.help().c_str());
    return 2;
  }
  if (topo) return printTopology(localRanks);
  if (tuning) {
    if (tuningOptions.hosts > tuningOptions.nranks) {
      std::fprintf(stderr, "tidal-info: error: --hosts %d is more than --nranks %d\n",
                   tuningOptions.hosts, tuningOptions.nranks);
      return 2;
    }
    if (tuningOptions.minBytes > tuningOptions.maxBytes) {
      std::fprintf(stderr, "tidal-info: error: --min-bytes %zu is more than --max-bytes %zu\n",
                   tuningOptions.minBytes, tuningOptions.maxBytes);
      return 2;
    }
    return printTuning(tuningOptions);
  }
  return params ? printParams() : printSummary();
}
