#include "bootstrap/launcher_env.h"

#include <arpa/inet.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <exception>

#include "bootstrap/bootstrap.h"
#include "bootstrap/pmix.h"
#include "core/error.h"
#include "core/log.h"
#include "core/params.h"
#include "net/wire.h"

namespace tidal {

namespace {

// Where rank and size may come from, in the order they are tried.
struct RankSource {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* localRank;  // nullptr: the launcher has none
  const char* localSize;
};

constexpr RankSource kRankSources[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

// Variables that are the same on every rank of one job and differ between
// jobs: they make the derived secret job-specific.
constexpr const char* kJobIdVariables[] = {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                           "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};

constexpr const char* kLookedFor =
    "TIDAL_RANK/TIDAL_NRANKS (with TIDAL_COMM_ID), RANK/WORLD_SIZE (torchrun), "
    "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (Open MPI), PMI_RANK/PMI_SIZE (MPICH), "
    "SLURM_PROCID/SLURM_NTASKS (Slurm)";

const char* env(const char* name) {
  const char* v = name ? std::getenv(name) : nullptr;
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

int parseIntVar(const char* name, const char* text) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < INT_MIN || v > INT_MAX) {
    fail(tidalInvalidArgument, "{}='{}' is not an integer", name, text);
  }
  return static_cast<int>(v);
}

void checkRankSize(const char* rankName, int rank, const char* sizeName, int size) {
  if (size < 1) fail(tidalInvalidArgument, "{}={} must be at least 1", sizeName, size);
  if (rank < 0 || rank >= size) {
    fail(tidalInvalidArgument, "{}={} is out of range for {}={}", rankName, rank, sizeName, size);
  }
}

bool readTidalRank(LaunchInfo& info) {
  const int64_t rank = params::getInt("TIDAL_RANK");
  const int64_t size = params::getInt("TIDAL_NRANKS");
  if (rank == -1 && size == -1) return false;
  if (rank == -1 || size == -1) {
    fail(tidalInvalidUsage, "{} is set but {} is not", rank == -1 ? "TIDAL_NRANKS" : "TIDAL_RANK",
         rank == -1 ? "TIDAL_RANK" : "TIDAL_NRANKS");
  }
  if (size < 1 || size > wire::kMaxRanks) {
    fail(tidalInvalidArgument, "TIDAL_NRANKS={} is not in 1..{}", size, wire::kMaxRanks);
  }
  if (rank < 0 || rank >= size) {
    fail(tidalInvalidArgument, "TIDAL_RANK={} is out of range for TIDAL_NRANKS={}", rank, size);
  }
  info.launcher = "tidal";
  info.rank = static_cast<int>(rank);
  info.nranks = static_cast<int>(size);
  return true;
}

bool readLauncherRank(LaunchInfo& info, const RankSource& src) {
  const char* rankText = env(src.rank);
  const char* sizeText = env(src.size);
  // Names like RANK are generic: only a complete pair means this launcher.
  if (rankText == nullptr || sizeText == nullptr) return false;
  info.launcher = src.launcher;
  info.rank = parseIntVar(src.rank, rankText);
  info.nranks = parseIntVar(src.size, sizeText);
  checkRankSize(src.rank, info.rank, src.size, info.nranks);
  if (const char* t = env(src.localRank)) info.localRank = parseIntVar(src.localRank, t);
  if (const char* t = env(src.localSize)) info.localNranks = parseIntVar(src.localSize, t);
  if (info.localNranks != -1 && info.localNranks < 1) {
    fail(tidalInvalidArgument, "{}={} must be at least 1", src.localSize, info.localNranks);
  }
  if (info.localRank < -1 ||
      (info.localRank != -1 && info.localNranks != -1 && info.localRank >= info.localNranks)) {
    fail(tidalInvalidArgument, "{}={} is out of range for {}={}", src.localRank, info.localRank,
         src.localSize ? src.localSize : "?", info.localNranks);
  }
  return true;
}

void readRendezvous(LaunchInfo& info) {
  const std::string commId = params::getString("TIDAL_COMM_ID");
  if (!commId.empty()) {
    try {
      info.root = SocketAddress::parse(commId);
    } catch (const Error& e) {
      fail(tidalInvalidArgument, "TIDAL_COMM_ID='{}': {}", commId, e.what());
    }
    if (info.root->port() == 0) {
      fail(tidalInvalidArgument, "TIDAL_COMM_ID='{}': port 0 cannot be connected to", commId);
    }
    info.rootText = commId;
    info.rootSource = "TIDAL_COMM_ID";
    return;
  }
  const char* addr = env("MASTER_ADDR");
  const char* portText = env("MASTER_PORT");
  if (addr == nullptr && portText == nullptr) return;
  if (addr == nullptr || portText == nullptr) {
    TIDAL_WARN(Env, "{} is set but {} is not; ignoring it", addr ? "MASTER_ADDR" : "MASTER_PORT",
               addr ? "MASTER_PORT" : "MASTER_ADDR");
    return;
  }
  const int port = parseIntVar("MASTER_PORT", portText);
  const int64_t offset = params::getInt("TIDAL_MASTER_PORT_OFFSET");
  if (port < 1 || port > 65535) {
    fail(tidalInvalidArgument, "MASTER_PORT={} is not a port number (1..65535)", port);
  }
  if (offset < 0 || port + offset > 65535) {
    fail(tidalInvalidArgument, "MASTER_PORT={} + TIDAL_MASTER_PORT_OFFSET={} is not a port", port,
         offset);
  }
  const std::string host = addr;
  const bool bareV6 = host.find(':') != std::string::npos && host.front() != '[';
  info.rootText = fmt::format("{}:{}", bareV6 ? "[" + host + "]" : host, port + offset);
  info.rootSource =
      offset == 0 ? "MASTER_ADDR/MASTER_PORT" : fmt::format("MASTER_ADDR/MASTER_PORT+{}", offset);
  try {
    info.root = SocketAddress::parse(info.rootText);
  } catch (const Error& e) {
    fail(tidalInvalidArgument, "MASTER_ADDR='{}': {}", host, e.what());
  }
}

// The host part of "host:port" / "[v6]:port".
std::string hostOf(const std::string& hostPort) {
  if (!hostPort.empty() && hostPort.front() == '[') {
    return hostPort.substr(1, hostPort.find(']') - 1);
  }
  return hostPort.substr(0, hostPort.rfind(':'));
}

// What rank 0's root binds to for an address taken from the environment:
// that exact address when it is an IP of this host; otherwise (a host name,
// which may resolve differently here than on the other hosts, or an address
// routed to us from elsewhere) every interface on that port.
SocketAddress rootBindAddress(const LaunchInfo& launch) {
  const std::string host = hostOf(launch.rootText);
  unsigned char buf[sizeof(in6_addr)];
  const bool literal =
      inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
  if (literal && isAddressOfThisHost(*launch.root)) return *launch.root;
  if (literal) {
    TIDAL_WARN(Boot,
               "{} names {}, which is not an address of this host, but this process is rank 0 and "
               "hosts the bootstrap root; listening on all interfaces on port {}",
               launch.rootSource, host, launch.root->port());
  } else {
    TIDAL_INFO(Boot, "{} names host '{}'; the bootstrap root listens on all interfaces, port {}",
               launch.rootSource, host, launch.root->port());
  }
  return SocketAddress::wildcard(launch.root->family(), launch.root->port());
}

uint64_t fnv1a64(const std::string& text, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  // splitmix64 finaliser: spread every input bit over the output.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::string hexOf(const tidalUniqueId& raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char ch : raw.internal) {
    const auto b = static_cast<unsigned char>(ch);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

UniqueId uniqueIdFromHex(const std::string& hex) {
  tidalUniqueId raw{};
  if (hex.size() != 2 * sizeof raw.internal) {
    fail(tidalRemoteError, "PMIx: rank 0 published a unique id of {} characters, expected {}",
         hex.size(), 2 * sizeof raw.internal);
  }
  for (size_t i = 0; i < sizeof raw.internal; ++i) {
    raw.internal[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return decodeUniqueId(raw);
}

UniqueId agreeThroughPmix() {
  std::exception_ptr makeError;
  const auto make = [&]() -> std::string {
    try {
      UniqueId id;
      // Always random: PMIx delivers it, so nothing needs a shared value.
      id.secret = randomSecret();
      id.root = startRoot(localInterfaceAddress(), id.secret);
      return hexOf(encodeUniqueId(id));
    } catch (const std::exception& e) {
      // Still publish, so the other ranks fail now instead of at the fence's timeout.
      makeError = std::current_exception();
      return std::string("!") + e.what();
    }
  };
  std::string text;
  try {
    text = pmix::shareFromRank0(make, static_cast<int>(timeoutSeconds()));
  } catch (const Error& e) {
    if (makeError) std::rethrow_exception(makeError);
    fail(e.code(),
         "cannot agree on a unique id: no rendezvous address in the environment (TIDAL_COMM_ID, "
         "or MASTER_ADDR and MASTER_PORT) and {}",
         e.what());
  }
  if (makeError) std::rethrow_exception(makeError);
  if (!text.empty() && text.front() == '!') {
    fail(tidalRemoteError, "PMIx rank 0 could not create the unique id: {}", text.substr(1));
  }
  return uniqueIdFromHex(text);
}

}  // namespace

LaunchInfo detectLaunch() {
  LaunchInfo info;
  bool found = readTidalRank(info);
  for (const auto& src : kRankSources) {
    if (found) break;
    found = readLauncherRank(info, src);
  }
  if (!found) {
    fail(tidalInvalidUsage, "no launcher found in the environment: looked for {}", kLookedFor);
  }
  readRendezvous(info);
  const std::string secret = params::getString("TIDAL_SECRET");
  if (!secret.empty()) info.secret = parseSecret(secret, "TIDAL_SECRET");
  return info;
}

Secret derivedSecret(const std::string& rootText, int nranks) {
  std::string material = fmt::format("tidal-derived-secret-v1\n{}\n{}", rootText, nranks);
  for (const char* name : kJobIdVariables) {
    if (const char* v = env(name)) material += fmt::format("\n{}={}", name, v);
  }
  Secret s{};
  const uint64_t a = fnv1a64(material, 14695981039346656037ull);
  const uint64_t b = fnv1a64(material, a ^ 0x9e3779b97f4a7c15ull);
  for (int i = 0; i < 8; ++i) {
    s[static_cast<size_t>(i)] = static_cast<uint8_t>(a >> (8 * i));
    s[static_cast<size_t>(8 + i)] = static_cast<uint8_t>(b >> (8 * i));
  }
  return s;
}

UniqueId agreeOnUniqueId(const LaunchInfo& launch) {
  if (launch.nranks < 1 || launch.rank < 0 || launch.rank >= launch.nranks) {
    fail(tidalInvalidUsage, "agreeOnUniqueId: launch info has rank {} of {}; call detectLaunch()",
         launch.rank, launch.nranks);
  }
  if (!launch.root) {
    if (!pmix::serverAdvertised()) {
      fail(tidalInvalidUsage,
           "cannot agree on a unique id: {} gave rank {} of {} but no rendezvous address; set "
           "TIDAL_COMM_ID=host:port, or MASTER_ADDR and MASTER_PORT, or launch under PMIx "
           "(mpirun, srun --mpi=pmix): PMIX_NAMESPACE is not set",
           launch.launcher, launch.rank, launch.nranks);
    }
    return agreeThroughPmix();
  }
  UniqueId id;
  id.root = *launch.root;
  if (launch.secret) {
    id.secret = *launch.secret;
  } else {
    id.secret = derivedSecret(launch.rootText, launch.nranks);
    if (launch.rank == 0) {
      TIDAL_INFO(Boot,
                 "TIDAL_SECRET is not set: the bootstrap secret is derived from {} ({}), nranks "
                 "and job variables, so it is weak; set TIDAL_SECRET to the same 32 hex digits on "
                 "every rank to keep strangers out of the rendezvous",
                 launch.rootSource, launch.rootText);
    }
  }
  if (launch.rank == 0) startRoot(rootBindAddress(launch), id.secret);
  return id;
}

}  // namespace tidal
