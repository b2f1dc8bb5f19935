/*
 * Send/Recv in a group: every rank passes a block to its right neighbour and
 * another to its left, posted together so neither direction waits for the
 * other, then checks what arrived.
 *
 *   tidalrun -np 4 ./sendrecv_group
 *
 * Outside a group a Send blocks until its data has left, so a ring where
 * every rank first sends and then receives could wait on itself; inside
 * tidalGroupStart/tidalGroupEnd every operation is posted at once and the
 * pattern always completes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tidal/tidal.h"

#define COUNT 4096

static int report(tidalResult_t result, const char* call, tidalComm_t comm) {
  fprintf(stderr, "%s failed: %s: %s\n", call, tidalGetErrorString(result),
          tidalGetLastError(comm));
  return 1;
}

int main(void) {
  tidalComm_t comm = NULL;
  tidalResult_t result = tidalCommInitFromEnv(&comm);
  if (result != tidalSuccess) return report(result, "tidalCommInitFromEnv", NULL);
  int rank = 0, nranks = 0;
  tidalCommUserRank(comm, &rank);
  tidalCommCount(comm, &nranks);
  const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;

  /* What rank r sends to its right is r * 10 + i; to its left, -(r * 10 + i). */
  int* toRight = malloc(COUNT * sizeof *toRight);
  int* toLeft = malloc(COUNT * sizeof *toLeft);
  int* fromLeft = malloc(COUNT * sizeof *fromLeft);
  int* fromRight = malloc(COUNT * sizeof *fromRight);
  if (!toRight || !toLeft || !fromLeft || !fromRight) return 1;
  for (int i = 0; i < COUNT; ++i) {
    toRight[i] = rank * 10 + i;
    toLeft[i] = -(rank * 10 + i);
  }

  tidalGroupStart();
  tidalSend(toRight, COUNT, tidalInt32, right, comm, NULL);
  tidalSend(toLeft, COUNT, tidalInt32, left, comm, NULL);
  tidalRecv(fromLeft, COUNT, tidalInt32, left, comm, NULL);
  tidalRecv(fromRight, COUNT, tidalInt32, right, comm, NULL);
  result = tidalGroupEnd(); /* errors of the calls above surface here */
  if (result != tidalSuccess) {
    report(result, "tidalGroupEnd", comm);
    tidalCommAbort(comm);
    return 1;
  }

  int wrong = 0;
  for (int i = 0; i < COUNT; ++i) {
    wrong += fromLeft[i] != left * 10 + i;
    wrong += fromRight[i] != -(right * 10 + i);
  }
  printf("rank %d of %d: ring exchange with %d and %d %s\n", rank, nranks, left, right,
         wrong == 0 ? "ok" : "WRONG");
  free(toRight);
  free(toLeft);
  free(fromLeft);
  free(fromRight);
  tidalCommDestroy(comm);
  return wrong == 0 ? 0 : 1;
}
