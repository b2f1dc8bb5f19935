#include "tidalrun/job_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <system_error>

#include "tidalrun/unique_fd.h"

namespace tidalrun {

namespace {

// Whether 127.0.0.1:port can be bound now (0: any; *port gets the one bound).
bool bindable(int* port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return false;
  socklen_t len = sizeof addr;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::system_error(errno, std::generic_category(), "getsockname");
  }
  *port = ntohs(addr.sin_port);
  return true;
}

// The lowest port the kernel hands out to connect() and bind(0).
int ephemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  return (in >> low >> high) ? low : 0;
}

}  // namespace

int pickFreePort() {
  // Rank 0 binds the port only later. A port from the ephemeral range (what
  // bind(0) gives) can be taken in between by any connect() on the host, and
  // with two jobs side by side one was: rank 0 failed with "Address already
  // in use". Ports below the range are only ever taken by a bind that names
  // them, so a random free one there is safe from that.
  constexpr int kLowest = 10000;
  const int low = ephemeralLow();
  if (low > kLowest + 1000) {
    for (int attempt = 0; attempt < 64; ++attempt) {
      uint32_t r = 0;
      if (::getrandom(&r, sizeof r, 0) != sizeof r) break;
      int port = kLowest + static_cast<int>(r % static_cast<uint32_t>(low - kLowest));
      if (bindable(&port)) return port;
    }
  }
  int port = 0;
  if (!bindable(&port)) throw std::system_error(errno, std::generic_category(), "bind 127.0.0.1:0");
  return port;
}

std::string makeSecret() {
  unsigned char bytes[16];
  size_t have = 0;
  while (have < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + have, sizeof bytes - have, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    have += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

std::vector<std::string> rankEnvironment(const Options& options, const JobIdentity& job, int rank,
                                         char* const* inherited) {
  // An ordered map keeps the child's environment deterministic and lets later
  // layers replace earlier ones by name.
  std::map<std::string, std::string> env;
  for (char* const* e = inherited; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  const std::string n = std::to_string(options.nranks);
  const std::string r = std::to_string(rank);
  const std::string port = std::to_string(job.port);
  // torchrun's names, so programs written for it run unchanged...
  env["RANK"] = r;
  env["WORLD_SIZE"] = n;
  env["LOCAL_RANK"] = r;  // one host: local and global rank coincide
  env["LOCAL_WORLD_SIZE"] = n;
  env["MASTER_ADDR"] = job.address;
  env["MASTER_PORT"] = port;
  // ...and Tidal's own, which tidalCommInitFromEnv prefers and which carry the
  // secret that keeps a stray process from joining the job.
  env["TIDAL_COMM_ID"] = job.address + ":" + port;
  env["TIDAL_RANK"] = r;
  env["TIDAL_NRANKS"] = n;
  env["TIDAL_SECRET"] = job.secret;
  // --bind none: the library must not bind at init either.
  if (options.bind == tidal::topo::BindPolicy::None) env["TIDAL_BIND"] = "none";
  for (const auto& [name, value] : options.extraEnv) env[name] = value;

  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace tidalrun
