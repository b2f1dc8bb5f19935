// Double binary tree AllReduce, for messages where both latency and
// bandwidth count.
//
// When it wins: the ring (ring_allreduce.cc) is bandwidth-optimal but takes
// 2(n - 1) dependent steps, so its latency grows linearly with n; recursive
// doubling and Rabenseifner take log steps but their partners are up to n/2
// ranks away and their steps do not pipeline. A binary tree reduces chunks
// up to the root and broadcasts them back down, pipelined: with k chunks it
// takes about k + 2 log2(n) chunk times, so its latency grows with log2(n).
// One tree alone sends everything through the root's link twice and leaves
// half its ranks (the leaves) sending only; two complementary trees
// (double_binary_tree.h), each carrying half of the buffer, make every rank
// inner in at most one of them, so every link carries about the ring's
// bytes. This is how NCCL scales AllReduce to thousands of GPUs.
//
// The schedule: the first half of the buffer goes over tree A, the second
// over tree B, each cut into chunks. For each chunk a leaf sends its input to
// its parent; an inner rank reduces its children's chunks into recvbuff (the
// first with its own input) and sends the sum to its parent; the root reduces
// its children's and holds the result (avg divides by n in its last
// reduction), then sends it to its children, and every rank forwards the
// result it receives to its children.
//
// Sends and receives run in list order, so the order decides the pipelining.
// Each operation is given the step at which it can start when every chunk
// moves one hop per step: the reduce send of chunk k by a rank of height h at
// step k + h, the broadcast send by a rank at depth d at step k + H + d (H the
// tree's height), a receive at its matching send's step. Both lists are
// sorted by step; every operation waits only for operations of earlier
// steps, so the order cannot deadlock, and chunk k + 1 climbs the tree while
// chunk k comes down. Every reducing receive is one chunk (one staging slot).
#include "collectives/double_binary_tree.h"

#include <algorithm>
#include <bit>
#include <tuple>

#include "collectives/ring_steps.h"
#include "core/dtype.h"

