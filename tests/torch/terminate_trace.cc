// Loaded into every rank of the torch tests (launch.py puts it in LD_PRELOAD):
// when std::terminate runs, it prints the native stack before aborting, so a
// failure such as "terminate called without an active exception" in a CI log
// says which code ended the process. Python's faulthandler (worker.py) adds
// the Python threads' stacks.
#include <execinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace {

std::terminate_handler previous = nullptr;

void printStackThenTerminate() {
  void* frames[64];
  const int n = backtrace(frames, 64);
  std::fprintf(stderr, "[terminate_trace] std::terminate in pid %d, native stack:\n",
               static_cast<int>(getpid()));
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // The default handler names the exception in flight, if any.
  if (previous) previous();
  std::abort();
}

__attribute__((constructor)) void install() {
  previous = std::set_terminate(printStackThenTerminate);
}

}  // namespace
