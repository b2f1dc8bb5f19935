// A user-space IP switch with a fixed one-way delay and an optional rate
// limit, joining network namespaces through TUN devices: the link delay tc
// netem gives, on kernels built without sch_netem (this project's
// development and CI machines).
//
//   netns_delay_switch -d DELAY_US [-r RATE] [-s SPIN_US] [-i IFNAME] [-m MTU] PORT...
//   PORT: NETNS=A.B.C.D/PREFIX, NETNS a name under /run/netns or "." for the
//         namespace the switch runs in
//
// For each port the switch creates a TUN device IFNAME inside the port's
// namespace, gives it the address and brings it up, so the namespace routes
// the port's subnet through it. Every IPv4 packet read from one port whose
// destination is another port's address is written to that port DELAY_US
// microseconds later (everything else is dropped and counted). One delay for
// every packet keeps each link's packets in order, as netem's delay does.
// When all ports are up it prints "ready" on stdout; on SIGTERM or SIGINT it
// prints what it forwarded on stderr and exits (closing the devices removes
// them). tests/fault/netns_hosts.sh starts it for -d / -D where the kernel
// has no netem, and for -S.
//
// RATE (tc's units: 1gbit, 100mbit) makes every port a full-duplex link of
// that rate: a packet takes its size / RATE to leave its host, after the
// host's earlier packets, and as long to reach its destination, after that
// host's earlier arrivals (cut through: the two overlap), then the delay.
// So a lone message of S bytes arrives S / RATE + DELAY after it was sent,
// whatever the packet size, and two hosts sending to one share its link.
// Unlike tc tbf there is no burst that an idle link may send at once. A
// host's packets wait in the switch for at most 100 ms; beyond that they are
// dropped (tbf's "latency 100ms").
//
// Timing: the switch sleeps in ppoll until SPIN_US (default 40) before the
// next packet is due, with a timer slack of 1 ns, and spins the rest: a
// wake-up from a timer took this VM about 30 us on average (up to 430 us),
// which would add to every delay; with the spin a packet leaves 5 us late on
// average. It asks for SCHED_FIFO so that ranks busy on every core do not
// stretch the delay (its ready line says whether it got it). A packet is
// also late by the time the kernel takes to wake the switch when it
// arrives, which it cannot see; that is part of the link's latency, as a
// real switch's is. The exit line gives the largest and mean lateness of
// the departures it did see. A 2-host TCP ping-pong of 8 bytes through a
// 200 us switch took 508 us a round trip (median; 400 us of delay).
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Port {
  std::string netns;     // "." for the switch's own namespace
  uint32_t address = 0;  // host byte order
  int prefix = 24;
  int fd = -1;
};

constexpr size_t kMaxPacket = 65536;
// With a rate limit, a host's packets queue in the switch for at most this
// long before further ones are dropped (tc tbf's "latency 100ms").
constexpr int64_t kMaxBacklogNs = 100'000'000;

struct Packet {
  int64_t due_ns;
  uint64_t seq;  // arrival order, which breaks ties of due_ns
  size_t port;
  size_t size;
  std::unique_ptr<unsigned char[]> bytes;  // kMaxPacket, reused: no fill per packet
};

// The heap's order: the packet due first on top, arrivals in order among equals.
bool dueLater(const Packet& a, const Packet& b) {
  return a.due_ns != b.due_ns ? a.due_ns > b.due_ns : a.seq > b.seq;
}

volatile sig_atomic_t g_stop = 0;
void onSignal(int) { g_stop = 1; }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "netns_delay_switch: %s\n", what.c_str());
  std::exit(1);
}

// Parses tc's rate units (kbit, mbit, gbit, bit, or a plain number of bits/s).
double parseRate(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const std::string unit = end;
  const double factor = unit.empty() || unit == "bit" ? 1.0
                        : unit == "kbit"              ? 1e3
                        : unit == "mbit"              ? 1e6
                        : unit == "gbit"              ? 1e9
                                                      : -1.0;
  if (end == text.c_str() || factor < 0 || value <= 0)
    die("rate '" + text + "' is not a number of bit, kbit, mbit or gbit per second");
  return value * factor;
}

// A whole decimal number in [low, high], or die naming the option.
long parseNumber(const char* text, long low, long high, const char* option) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < low || value > high) {
    die(std::string(option) + " '" + text + "' is not a number in " + std::to_string(low) + ".." +
        std::to_string(high));
  }
  return value;
}

std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

Port parsePort(const std::string& text) {
  const size_t eq = text.find('=');
  const size_t slash = text.find('/');
  if (eq == std::string::npos || eq == 0) die("port '" + text + "' is not NETNS=A.B.C.D/PREFIX");
  Port port;
  port.netns = text.substr(0, eq);
  const std::string ip = text.substr(eq + 1, slash == std::string::npos ? slash : slash - eq - 1);
  in_addr parsed{};
  if (inet_pton(AF_INET, ip.c_str(), &parsed) != 1)
    die("port '" + text + "': '" + ip + "' is not an IPv4 address");
  port.address = ntohl(parsed.s_addr);
  if (slash != std::string::npos) {
    char* end = nullptr;
    const long prefix = std::strtol(text.c_str() + slash + 1, &end, 10);
    if (*end != '\0' || prefix < 1 || prefix > 30)
      die("port '" + text + "': the prefix must be 1..30");
    port.prefix = static_cast<int>(prefix);
  }
  return port;
}

