// Text for people: the matrix `nvidia-smi topo -m` prints (every GPU and NIC
// against every other, the class in each cell, then CPU and NUMA affinity)
// and one line per local rank's choice. tidal-info --topo prints both.
#pragma once

#include <string>

#include "topology/nic_choice.h"
#include "topology/topology.h"

namespace tidal::topo {

std::string topologyMatrix(const Topology& t);

// "rank 0  GPU0 0000:18:00.0  NICs mlx5_0:1  PIX  GDR on (PIX is within
// TIDAL_NET_GDR_LEVEL=PXB)  CPUs 0-55,112-167"
std::string choiceLine(const RankChoice& c);

}  // namespace tidal::topo
