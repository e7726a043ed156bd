// Liveness of MPI peers, private to the MPI backend: which peers' processes this rank can watch
// (those under the same kernel boot and in the same PID namespace: a host name alone is not
// enough, containers on host networking share it but not their process ids), the first watched
// peer whose process is gone, and the SIGTERM handler that says why a rank stops (a text line or,
// with --json, a JSON failure record) and exits 5 (a peer is gone) or 143.
#pragma once

#include <cstdint>
#include <vector>

namespace heddle::mpi_liveness {

/// What every rank tells every other at start-up (exchanged as raw bytes: a fixed layout).
struct PeerId {
  int64_t pid = 0;
  char host[64] = {};
  char boot_id[40] = {};  ///< the kernel's boot id ("" when unknown)
  uint64_t pid_ns = 0;    ///< the inode of /proc/self/ns/pid (0 when unknown)
};

/// This process's PeerId.
PeerId this_peer();

/// Starts watching: `all` is every rank's PeerId in rank order, `rank` this process's. Installs
/// the SIGTERM handler; its record is a JSON line when `json`, a text line (with a UTC timestamp
/// when `timestamps`) otherwise.
void watch_peers(int rank, const std::vector<PeerId>& all, bool json, bool timestamps);

/// Stops watching and restores SIGTERM's default action.
void stop_watching();

/// The first watched peer whose process is gone, or -1.
int dead_peer();

/// This rank has reported its failure itself: a later SIGTERM prints nothing and exits 5.
void mark_reported();

}  // namespace heddle::mpi_liveness
