// Writes the seed corpus (tests/fuzz/corpus/<harness>/) from the real
// encoders, so that the fuzzers start from well-formed messages and mutate
// from there. Rebuild and rerun after a wire format changes:
//   clang++ -std=c++20 -I src -I include -I . tests/fuzz/make_seeds.cc <the
//   sources run_fuzzers.sh lists> $(pkg-config --cflags --libs spdlog fmt) -o make_seeds
//   ./make_seeds tests/fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bootstrap/unique_id.h"
#include "engine/call_signature.h"
#include "net/notice.h"
#include "net/wire.h"
#include "transports/ib/protocol.h"

using namespace tidal;

namespace {

void write(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> withHeader(wire::MsgType type, const std::vector<uint8_t>& body) {
  const auto h = wire::encodeHeader(type, static_cast<uint32_t>(body.size()));
  std::vector<uint8_t> out(h.begin(), h.end());
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "tests/fuzz/corpus";
  const Secret secret = parseSecret("0123456789abcdef0123456789abcdef", "seed");

  // Root hello (secret, rank, nranks, address) and an address table.
  std::vector<uint8_t> hello;
  wire::Writer w(hello);
  w.bytes(secret.data(), secret.size());
  w.u32(3);
  w.u32(8);
  w.address(SocketAddress::parse("10.1.2.3:41000"));
  write(root + "/fuzz_wire", "hello", withHeader(wire::MsgType::Hello, hello));
  std::vector<uint8_t> table;
  wire::Writer t(table);
  t.address(SocketAddress::parse("127.0.0.1:5000"));
  t.address(SocketAddress::parse("[::1]:5001"));
  write(root + "/fuzz_wire", "table", withHeader(wire::MsgType::AddressTable, table));
  write(root + "/fuzz_wire", "notice",
        withHeader(wire::MsgType::Notice,
                   wire::encodeNotice({wire::Notice::Kind::Finding, 1, tidalInvalidUsage,
                                       "rank 1: AllReduce: mismatched collective"})));

  UniqueId id;
  id.root = SocketAddress::parse("192.168.7.9:29500");
  id.secret = secret;
  const tidalUniqueId raw = encodeUniqueId(id);
  write(root + "/fuzz_unique_id", "ipv4",
        std::vector<uint8_t>(raw.internal, raw.internal + sizeof raw.internal));
  id.root = SocketAddress::parse("[fe80::1]:29500");
  const tidalUniqueId raw6 = encodeUniqueId(id);
  write(root + "/fuzz_unique_id", "ipv6",
        std::vector<uint8_t>(raw6.internal, raw6.internal + sizeof raw6.internal));

  // ib: a listen handle of two rails, a hello of two QPs, a reply.
  ib::ListenInfo info;
  info.sideChannel = SocketAddress::parse("10.0.0.5:40001");
  info.rails.push_back({"mlx5_0:1", {}});
  info.rails.push_back({"mlx5_1:1", {}});
  std::vector<uint8_t> handle = ib::encodeListenInfo(info);
  handle.insert(handle.begin(), 0);  // harness selector 0: listen handle
  write(root + "/fuzz_ib_protocol", "listen", handle);
  ib::Hello h;
  h.fromRank = 1;
  h.toRank = 2;
  h.qps = {{17, 99}, {18, 100}};
  std::vector<uint8_t> ibHello = ib::encodeHello(secret, h);
  ibHello.erase(ibHello.begin(), ibHello.begin() + static_cast<std::ptrdiff_t>(secret.size()));
  ibHello.insert(ibHello.begin(), 1);  // selector 1: hello body after the secret
  write(root + "/fuzz_ib_protocol", "hello", ibHello);
  ib::Reply reply;
  reply.qps = {{21, 7}, {22, 8}};
  std::vector<uint8_t> ibReply = ib::encodeReply(reply);
  ibReply.insert(ibReply.begin(), static_cast<uint8_t>(2 | (2 << 2)));  // selector 2, 2 QPs
  write(root + "/fuzz_ib_protocol", "reply", ibReply);

  const CallSignature sig =
      CallSignature::make(CallKind::Broadcast, 16, 1 << 20, tidalBfloat16, CallSignature::kNone, 3);
  const auto* p = reinterpret_cast<const uint8_t*>(&sig);
  write(root + "/fuzz_call_signature", "broadcast", std::vector<uint8_t>(p, p + sizeof sig));
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
