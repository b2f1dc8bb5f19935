// How many tasks are runnable on this host right now, for a yielding wait
// that must tell "the core went to another rank of this job" from "it went
// to some other busy process" (Engine, Run::longYield).
//
// With more ranks than CPUs, a yield that keeps the core away for a
// millisecond or more happens both ways: with 8 ranks on 2 CPUs the core
// goes round three other ranks, and beside a busy loop the loop takes a
// whole time slice. Only the second is helped by sleeping instead of
// yielding (8 ranks that sleep took 100-130 us per 8-byte AllReduce against
// 18-19 us yielding; 4 ranks beside two busy loops 25-250 us against
// 3.6-7.7 ms). The kernel's count of runnable tasks (/proc/loadavg's fourth
// field) tells them apart: more runnable tasks than the host's ranks means
// someone else wants the CPUs.
#pragma once

namespace tidal {

// The number of runnable tasks on the host (the caller included), or -1
// when it cannot be read. It counts the whole host, also CPUs outside this
// process's mask.
int runnableTasksOnHost();

}  // namespace tidal
