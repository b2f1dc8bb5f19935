// Port hardware counters (/sys/class/infiniband/DEV/ports/P/hw_counters).
//
// RoCE operators find congestion through them: CNPs sent and handled (DCQCN
// at work), ECN-marked packets, out-of-sequence packets, local ACK timeouts
// and retries. The device takes a snapshot when the communicator starts and
// logs the difference at INFO when it ends, so one job's share is visible
// without root or vendor tools. Names differ per driver (mlx5: np_cnp_sent,
// rp_cnp_handled, np_ecn_marked_roce_packets, out_of_sequence,
// local_ack_timeout_err; rxe: retry_exceeded_err, rcvd_seq_err, ...), so every
// counter the port exposes is read and the ones that moved are printed.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace tidal::ib {

using CounterSnapshot = std::map<std::string, uint64_t>;

// Empty when the port has no hw_counters directory.
CounterSnapshot readHwCounters(const std::string& portDir);

// "sent_pkts +120, rcvd_pkts +118; congestion: np_cnp_sent +0" or a line
// saying that nothing moved / the port exposes no counters.
std::string counterDeltaText(const CounterSnapshot& before, const CounterSnapshot& after);

}  // namespace tidal::ib
