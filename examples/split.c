/*
 * Communicator split: even and odd ranks each get a communicator of their
 * own (as torch.distributed.new_group does), sum inside it, and the parent
 * stays usable beside them.
 *
 *   tidalrun -np 5 ./split
 *
 * tidalCommSplit is collective over the parent: every rank calls it, with a
 * color (which new communicator) and a key (the order inside it; here the
 * parent's rank, so the order is kept). TIDAL_SPLIT_NOCOLOR takes part
 * without joining any.
 */
#include <stdio.h>

#include "tidal/tidal.h"

static int report(tidalResult_t result, const char* call, tidalComm_t comm) {
  fprintf(stderr, "%s failed: %s: %s\n", call, tidalGetErrorString(result),
          tidalGetLastError(comm));
  return 1;
}

int main(void) {
  tidalComm_t world = NULL, half = NULL;
  tidalResult_t result = tidalCommInitFromEnv(&world);
  if (result != tidalSuccess) return report(result, "tidalCommInitFromEnv", NULL);
  int rank = 0, nranks = 0;
  tidalCommUserRank(world, &rank);
  tidalCommCount(world, &nranks);

  result = tidalCommSplit(world, rank % 2, rank, &half, NULL);
  if (result != tidalSuccess) return report(result, "tidalCommSplit", world);
  int subRank = 0, subSize = 0;
  tidalCommUserRank(half, &subRank);
  tidalCommCount(half, &subSize);

  /* The sum of the parent ranks of my color, and of all ranks on the parent. */
  double mine = rank, sameColor = 0, everyone = 0;
  result = tidalAllReduce(&mine, &sameColor, 1, tidalFloat64, tidalSum, half, NULL);
  if (result != tidalSuccess) return report(result, "tidalAllReduce (split)", half);
  result = tidalAllReduce(&mine, &everyone, 1, tidalFloat64, tidalSum, world, NULL);
  if (result != tidalSuccess) return report(result, "tidalAllReduce (parent)", world);

  double wantSame = 0;
  for (int r = rank % 2; r < nranks; r += 2) wantSame += r;
  const double wantAll = nranks * (nranks - 1) / 2.0;
  const int ok = sameColor == wantSame && everyone == wantAll;
  printf("rank %d of %d: %s ranks, rank %d of %d there: sum %g (parent %g) %s\n", rank, nranks,
         rank % 2 ? "odd" : "even", subRank, subSize, sameColor, everyone, ok ? "ok" : "WRONG");
  tidalCommDestroy(half);
  tidalCommDestroy(world);
  return ok ? 0 : 1;
}
