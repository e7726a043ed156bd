// Where a device's step goes: the wall time of each instruction of its program (ExecOptions::
// instr_times), summed over the timed runs, and the same grouped by what each instruction does
// (`heddle run --profile`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/runtime/Program.h"

namespace heddle {

/// The wall time of each instruction of one device's program, summed over the runs that timed it.
struct InstrTimes {
  /// Seconds per instruction, indexed like DeviceProgram::instrs (frees stay 0; a batch of
  /// collectives run back to back is counted on its first). Sized by the first timed run.
  std::vector<double> seconds;
  int64_t runs = 0;  ///< the runs summed
};

/// One group of a profile: the instructions of one label, per timed run.
struct ProfileRow {
  std::string label;   ///< instr_label()
  int64_t calls = 0;   ///< instructions with this label in the program (each runs once a step)
  double seconds = 0;  ///< their wall time per run
  double share = 0;    ///< of the run's timed total, 0..1

  bool operator==(const ProfileRow&) const = default;
};

/// What an instruction does, the key a profile groups by: for a kernel its op kind with the
/// attributes that choose the kernel (`einsum "mk,kn->mn"`, `conv2d 3x3 stride 2 groups 32`,
/// `elementwise_grad gelu`), a fused chain as `fused ` and its first op's label, then the other
/// kinds (`fused conv2d 1x1+reshape+add`); `load`,
/// `halo fetch`, or the collective's name (`all-reduce`).
std::string instr_label(const Graph& g, const Instr& in);

/// `times` of `program` grouped by instr_label(), per run, slowest first (ties by label; frees
/// dropped). Empty when no run was timed. Precondition: `times` was recorded on `program`.
std::vector<ProfileRow> profile_rows(const Graph& g, const DeviceProgram& program,
                                     const InstrTimes& times);

}  // namespace heddle