namespace tidal::coll {

namespace {

int lowBit(int p) { return p & -p; }

// Parent position of position p in the in-order tree over 1..n; 0 at the root.
int parentPosition(int p, int n) {
  for (int q = p;;) {
    const int l = lowBit(q);
    if (l > n) return 0;  // q is the root or above it
    q = (q & (2 * l)) ? q - l : q + l;
    if (q <= n && q != p) return q;
  }
}

}  // namespace

BinaryTree doubleBinaryTree(int n, int which) {
  const auto position = [&](int rank) {
    if (which == 0) return rank + 1;
    return n % 2 == 0 ? n - rank : (rank + 1) % n + 1;
  };
  std::vector<int> rankAt(static_cast<size_t>(n) + 1);
  for (int r = 0; r < n; ++r) rankAt[static_cast<size_t>(position(r))] = r;
  BinaryTree t;
  const auto un = static_cast<size_t>(n);
  t.parent.assign(un, -1);
  t.height.assign(un, 0);
  t.depth.assign(un, 0);
  t.children.assign(un, {});
  for (int r = 0; r < n; ++r) {
    const int pp = parentPosition(position(r), n);
    if (pp == 0) {
      t.root = r;
      continue;
    }
    const int parent = rankAt[static_cast<size_t>(pp)];
    t.parent[static_cast<size_t>(r)] = parent;
    t.children[static_cast<size_t>(parent)].push_back(r);
  }
  // Heights bottom-up: a position's height is at most log2 of its lowest
  // bit, so visiting positions by increasing lowest bit sees children first.
  std::vector<int> byLevel(un);
  for (int r = 0; r < n; ++r) byLevel[static_cast<size_t>(r)] = r;
  std::sort(byLevel.begin(), byLevel.end(), [&](int a, int b) {
    return std::pair{lowBit(position(a)), a} < std::pair{lowBit(position(b)), b};
  });
  for (const int r : byLevel) {
    for (const int c : t.children[static_cast<size_t>(r)]) {
      t.height[static_cast<size_t>(r)] =
          std::max(t.height[static_cast<size_t>(r)], t.height[static_cast<size_t>(c)] + 1);
    }
  }
  for (auto r = byLevel.rbegin(); r != byLevel.rend(); ++r) {
    for (const int c : t.children[static_cast<size_t>(*r)])
      t.depth[static_cast<size_t>(c)] = t.depth[static_cast<size_t>(*r)] + 1;
  }
  return t;
}

namespace {

// Whoever builds every rank's schedule of one call (the tuner, tidal-sim at
// 16,384 ranks) asks for the same two trees once per rank, and a tree costs
// O(n log n) to make: the last two made are kept, per thread.
const BinaryTree& treeOf(int n, int which) {
  thread_local int madeFor[2] = {-1, -1};
  thread_local BinaryTree made[2];
  const auto w = static_cast<size_t>(which);
  if (madeFor[w] != n) {
    made[w] = doubleBinaryTree(n, which);
    madeFor[w] = n;
  }
  return made[w];
}

}  // namespace

std::vector<int> doubleBinaryTreePeers(int rank, int nranks) {
  std::vector<int> out;
  for (const int which : {0, 1}) {
    const BinaryTree& t = treeOf(nranks, which);
    const auto r = static_cast<size_t>(rank);
    std::vector<int> peers = t.children[r];
    if (t.parent[r] >= 0) peers.push_back(t.parent[r]);
    for (const int p : peers)
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

Schedule doubleBinaryTreeAllReduce(const CollectiveArgs& a) {
  Schedule s;
  s.type = a.type;
  s.op = a.op == tidalAvg ? tidalSum : a.op;
  const size_t ts = typeSize(a.type);
  const int n = a.nranks;
  const auto me = static_cast<size_t>(a.rank);
  if (n == 1 || a.count == 0) {
    if (!a.inPlace && a.count > 0)
      s.prologue.push_back({{Buffer::Send, 0}, {Buffer::Recv, 0}, a.count * ts});
    return s;
  }
  const size_t chunk = chunkElems(a.chunkBytes, ts);
  const size_t half = a.count / 2;

  // Operations with their step, sorted before the dependencies are wired.
  enum class Role { ReduceIn, ReduceOut, ResultIn, ResultOut };
  struct Op {
    int step, tree;
    size_t chunkIndex;  // in this tree's half
    Role role;
    int peer;
    Range range;  // elements
  };
  const BinaryTree* const trees[2] = {&treeOf(n, 0), &treeOf(n, 1)};
  std::vector<Op> ops;
  for (const int which : {0, 1}) {
    const BinaryTree& t = *trees[which];
    const Range part = which == 0 ? Range{0, half} : Range{half, a.count - half};
    const int h = t.height[me], d = t.depth[me], top = t.treeHeight();
    const auto chunks = chunksOf(part.size, chunk);
    for (size_t k = 0; k < chunks.size(); ++k) {
      const Range range{part.begin + chunks[k].begin, chunks[k].size};
      const int ks = static_cast<int>(k);
      for (const int c : t.children[me]) {
        ops.push_back({ks + t.height[static_cast<size_t>(c)], which, k, Role::ReduceIn, c, range});
        ops.push_back({ks + top + d, which, k, Role::ResultOut, c, range});
      }
      if (t.parent[me] >= 0) {
        ops.push_back({ks + h, which, k, Role::ReduceOut, t.parent[me], range});
        ops.push_back({ks + top + d - 1, which, k, Role::ResultIn, t.parent[me], range});
      }
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [](const Op& x, const Op& y) {
    return std::tie(x.step, x.tree) < std::tie(y.step, y.tree);
  });

  // Receives first: then each send knows the index of what it waits for.
  // (tree, chunk) -> last reduce receive so far, and the result receive.
  std::vector<std::vector<int64_t>> lastReduce(2), result(2);
  for (int which : {0, 1}) {
    const size_t size = which == 0 ? half : a.count - half;
    lastReduce[static_cast<size_t>(which)].assign((size + chunk - 1) / chunk, -1);
    result[static_cast<size_t>(which)].assign((size + chunk - 1) / chunk, -1);
  }
  // How many reduce receives of each (tree, chunk) came so far: the root
  // divides in the last.
  std::vector<std::vector<size_t>> reducedSoFar(2);
  for (int which : {0, 1})
    reducedSoFar[static_cast<size_t>(which)].assign(lastReduce[static_cast<size_t>(which)].size(),
                                                    0);
  for (const Op& op : ops) {
    const size_t off = op.range.begin * ts, bytes = op.range.size * ts;
    auto& last = lastReduce[static_cast<size_t>(op.tree)][op.chunkIndex];
    if (op.role == Role::ReduceIn) {
      auto& done = reducedSoFar[static_cast<size_t>(op.tree)][op.chunkIndex];
      ++done;
      const BinaryTree& t = *trees[op.tree];
      const bool lastAtRoot = t.root == a.rank && done == t.children[me].size();
      const int divisor = lastAtRoot && a.op == tidalAvg ? n : 0;
      const Buffer local = last < 0 ? Buffer::Send : Buffer::Recv;
      last = static_cast<int64_t>(s.recvs.size());
      s.recvs.push_back({op.peer, {Buffer::Recv, off}, bytes, true, {local, off}, divisor});
    } else if (op.role == Role::ResultIn) {
      result[static_cast<size_t>(op.tree)][op.chunkIndex] = static_cast<int64_t>(s.recvs.size());
      s.recvs.push_back({op.peer, {Buffer::Recv, off}, bytes, false, {}, 0});
    }
  }
  for (const Op& op : ops) {
    const size_t off = op.range.begin * ts, bytes = op.range.size * ts;
    const int64_t reduced = lastReduce[static_cast<size_t>(op.tree)][op.chunkIndex];
    if (op.role == Role::ReduceOut) {
      // A leaf sends its input; an inner rank the sum it reduced.
      s.sends.push_back(
          {op.peer, {reduced < 0 ? Buffer::Send : Buffer::Recv, off}, bytes, reduced});
    } else if (op.role == Role::ResultOut) {
      const int64_t in = result[static_cast<size_t>(op.tree)][op.chunkIndex];
      s.sends.push_back({op.peer, {Buffer::Recv, off}, bytes, in >= 0 ? in : reduced});
    }
  }
  return s;
}

}  // namespace tidal::coll
