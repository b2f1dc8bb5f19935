/*
 * The smallest Tidal program: join the job the launcher started, sum a vector
 * across all ranks, check the result.
 *
 *   tidalrun -np 4 ./minimal_c
 *
 * Works the same under torchrun, mpirun or srun: tidalCommInitFromEnv reads
 * whichever launcher's environment it finds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tidal/tidal.h"

#define COUNT 1024

static int report(tidalResult_t result, const char* call, tidalComm_t comm) {
  fprintf(stderr, "%s failed: %s: %s\n", call, tidalGetErrorString(result),
          tidalGetLastError(comm));
  return 1;
}

int main(void) {
  tidalComm_t comm = NULL;
  tidalResult_t result = tidalCommInitFromEnv(&comm);
  if (result != tidalSuccess) return report(result, "tidalCommInitFromEnv", NULL);

  int rank = 0;
  int nranks = 0;
  tidalCommUserRank(comm, &rank);
  tidalCommCount(comm, &nranks);

  /* Rank r contributes r + i at index i, so the sum is known in closed form:
   * sum over r of (r + i) = n(n-1)/2 + n*i. All values are small integers,
   * exact in float whatever the order of additions. */
  float* data = malloc(COUNT * sizeof *data);
  if (data == NULL) return 1;
  for (int i = 0; i < COUNT; ++i) data[i] = (float)(rank + i);

  result = tidalAllReduce(data, data, COUNT, tidalFloat32, tidalSum, comm, NULL);
  if (result != tidalSuccess) {
    report(result, "tidalAllReduce", comm);
    tidalCommAbort(comm);
    free(data);
    return 1;
  }

  int wrong = 0;
  for (int i = 0; i < COUNT; ++i) {
    const float expected = (float)(nranks * (nranks - 1) / 2 + nranks * i);
    if (data[i] != expected) {
      if (wrong < 5) {
        fprintf(stderr, "rank %d: data[%d] = %g, expected %g\n", rank, i, data[i], expected);
      }
      ++wrong;
    }
  }
  printf("rank %d of %d: allreduce of %d floats %s\n", rank, nranks, COUNT,
         wrong == 0 ? "ok" : "WRONG");
  free(data);

  result = tidalCommDestroy(comm);
  if (result != tidalSuccess) return report(result, "tidalCommDestroy", NULL);
  return wrong == 0 ? 0 : 1;
}
