// Cluster: devices of one profile grouped into nodes, with a link class inside a node and one
// between nodes; presets `<device>x<count>`, `cpu` (this machine) and JSON cluster files. Mesh
// axes map onto link classes, the innermost axes inside a node.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/cost/DeviceProfile.h"
#include "heddle/sharding/Mesh.h"

namespace heddle::cost {

/// One class of links: what one device sees when every device of its group communicates at once.
struct LinkClass {
  std::string name;       ///< `nvlink`, `infiniband`, `shared-memory`, ...
  double bandwidth = 0;   ///< bus bandwidth per device, bytes/s (> 0)
  double latency = 1e-5;  ///< alpha, seconds per step of a collective; default 10 us
  bool operator==(const LinkClass&) const = default;
  size_t hash() const;
  /// `nvlink (230 GB/s, 10 us)`.
  std::string to_string() const;
};

/// An immutable cluster description.
struct Cluster {
  std::string name;  ///< `a100x64`, `cpu`, or the file's name field
  DeviceProfile device;
  int64_t count = 1;             ///< devices (>= 1)
  int64_t devices_per_node = 8;  ///< >= 1
  LinkClass intra_node;          ///< links inside a node
  LinkClass inter_node;          ///< links between nodes
  /// Host (CPU) memory per device for offloaded state, bytes; default 0: none (offload= is
  /// refused).
  double host_memory_bytes = 0;
  /// Bytes/s one device moves to or from host memory (PCIe, per direction); default 0: none.
  double host_bandwidth = 0;
  /// Host DRAM bytes/s per device (the node's over its devices): what an optimizer step on the
  /// host streams at (offload=optimizer); default 0: host_bandwidth.
  double host_memory_bandwidth = 0;
  std::string source;  ///< where the figures come from (preset, file, calibration)

  /// The link class a collective over mesh axis `a` uses: axes are laid out row-major with the
  /// last axis fastest, so axis a spans `prod(sizes[a..])` consecutive devices; it stays inside a
  /// node when that product is at most devices_per_node. Precondition: 0 <= a < mesh.rank().
  const LinkClass& axis_link(const Mesh& mesh, int64_t a) const;
  /// The link between pipeline stages when each stage holds `stage_devices` devices.
  const LinkClass& stage_link(int64_t stage_devices) const;

  bool operator==(const Cluster&) const = default;
  size_t hash() const;
  /// A few lines: device, count, nodes, links, source.
  std::string to_string() const;
};

/// `<device>x<count>` with a preset device (8 per node; NVLink inside, InfiniBand between, V100
/// nodes joined by 25 Gb/s as Alpa's clusters; the node's host memory and PCIe link shared by its
/// 8 devices). Unknown devices list the known ones.
Result<Cluster> cluster_preset(std::string_view spec);

/// A cluster from JSON text (`file` names it in diagnostics; a missing or mistyped field is named):
/// `{"name": .., "device": "a100" | {"name", "peak_flops", "memory_bytes", "memory_bandwidth",
/// ...}, "count": N, "devices_per_node": 8, "intra_node": {"bandwidth", "latency"},
/// "inter_node": {...}, "host_memory_bytes": .., "host_bandwidth": .., "host_memory_bandwidth":
/// ..}` (host figures per device, optional).
Result<Cluster> cluster_from_json(std::string_view text, const std::string& file);

/// Resolves a `--cluster` argument: `cpu` (see cpu_cluster()), a preset, or a JSON file path.
/// Unknown names list the presets.
Result<Cluster> resolve_cluster(std::string_view spec);

/// The `cpu` cluster: the profile written by `heddle calibrate` at cpu_profile_path() if there is
/// one, else a built-in fallback; `source` says which.
Result<Cluster> cpu_cluster();

/// `$HEDDLE_CPU_PROFILE` if set, else `$HOME/.config/heddle/cpu-profile.json`.
std::string cpu_profile_path();

}  // namespace heddle::cost
