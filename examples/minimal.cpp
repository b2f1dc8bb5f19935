// minimal.c in C++: the same job through tidal.hpp, with RAII and exceptions.
//
//   tidalrun -np 4 ./minimal_cpp
#include <cstdio>
#include <exception>
#include <numeric>
#include <span>
#include <vector>

#include "tidal/tidal.hpp"

int main() try {
  auto comm = tidal::Communicator::fromEnv();
  const int rank = comm.rank();
  const int n = comm.size();

  // Rank r contributes r + i at index i; the sum is n(n-1)/2 + n*i, exact in
  // float for these small integers.
  std::vector<float> data(1024);
  std::iota(data.begin(), data.end(), static_cast<float>(rank));
  comm.allReduce(std::span(data));  // in place, tidalSum

  size_t wrong = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    const auto expected = static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i));
    if (data[i] != expected && wrong++ < 5) {
      std::fprintf(stderr, "rank %d: data[%zu] = %g, expected %g\n", rank, i, data[i], expected);
    }
  }
  std::printf("rank %d of %d: allreduce of %zu floats %s\n", rank, n, data.size(),
              wrong == 0 ? "ok" : "WRONG");
  comm.destroy();  // explicit, so a failure to shut down is reported
  return wrong == 0 ? 0 : 1;
} catch (const tidal::Error& e) {
  std::fprintf(stderr, "tidal error %d: %s\n", static_cast<int>(e.code()), e.what());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
