// Closing a communicator without taking away a message a peer still needs.
//
// A send that completed may still sit in the peer's provider as a message
// that arrived before the peer posted its receive. libfabric 1.17's net
// provider drops such messages when the sender's endpoint closes (ending a
// connection flushes the messages it saved for later matching), so a rank
// that destroyed its communicator right after its last call made a slower
// peer wait for a message that had been delivered, until TIDAL_TIMEOUT
// (CI: the 3-rank suite over net, its final Barrier).
//
// So tidalCommDestroy hands what must stay open
// (Transport::keepOpenUntilPeersClose) and the communicator's bootstrap ring
// to a background thread, which runs one bootstrap barrier while a second
// one keeps progressing what it holds (a manual-progress provider sends the
// acknowledgements its peers' last sends wait for only when asked to). Once
// the barrier passes,
// every rank has reached tidalCommDestroy, so every call of every rank has
// ended and nothing this rank sent is still needed; then what was held
// closes. Destroy itself returns at once, so a program that destroys the
// communicators of several ranks from one thread (tidalCommInitAll's
// pattern), or destroys several communicators in different orders on
// different ranks, cannot deadlock. A peer that exits or aborts ends the
// barrier at once (its bootstrap sockets close). At exit the process waits
// for the barriers still running, each at most TIDAL_TIMEOUT from its
// destroy, then aborts them.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transports/transport.h"

namespace tidal {

// Keeps `held` (and `bootstrap`) until every rank of the communicator has
// done the same, or the ring fails, or TIDAL_TIMEOUT passes at exit.
void closeWhenAllDone(std::unique_ptr<Bootstrap> bootstrap,
                      std::vector<std::shared_ptr<KeptOpen>> held);

// How many closes are still waiting for other ranks (tests, diagnostics).
size_t closesWaiting();

}  // namespace tidal
