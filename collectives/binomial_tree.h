// The binomial tree that the tree schedules share (binomial_gather_scatter.cc,
// binomial_broadcast_reduce.cc).
//
// Ranks are renumbered so the root is 0: vrank v = rank - root (mod n). v's
// parent is v minus its lowest set bit; its children are v + 2^k for every
// 2^k below that bit (every 2^k, for the root) that stays below n. v's subtree
// is then the contiguous vranks [v, v + size(v)), and the tree is
// ceil(log2 n) levels deep for any n.
#pragma once

#include <algorithm>
#include <vector>

#include "collectives/ring_steps.h"

namespace tidal::coll {

struct BinomialRanks {
  int n, root;

  int vrank(int rank) const { return mod(rank - root, n); }
  int rankOf(int v) const { return mod(v + root, n); }
  static int lowBit(int v) { return v & -v; }
  int size(int v) const { return v == 0 ? n : std::min(lowBit(v), n - v); }
  static int parent(int v) { return v - lowBit(v); }
  // Nearest (smallest subtree) first.
  std::vector<int> children(int v) const {
    std::vector<int> out;
    for (int step = 1; v + step < n && (v == 0 || step < lowBit(v)); step *= 2)
      out.push_back(v + step);
    return out;
  }
};

}  // namespace tidal::coll
