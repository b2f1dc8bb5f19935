// Which RDMA ports and which GID a rank uses: the pure decisions, kept apart
// from verbs so that unit tests can drive them with a fake sysfs tree.
//
// TIDAL_IB_HCA selects ports: "mlx5_0:1,mlx5_1" (name prefixes, optional
// port), "^mlx5_2" excludes, "=mlx5_0" makes names exact ("^=" both).
//
// RoCE needs a GID index, and a wrong one is the most common RoCE failure:
// the port's GID table has one entry per (address, RoCE version), so an
// interface with an IPv4 and an IPv6 address shows four or more. The
// automatic choice is the lowest index whose type (sysfs
// gid_attrs/types/N) is "RoCE v2" and whose address is IPv4-mapped
// (::ffff:a.b.c.d), routable over UDP/IP like the hosts' own traffic;
// TIDAL_IB_ADDR_FAMILY=AF_INET6 prefers IPv6 (global before link-local) and
// TIDAL_IB_ADDR_RANGE=CIDR keeps only addresses inside it.
// TIDAL_IB_GID_INDEX overrides all of it, and is checked: an empty or
// unreadable entry is an error that lists the usable ones.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tidal::ib {

struct HcaSpec {
  struct Item {
    std::string name;
    int port = 0;  // 0: every port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Item> items;  // empty: every port
};

// Throws InvalidArgument naming TIDAL_IB_HCA and the text when it does not parse.
HcaSpec parseHcaSpec(const std::string& text);
bool hcaMatches(const HcaSpec& spec, const std::string& device, int port);

// Which of the usable ports ("mlx5_0:1", in scan order) a rank listens on:
// among those the topology prefers for it (its GPU's nearest NICs,
// topology/nic_choice.h) when any of them is usable, else among all; rank
// mod count either way. Returns an index into `usable`, which is not empty.
size_t pickPort(const std::vector<std::string>& usable, const std::vector<std::string>& preferred,
                int rank);

// Where a rank's candidate ports come from, for the choice of its rails.
struct RailSource {
  // The topology's NICs for this rank ("mlx5_0:1"); empty: none.
  std::vector<std::string> preferred;
  // True when `preferred` is this rank's own nearest set (the topology
  // restricted it), false when it is every NIC (no restriction).
  bool nearest = false;
  // True when TIDAL_IB_HCA lists the ports to use (not a ^ exclusion).
  bool listed = false;
};

// The ports a rank stripes its connections over (its rails), as indexes
// into `usable` in its order. Several only where they are meant for this
// rank: the topology's nearest NICs for it (those usable), or the usable
// ports TIDAL_IB_HCA lists; at most `maxRails` of them, the window starting
// at rank x maxRails (mod count) when there are more. Anything else, or
// maxRails 1, gives the one port pickPort gives.
std::vector<size_t> pickRails(const std::vector<std::string>& usable, const RailSource& source,
                              int rank, size_t maxRails);

struct GidEntry {
  int index = 0;
  std::array<uint8_t, 16> raw{};
  std::string type;  // "RoCE v2", "IB/RoCE v1", or "" when unreadable (unused entry)

  bool empty() const;
  bool ipv4Mapped() const;
  bool linkLocal() const;  // fe80::/10
  bool roceV2() const { return type == "RoCE v2"; }
  // "::ffff:10.0.0.1" / "fe80::1"
  std::string address() const;
  // "1 ::ffff:10.0.0.1 (RoCE v2)"
  std::string describe() const;
};

// Reads DIR/gids/N and DIR/gid_attrs/types/N for N = 0, 1, ... until gids/N
// is missing. DIR is a port directory: /sys/class/infiniband/DEV/ports/P.
std::vector<GidEntry> readGidTable(const std::string& portDir);

struct AddressRange {
  std::array<uint8_t, 16> prefix{};  // IPv4 as IPv4-mapped IPv6
  int bits = 0;                      // prefix length counted in the 128-bit form
  bool contains(const std::array<uint8_t, 16>& address) const;
};
// "10.0.0.0/8", "fd00::/8". Throws InvalidArgument naming TIDAL_IB_ADDR_RANGE.
AddressRange parseAddressRange(const std::string& text);

struct GidPolicy {
  int overrideIndex = -1;  // TIDAL_IB_GID_INDEX
  int family = 0;          // 0, AF_INET or AF_INET6 (TIDAL_IB_ADDR_FAMILY)
  std::optional<AddressRange> range;
  std::string familyText, rangeText;  // as the user wrote them, for messages
};

// Reads TIDAL_IB_GID_INDEX / _ADDR_FAMILY / _ADDR_RANGE (validated).
GidPolicy gidPolicyFromParams(int rank);

// The GID a RoCE port should use. `where` is "rxe0 port 1". Throws
// InvalidArgument with the table, the variables and what to set.
GidEntry chooseRoceGid(const std::vector<GidEntry>& table, const GidPolicy& policy,
                       const std::string& where, int rank);

}  // namespace tidal::ib
