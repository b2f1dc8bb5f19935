// The two complementary binary trees of the double-binary-tree AllReduce
// (double_binary_tree.cc).
//
// Tree A is the in-order binary tree over positions 1..n: a position p with
// lowest set bit L sits at height log2(L); its parent is p - L when p has bit
// 2L set, else p + L (either way a position whose lowest set bit is 2L), and
// where that lies beyond n the rule is applied again from there, so ranges
// cut off at n hang from the nearest ancestor that exists. The root is the
// largest power of two <= n. Every position has at most two children, and
// half of them (the odd positions) are leaves.
//
// Rank r sits at position r + 1 in tree A. Tree B renumbers: mirrored
// (position n - r) when n is even, shifted by one (position (r + 1) mod n + 1)
// when n is odd. Mirroring an even n maps odd positions to even ones, so a
// rank that is a leaf in one tree is inner in the other, and every rank
// forwards data in at most one of them: the two trees together use each
// rank's link about as much as one tree does, and each carries half the data.
#pragma once

#include <cstddef>
#include <vector>

namespace tidal::coll {

struct BinaryTree {
  // Indexed by rank: parent rank (-1 at the root), children ranks, height
  // (leaves 0) and depth (root 0).
  std::vector<int> parent, height, depth;
  std::vector<std::vector<int>> children;
  int root = 0;
  int treeHeight() const { return height[static_cast<size_t>(root)]; }
};

// which: 0 for tree A, 1 for tree B.
BinaryTree doubleBinaryTree(int nranks, int which);

// Every peer rank talks to in either tree (parents and children).
std::vector<int> doubleBinaryTreePeers(int rank, int nranks);

}  // namespace tidal::coll