// Enters NETNS (by name under /run/netns) for the lifetime of the object and
// returns to the namespace it started in afterwards.
class InNamespace {
 public:
  explicit InNamespace(const std::string& netns) {
    if (netns == ".") return;
    home_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const std::string path = "/run/netns/" + netns;
    const int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (home_ < 0 || target < 0) die(errnoText("open " + path));
    if (setns(target, CLONE_NEWNET) != 0) die(errnoText("setns " + path));
    close(target);
  }
  ~InNamespace() {
    if (home_ < 0) return;
    if (setns(home_, CLONE_NEWNET) != 0) die(errnoText("setns back"));
    close(home_);
  }
  InNamespace(const InNamespace&) = delete;
  InNamespace& operator=(const InNamespace&) = delete;

 private:
  int home_ = -1;
};

void interfaceIoctl(int sock, unsigned long request, ifreq& req, const char* what) {
  if (ioctl(sock, request, &req) != 0) die(errnoText(std::string(what) + " " + req.ifr_name));
}

void setIpv4(int sock, ifreq& req, unsigned long request, uint32_t value, const char* what) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(value);
  std::memcpy(&req.ifr_addr, &addr, sizeof addr);
  interfaceIoctl(sock, request, req, what);
}

// Creates the port's TUN device in its namespace, addressed and up.
void openPort(Port& port, const std::string& ifname, int mtu) {
  InNamespace inside(port.netns);
  port.fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (port.fd < 0) die(errnoText("open /dev/net/tun"));
  ifreq req{};
  req.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(req.ifr_name, IFNAMSIZ, "%s", ifname.c_str());
  if (ioctl(port.fd, TUNSETIFF, &req) != 0)
    die(errnoText("TUNSETIFF " + ifname + " in " + port.netns));
  const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) die(errnoText("socket"));
  setIpv4(sock, req, SIOCSIFADDR, port.address, "SIOCSIFADDR");
  setIpv4(sock, req, SIOCSIFNETMASK, ~uint32_t{0} << (32 - port.prefix), "SIOCSIFNETMASK");
  req.ifr_mtu = mtu;
  interfaceIoctl(sock, SIOCSIFMTU, req, "SIOCSIFMTU");
  interfaceIoctl(sock, SIOCGIFFLAGS, req, "SIOCGIFFLAGS");
  req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP);
  interfaceIoctl(sock, SIOCSIFFLAGS, req, "SIOCSIFFLAGS");
  close(sock);
}

}  // namespace

