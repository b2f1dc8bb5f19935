// tidal-sim: the predicted time of each collective, by size, for a modelled
// cluster of any size up to the seed's 16,384 GPUs.
//
// It runs the library's own schedule builders (collectives/) through the
// tuner's model (src/tuner/schedule_time.h) over hosts x ranks per host:
// links inside a host and NIC links between hosts, each an alpha-beta cost
// (TIDAL_TUNER_FILE's format, or a preset). Beyond a few thousand ranks it
// simulates one host's ranks for all where the schedules repeat from host
// to host (src/tuner/large_scale.h), and says so per algorithm.
//
// Above the hosts, a two-level fat tree when asked (--leaf-hosts,
// --oversubscription, --spine-alpha, or the model file's hosts_per_leaf...):
// messages between leaves share their leaves' links to the spines.
// Not modelled (docs/benchmarks.md): the engine's per-call overhead beyond
// alpha, staging-slot limits.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/params.h"
#include "tidal_sim_presets.h"
#include "tuner/candidates.h"
#include "tuner/large_scale.h"
#include "tuner/link_model.h"

namespace {

using tidal::tuner::Collective;

// "8", "64K", "16M", "1G" -> bytes.
size_t parseSize(const std::string& text) {
  size_t used = 0;
  const unsigned long long value = std::stoull(text, &used);
  size_t scale = 1;
  if (used < text.size()) {
    switch (text[used]) {
      case 'K':
      case 'k':
        scale = size_t{1} << 10;
        break;
      case 'M':
      case 'm':
        scale = size_t{1} << 20;
        break;
      case 'G':
      case 'g':
        scale = size_t{1} << 30;
        break;
      default:
        throw CLI::ValidationError("size", "'" + text + "': a number with K, M or G");
    }
    if (used + 1 != text.size()) {
      throw CLI::ValidationError("size", "'" + text + "': a number with K, M or G");
    }
  }
  return static_cast<size_t>(value) * scale;
}

std::string sizeText(size_t bytes) {
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0)
    return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0)
    return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (size_t{1} << 10) && bytes % (size_t{1} << 10) == 0)
    return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) tidal::fail(tidalInvalidArgument, "tidal-sim: cannot read --model {}", path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Collective collectiveNamed(const std::string& name) {
  for (const Collective c : {Collective::AllReduce, Collective::AllGather,
                             Collective::ReduceScatter, Collective::Broadcast, Collective::Reduce})
    if (name == tidal::tuner::collectiveName(c)) return c;
  throw CLI::ValidationError("--collective", "'" + name +
                                                 "': one of AllReduce, AllGather, ReduceScatter, "
                                                 "Broadcast, Reduce");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tidal-sim: predicted collective times on a modelled cluster, from the library's own "
      "schedules"};
  std::string preset;
  std::vector<int> hostCounts;
  int perHost = 0;
  std::string modelFile;
  std::vector<std::string> collectives;
  std::string minText = "8", maxText = "1G";
  size_t factor = 8;
  std::string chunkText;
  std::vector<std::string> only;
  int leafHosts = -1;
  double oversubscription = 0, spineAlpha = -1;
  app.add_option("--preset", preset,
                 "A named cluster: 'seed' = 2048 hosts x 8 H100s, NVLink inside a host, one "
                 "400 Gb/s NIC per GPU (tools/tuner/h100_400g.txt)")
      ->check(CLI::IsMember({"seed"}));
  app.add_option("--hosts", hostCounts, "Host counts, one table each (e.g. 2,16,128,2048)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-host,-p", perHost, "Ranks on each host")->check(CLI::Range(1, 1024));
  app.add_option("--model", modelFile,
                 "Link costs in TIDAL_TUNER_FILE's format (default: the preset's, else "
                 "TIDAL_TUNER_FILE, else this project's measured defaults)");
  app.add_option("--collective,-c", collectives,
                 "AllReduce (default), AllGather, "
                 "ReduceScatter, Broadcast, Reduce; repeatable")
      ->delimiter(',');
  app.add_option("--minbytes,-b", minText, "Smallest size (default 8)");
  app.add_option("--maxbytes,-e", maxText, "Largest size (default 1G)");
  app.add_option("--stepfactor,-f", factor, "Size multiplier per row (default 8)")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--chunk", chunkText,
                 "Pipeline chunk (default TIDAL_CHUNK_SIZE); larger chunks cut the operations a "
                 "tree has at large sizes");
  app.add_option("--algorithms,-a", only, "Only these candidates (e.g. ring,hier)")->delimiter(',');
  app.add_option("--leaf-hosts", leafHosts,
                 "A fat tree: hosts under each leaf switch (0: one non-blocking switch; default: "
                 "the model's hosts_per_leaf)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--oversubscription", oversubscription,
                 "The leaves' links to the spines carry (ranks under the leaf) x network "
                 "bandwidth / this (at least 1; default: the model's)")
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--spine-alpha", spineAlpha,
                 "Extra microseconds for a message between leaves (default: the model's)")
      ->check(CLI::Range(0.0, 1e6));
  CLI11_PARSE(app, argc, argv);

  try {
    tidal::tuner::LinkModel model = tidal::tuner::LinkModel::fromParams();
    std::string modelSource = tidal::params::getString("TIDAL_TUNER_FILE");
    if (modelSource.empty()) modelSource = "this project's measured defaults";
    if (preset == "seed") {
      if (hostCounts.empty()) hostCounts = {2048};
      if (perHost == 0) perHost = 8;
      model = tidal::tuner::LinkModel{};
      model.read(tidal::sim::kSeedModel, "the seed preset");
      modelSource = "the seed preset (tools/tuner/h100_400g.txt)";
    }
    if (!modelFile.empty()) {
      model = tidal::tuner::LinkModel{};
      model.read(readFile(modelFile), modelFile);
      modelSource = modelFile;
    }
    if (leafHosts >= 0) model.hostsPerLeaf = leafHosts;
    if (oversubscription > 0) model.oversubscription = oversubscription;
    if (spineAlpha >= 0) model.spineAlphaUs = spineAlpha;
    if (hostCounts.empty()) hostCounts = {2};
    if (perHost == 0) perHost = 1;
    if (collectives.empty()) collectives = {"AllReduce"};
    const size_t minBytes = parseSize(minText), maxBytes = parseSize(maxText);
    if (minBytes == 0 || minBytes > maxBytes) {
      throw CLI::ValidationError("--minbytes", "must be at least 1 and at most --maxbytes");
    }
    const size_t chunkBytes = chunkText.empty()
                                  ? static_cast<size_t>(tidal::params::getInt("TIDAL_CHUNK_SIZE"))
                                  : parseSize(chunkText);
    if (chunkBytes == 0) throw CLI::ValidationError("--chunk", "must be at least 1");

    std::printf(
        "# tidal-sim: predicted time per call (src/tuner model over the library's own "
        "schedules)\n# links from %s: same host %.2f us + %.0f MB/s, network %.2f us + "
        "%.0f MB/s; reduce %.0f MB/s, copy %.0f MB/s; chunk %s\n",
        modelSource.c_str(), model.sameHost.alphaUs, model.sameHost.bytesPerUs,
        model.network.alphaUs, model.network.bytesPerUs, model.reduceBytesPerUs,
        model.copyBytesPerUs, sizeText(chunkBytes).c_str());
    if (model.hostsPerLeaf > 0) {
      std::printf(
          "# fat tree: %d hosts per leaf, leaf-to-spine links oversubscribed %.2f:1, +%.2f us "
          "between leaves\n",
          model.hostsPerLeaf, model.oversubscription, model.spineAlphaUs);
    } else {
      std::printf("# one non-blocking switch between the hosts\n");
    }
    for (const std::string& name : collectives) {
      const Collective c = collectiveNamed(name);
      for (const int hosts : hostCounts) {
        const tidal::tuner::HostLayout layout{hosts, perHost};
        const int n = layout.nranks();
        const auto started = std::chrono::steady_clock::now();
        auto candidates = tidal::tuner::candidatesFor(c);
        if (!only.empty()) {
          std::erase_if(candidates, [&](const tidal::tuner::Candidate& cand) {
            return std::find(only.begin(), only.end(), cand.name) == only.end();
          });
        }
        std::printf("\n## %s, %d hosts x %d ranks = %d ranks (microseconds)\n%12s", name.c_str(),
                    hosts, perHost, n, "bytes");
        for (const auto& cand : candidates) std::printf(" %13s", cand.name);
        std::printf(" %13s\n", "fastest");
        // How each algorithm was predicted, and what stopped it.
        std::map<std::string, std::string> how;
        for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
          std::printf("%12zu", bytes);
          const char* best = nullptr;
          double bestMicros = 0;
          const tidal::coll::CollectiveArgs args{
              0,          n,    tidal::tuner::elementsFor(c, bytes, n), tidalUint8, tidalSum, 0,
              chunkBytes, false};
          for (const auto& cand : candidates) {
            const bool hierarchical = hosts > 1 && perHost > 1;
            if ((cand.oneChunk && bytes > chunkBytes) || (cand.hierarchical && !hierarchical) ||
                args.count == 0) {
              std::printf(" %13s", "-");
              continue;
            }
            const bool blocks = c == Collective::AllGather || c == Collective::ReduceScatter;
            const auto p = tidal::tuner::predictAtScale(
                cand.build, args, layout, model,
                blocks ? tidal::tuner::CountIs::PerRank : tidal::tuner::CountIs::Whole);
            auto& methods = how[cand.name];
            if (methods.find(p.method) == std::string::npos)
              methods += (methods.empty() ? "" : "; ") + p.method;
            if (!p.micros) {
              std::printf(" %13s", "n/s");
              continue;
            }
            std::printf(" %13.1f", *p.micros);
            if (!best || *p.micros < bestMicros) {
              best = cand.name;
              bestMicros = *p.micros;
            }
          }
          std::printf(" %13s\n", best ? best : "-");
          std::fflush(stdout);
          if (bytes > maxBytes / factor) break;  // the next step would overflow or pass the end
        }
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::printf("# how (n/s: not simulated):");
        for (const auto& [algorithm, methods] : how)
          std::printf(" %s: %s.", algorithm.c_str(), methods.c_str());
        std::printf("\n# simulated in %.1f s\n", took);
      }
    }
    return 0;
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tidal-sim: error: %s\n", e.what());
    return 1;
  }
}
