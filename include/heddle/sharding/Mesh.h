// Mesh: devices arranged on named axes (`dp=2,tp=4`), row-major, the last axis fastest. Mesh axes
// map onto link classes of a cluster; collectives run within the groups of one axis.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/ir/IVec.h"
#include "heddle/support/Result.h"

namespace heddle {

/// One named mesh axis.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  bool operator==(const MeshAxis&) const = default;
};

/// An immutable device mesh. Invariant: axis names unique and non-empty, sizes >= 1.
class Mesh {
 public:
  /// A single device.
  Mesh() = default;
  /// Precondition: names unique and non-empty, sizes >= 1 (parse() checks user input).
  explicit Mesh(std::vector<MeshAxis> axes);
  /// Parses `4`, `2x2` (axes named x, y, z), or named `dp=2,tp=2`. Errors name the bad part.
  static Result<Mesh> parse(std::string_view text);

  int64_t rank() const { return static_cast<int64_t>(axes_.size()); }
  const std::vector<MeshAxis>& axes() const { return axes_; }
  /// Axis `a`. Precondition: 0 <= a < rank().
  const MeshAxis& axis(int64_t a) const;
  /// Size of axis `a`.
  int64_t size(int64_t a) const { return axis(a).size; }
  /// The position of the axis called `name`, or -1.
  int64_t find(std::string_view name) const;
  /// Number of devices: product of the axis sizes (1 for the empty mesh).
  int64_t num_devices() const;
  /// The coordinate of `device` on every axis. Precondition: 0 <= device < num_devices().
  IVec coords(int64_t device) const;
  /// The device at `coords`. Precondition: coords inside the mesh.
  int64_t device(const IVec& coords) const;
  /// The devices that differ from `device` only along axis `a`, ordered by their coordinate on
  /// `a`: the group a collective over axis `a` runs in.
  std::vector<int64_t> group(int64_t a, int64_t device) const;

  /// `dp=2,tp=2`; the empty mesh prints as `1`.
  std::string to_string() const;
  bool operator==(const Mesh&) const = default;
  size_t hash() const;

 private:
  std::vector<MeshAxis> axes_;
};

}  // namespace heddle

template <>
struct std::hash<heddle::Mesh> {
  size_t operator()(const heddle::Mesh& m) const { return m.hash(); }
};