int main(int argc, char** argv) {
  long delay_us = -1;
  long spin_us = 40;
  double rate_bits = 0;  // 0: no limit
  int mtu = 65000;       // large packets keep a 10 Gbit/s link to a few 10k packets a second
  std::string ifname = "tdlsw";
  int opt;
  while ((opt = getopt(argc, argv, "d:i:m:r:s:")) != -1) {
    switch (opt) {
      case 'd':
        delay_us = parseNumber(optarg, 0, 10000000, "-d DELAY_US");
        break;
      case 'i':
        ifname = optarg;
        break;
      case 'r':
        rate_bits = parseRate(optarg);
        break;
      case 's':
        spin_us = parseNumber(optarg, 0, 1000, "-s SPIN_US");
        break;
      case 'm':
        mtu = static_cast<int>(parseNumber(optarg, 576, 65535, "-m MTU"));
        break;
      default:
        die("usage: netns_delay_switch -d DELAY_US [-r RATE] [-s SPIN_US] [-i IFNAME] [-m MTU] "
            "NETNS=A.B.C.D/P...");
    }
  }
  if (delay_us < 0) die("-d DELAY_US is required");
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) die("-i IFNAME must be 1..15 characters");
  if (argc - optind < 2) die("needs at least two ports");

  std::vector<Port> ports;
  for (int i = optind; i < argc; ++i) ports.push_back(parsePort(argv[i]));
  for (Port& port : ports) openPort(port, ifname, mtu);

  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sched_param fifo{};
  fifo.sched_priority = 1;
  const bool realtime = sched_setscheduler(0, SCHED_FIFO, &fifo) == 0;

  // SIGTERM and SIGINT are taken only inside ppoll, so a forward is never cut short.
  sigset_t blocked, during_poll;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  sigprocmask(SIG_BLOCK, &blocked, &during_poll);
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  char rate_text[64] = "no rate limit";
  if (rate_bits > 0)
    std::snprintf(rate_text, sizeof rate_text, "%.0f Mbit/s a port", rate_bits / 1e6);
  std::printf("ready: %zu ports, %ld us one-way delay, %s, MTU %d, %s\n", ports.size(), delay_us,
              rate_text, mtu, realtime ? "SCHED_FIFO" : "normal scheduling (SCHED_FIFO refused)");
  std::fflush(stdout);

  const int64_t delay_ns = int64_t{delay_us} * 1000;
  const int64_t spin_ns = int64_t{spin_us} * 1000;
  const double ns_per_byte = rate_bits > 0 ? 8e9 / rate_bits : 0;
  // A port's transmitter (its host's sends) and receiver (what the switch
  // sends it) are each busy until these times; a packet waits for both, so a
  // host that two others send to at once takes them at the port's rate.
  std::vector<int64_t> sending_until(ports.size(), 0), receiving_until(ports.size(), 0);
  std::vector<Packet> queue;  // a heap by due time (dueLater)
  uint64_t arrivals = 0, overflowed = 0;
  std::vector<std::unique_ptr<unsigned char[]>> spare;
  std::vector<pollfd> fds(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) fds[i] = {ports[i].fd, POLLIN, 0};
  uint64_t forwarded = 0, forwarded_bytes = 0, dropped = 0;
  int64_t late_max_ns = 0, late_sum_ns = 0;

  while (!g_stop) {
    timespec wait{};
    timespec* timeout = nullptr;
    if (!queue.empty()) {
      // Wake spin_ns early and spin the rest: waking from a sleep takes this
      // VM tens of microseconds, which would otherwise add to every delay.
      const int64_t left = std::max<int64_t>(0, queue.front().due_ns - spin_ns - nowNs());
      wait.tv_sec = left / 1000000000;
      wait.tv_nsec = left % 1000000000;
      timeout = &wait;
    }
    if (ppoll(fds.data(), fds.size(), timeout, &during_poll) < 0 && errno != EINTR)
      die(errnoText("ppoll"));
    for (size_t i = 0; i < ports.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      for (;;) {
        std::unique_ptr<unsigned char[]> bytes;
        if (spare.empty()) {
          bytes = std::make_unique_for_overwrite<unsigned char[]>(kMaxPacket);
        } else {
          bytes = std::move(spare.back());
          spare.pop_back();
        }
        const ssize_t n = read(ports[i].fd, bytes.get(), kMaxPacket);
        if (n < 0) {
          spare.push_back(std::move(bytes));
          if (errno == EAGAIN || errno == EINTR) break;
          die(errnoText("read from port " + ports[i].netns));
        }
        size_t to = ports.size();
        if (n >= 20 && (bytes[0] >> 4) == 4) {
          uint32_t destination;
          std::memcpy(&destination, bytes.get() + 16, 4);
          destination = ntohl(destination);
          for (size_t j = 0; j < ports.size(); ++j)
            if (j != i && ports[j].address == destination) to = j;
        }
        if (to == ports.size()) {
          ++dropped;
          spare.push_back(std::move(bytes));
          continue;
        }
        const int64_t now = nowNs();
        int64_t sent = now;
        if (ns_per_byte > 0) {
          // Cut-through: the switch forwards as the bytes come in, so the
          // packet's last byte reaches its host one serialisation after it
          // started to leave, or after the host's earlier arrivals.
          const auto on_wire = static_cast<int64_t>(static_cast<double>(n) * ns_per_byte);
          if (sending_until[i] - now > kMaxBacklogNs) {
            ++overflowed;  // a full transmit queue drops, as tc tbf's limit does
            spare.push_back(std::move(bytes));
            continue;
          }
          sending_until[i] = std::max(now, sending_until[i]) + on_wire;
          receiving_until[to] = std::max(sending_until[i], receiving_until[to] + on_wire);
          sent = receiving_until[to];
        }
        queue.push_back(
            {sent + delay_ns, arrivals++, to, static_cast<size_t>(n), std::move(bytes)});
        std::push_heap(queue.begin(), queue.end(), dueLater);
      }
    }
    int64_t now = nowNs();
    if (!queue.empty() && queue.front().due_ns > now && queue.front().due_ns - now <= spin_ns) {
      while (now < queue.front().due_ns) now = nowNs();
    }
    while (!queue.empty() && queue.front().due_ns <= now) {
      std::pop_heap(queue.begin(), queue.end(), dueLater);
      Packet& packet = queue.back();
      // A TUN write hands the packet to the namespace's stack at once; it
      // fails only when the device is gone or the packet is malformed.
      if (write(ports[packet.port].fd, packet.bytes.get(), packet.size) < 0) {
        ++dropped;
      } else {
        ++forwarded;
        forwarded_bytes += packet.size;
        late_max_ns = std::max(late_max_ns, now - packet.due_ns);
        late_sum_ns += now - packet.due_ns;
      }
      spare.push_back(std::move(packet.bytes));
      queue.pop_back();
    }
  }
  std::fprintf(stderr,
               "netns_delay_switch: forwarded %llu packets (%llu bytes), dropped %llu (%llu for a "
               "full transmit queue); late by %.1f us at most, %.1f us on average\n",
               static_cast<unsigned long long>(forwarded),
               static_cast<unsigned long long>(forwarded_bytes),
               static_cast<unsigned long long>(dropped + overflowed),
               static_cast<unsigned long long>(overflowed), late_max_ns / 1e3,
               forwarded ? late_sum_ns / 1e3 / static_cast<double>(forwarded) : 0.0);
  return 0;
}
