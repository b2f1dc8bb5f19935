#include "transports/ib/protocol.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "net/wire.h"

namespace tidal::ib {

namespace {

constexpr uint32_t kHandleMagic = 0x54444942u;  // "TDIB"
constexpr uint16_t kHandleVersion = 2;          // 2: a list of rails
static_assert(8 + 24 + kMaxRails * (kPortAddressBytes + kRailNameBytes) <= kMaxConnectHandleBytes,
              "the listen handle of kMaxRails rails must fit the bootstrap's handle slot");

void writeU64(wire::Writer& w, uint64_t v) {
  w.u32(static_cast<uint32_t>(v));
  w.u32(static_cast<uint32_t>(v >> 32));
}
uint64_t readU64(wire::Reader& r) {
  const uint64_t lo = r.u32();
  return lo | (uint64_t{r.u32()} << 32);
}

void writePort(wire::Writer& w, const PortAddress& p) {
  w.u32(p.ethernet ? 1 : 0);
  w.u32(p.lid);
  w.u32(static_cast<uint32_t>(p.mtu));
  w.u32(p.gidIndex);
  w.bytes(p.gid.data(), p.gid.size());
}
PortAddress readPort(wire::Reader& r) {
  PortAddress p;
  p.ethernet = r.u32() != 0;
  p.lid = static_cast<uint16_t>(r.u32());
  const uint32_t mtu = r.u32();
  if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) {
    fail(tidalRemoteError, "ib set-up message carries MTU code {}", mtu);
  }
  p.mtu = static_cast<ibv_mtu>(mtu);
  p.gidIndex = r.u32();
  r.bytes(p.gid.data(), p.gid.size());
  return p;
}

void writeQps(wire::Writer& w, const std::vector<QpEndpoint>& qps) {
  for (int i = 0; i < kMaxQpsPerConnection; ++i) {
    const QpEndpoint e =
        i < static_cast<int>(qps.size()) ? qps[static_cast<size_t>(i)] : QpEndpoint{};
    w.u32(e.qpn);
    w.u32(e.psn);
  }
}
std::vector<QpEndpoint> readQps(wire::Reader& r, uint32_t n) {
  std::vector<QpEndpoint> qps;
  for (int i = 0; i < kMaxQpsPerConnection; ++i) {
    QpEndpoint e;
    e.qpn = r.u32();
    e.psn = r.u32();
    if (static_cast<uint32_t>(i) < n) qps.push_back(e);
  }
  return qps;
}

}  // namespace

std::string geometryText(const ConnectionGeometry& geometry) {
  const uint32_t eager = geometry.eagerBytes;
  return fmt::format(
      "{} QP{}, eager <= {}", geometry.nqps, geometry.nqps == 1 ? "" : "s",
      eager % 1024 == 0 ? fmt::format("{} KiB", eager / 1024) : fmt::format("{} B", eager));
}

ConnectHandle encodeListenInfo(const ListenInfo& info) {
  ConnectHandle h;
  wire::Writer w(h);
  w.u32(kHandleMagic);
  w.u16(kHandleVersion);
  w.u16(static_cast<uint16_t>(info.rails.size()));
  w.address(info.sideChannel);
  for (const RailAddress& rail : info.rails) {
    writePort(w, rail.port);
    char name[kRailNameBytes] = {};
    rail.name.copy(name, kRailNameBytes - 1);
    w.bytes(name, sizeof name);
  }
  return h;
}

ListenInfo decodeListenInfo(const ConnectHandle& handle, int selfRank, int peer) {
  const std::string what = fmt::format("rank {}: ib handle of rank {}", selfRank, peer);
  wire::Reader r(handle.data(), handle.size(), what);
  if (r.u32() != kHandleMagic || r.u16() != kHandleVersion) {
    fail(tidalInvalidUsage, "{} is not a version {} ib handle (mixed Tidal versions?)", what,
         kHandleVersion);
  }
  const uint16_t rails = r.u16();
  if (rails < 1 || rails > kMaxRails) {
    fail(tidalInvalidUsage, "{} lists {} rails (1..{} expected)", what, rails, kMaxRails);
  }
  ListenInfo info;
  info.sideChannel = r.address();
  for (uint16_t i = 0; i < rails; ++i) {
    RailAddress rail;
    rail.port = readPort(r);
    char name[kRailNameBytes] = {};
    r.bytes(name, sizeof name);
    rail.name.assign(name, strnlen(name, sizeof name - 1));
    info.rails.push_back(rail);
  }
  return info;
}

std::vector<uint8_t> encodeHello(const Secret& secret, const Hello& h) {
  std::vector<uint8_t> out;
  wire::Writer w(out);
  w.bytes(secret.data(), secret.size());
  w.u32(static_cast<uint32_t>(h.fromRank));
  w.u32(static_cast<uint32_t>(h.toRank));
  w.u32(h.geometry.nqps);
  w.u32(h.geometry.eagerBytes);
  w.u32(h.geometry.eagerSlots);
  w.u32(h.fifoRkey);
  writePort(w, h.port);
  writeU64(w, h.fifoAddr);
  w.u32((h.rail.index & 0xff) | (h.rail.count & 0xff) << 8 | (h.rail.offered & 0xff) << 16);
  writeQps(w, h.qps);
  return out;
}

Hello decodeHello(const std::vector<uint8_t>& body) {
  wire::Reader r(body.data(), body.size(), "ib hello");
  Hello h;
  h.fromRank = static_cast<int32_t>(r.u32());
  h.toRank = static_cast<int32_t>(r.u32());
  h.geometry.nqps = r.u32();
  h.geometry.eagerBytes = r.u32();
  h.geometry.eagerSlots = r.u32();
  h.fifoRkey = r.u32();
  h.port = readPort(r);
  h.fifoAddr = readU64(r);
  const uint32_t rail = r.u32();
  h.rail.index = rail & 0xff;
  h.rail.count = (rail >> 8) & 0xff;
  h.rail.offered = (rail >> 16) & 0xff;
  const uint32_t n = std::min<uint32_t>(h.geometry.nqps, kMaxQpsPerConnection);
  h.qps = readQps(r, n);
  return h;
}

std::vector<uint8_t> encodeReply(const Reply& reply) {
  std::vector<uint8_t> out;
  wire::Writer w(out);
  writePort(w, reply.port);
  writeU64(w, reply.eagerAddr);
  w.u32(reply.eagerRkey);
  w.u32(0);  // reserved
  w.u32(0);
  writeQps(w, reply.qps);
  return out;
}

Reply decodeReply(const std::vector<uint8_t>& bytes, uint32_t nqps) {
  wire::Reader r(bytes.data(), bytes.size(), "ib reply");
  Reply reply;
  reply.port = readPort(r);
  reply.eagerAddr = readU64(r);
  reply.eagerRkey = r.u32();
  r.u32();
  r.u32();
  reply.qps = readQps(r, nqps);
  return reply;
}

}  // namespace tidal::ib
