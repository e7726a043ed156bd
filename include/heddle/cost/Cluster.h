// Cluster: devices of one profile grouped into nodes, with a link class inside a node and one
// between nodes; presets `<device>x<count>`, `cpu` (this machine) and JSON cluster files. Mesh
// axes map onto link classes, the innermost axes inside a node. A mixed cluster (a file with
// `kinds`) holds several such groups of devices and the links between them.
#pragma once

#include <functional>
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

/// The link between the devices of two kinds of a mixed cluster.
struct KindLink {
  std::string a, b;  ///< the two kinds' names
  LinkClass link;    ///< bandwidth per device and latency of a transfer between them
  bool operator==(const KindLink&) const = default;
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
  /// Non-volatile storage per device for ZeRO-Infinity's NVMe offload (the node's NVMe drives
  /// over its devices), bytes; default 0: none (offload=optimizer+params:nvme is refused).
  double nvme_bytes = 0;
  /// Bytes/s one device reads from / writes to its share of the node's NVMe drives; default 0.
  double nvme_read_bandwidth = 0, nvme_write_bandwidth = 0;
  std::string source;  ///< where the figures come from (preset, file, calibration)
  /// A mixed cluster's device kinds in the file's order, each a homogeneous cluster of its own
  /// devices (numbered kind after kind: kind 0's first); empty: one kind, this cluster. A mixed
  /// cluster's own `device`, links and figures are kind 0's (its host and NVMe figures the
  /// least over kinds) and `count` is every kind's devices.
  std::vector<Cluster> kinds;
  std::vector<KindLink> kind_links;  ///< one per pair of kinds (mixed clusters)

  /// True for a cluster of several device kinds.
  bool mixed() const { return !kinds.empty(); }
  /// The kind (index into `kinds`) of devices [first, first + n); -1 when they span kinds or
  /// run past the last device; 0 for a cluster of one kind. Precondition: first >= 0, n >= 1.
  int64_t kind_of(int64_t first, int64_t n) const;
  /// The cluster of kind k: `kinds[k]`, or this cluster when it has one kind.
  const Cluster& kind(int64_t k) const;
  /// The link between kinds a and b (a != b: the file's link; a == b: the kind's inter-node
  /// link). Precondition: both are kinds of this mixed cluster.
  const LinkClass& kind_link(int64_t a, int64_t b) const;
  /// The devices' mean bf16 peak FLOP/s (a one-kind cluster: its device's).
  double mean_peak_flops() const;
  /// Applies `f` to every device profile: `device` and each kind's (--memory, --memory-reserve).
  void for_each_device(const std::function<void(DeviceProfile&)>& f);

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

/// The kind each pipeline stage runs on when stage s takes the next `stage_devices[s]` devices
/// (stages in order, kinds in the file's order). A diagnostic when a stage spans two kinds,
/// naming the stage and the kinds' device counts. A one-kind cluster: all 0.
Result<std::vector<int64_t>> stage_kinds(const Cluster& cluster,
                                         const std::vector<int64_t>& stage_devices);

/// `<device>x<count>` with a preset device (8 per node; NVLink inside, InfiniBand between, V100
/// nodes joined by 25 Gb/s as Alpa's clusters; the node's host memory and PCIe link shared by its
/// 8 devices). Unknown devices list the known ones.
Result<Cluster> cluster_preset(std::string_view spec);

/// A cluster from JSON text (`file` names it in diagnostics; a missing or mistyped field is named):
/// `{"name": .., "device": "a100" | {"name", "peak_flops", "memory_bytes", "memory_bandwidth",
/// ...}, "count": N, "devices_per_node": 8, "intra_node": {"bandwidth", "latency"},
/// "inter_node": {...}, "host_memory_bytes": .., "host_bandwidth": .., "host_memory_bandwidth":
/// .., "nvme_bytes": .., "nvme_read_bandwidth": .., "nvme_write_bandwidth": ..}` (host and NVMe
/// figures per device, optional). A mixed cluster: `{"name": .., "kinds": [kind, ...], "links":
/// [{"between": ["a", "b"], "bandwidth": .., "latency": ..}, ...]}`, each kind an object like a
/// one-kind file plus its `name` (unique) and an optional `memory_bytes` (overrides the device's);
/// a kind whose device is a preset takes the preset's links, host and NVMe figures unless it gives
/// them; every pair of kinds needs a link.
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
