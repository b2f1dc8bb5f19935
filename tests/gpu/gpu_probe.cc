// Exits 0 when a CUDA device is usable, else prints "skipped: no CUDA
// device (...)" and exits 77: the multi-process GPU tests run it first, so
// that CTest reports them as skipped on machines without a GPU.
#include "gpu_check.h"

int main() {
  tidal::gputest::skipWithoutDevice();
  return 0;
}
