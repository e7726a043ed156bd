// Output-only kernels: the kernel instructions of a device program that compute nothing but
// graph outputs no later instruction reads (a data-parallel training step's optimizer updates,
// which every device computes alike). A runner whose devices share memory needs each such
// update from one device only (ThreadedRunner).
#pragma once

#include <cstddef>
#include <vector>

#include "heddle/runtime/Program.h"

namespace heddle {

/// A kernel instruction whose every stored result is a graph output read by no later
/// instruction of its program.
struct OutputKernel {
  size_t instr = 0;              ///< its index in DeviceProgram::instrs
  std::vector<ValueId> outputs;  ///< the graph outputs it computes, ascending
};

/// The output-only kernels of `p` (lowered from `g`), in program order: kernel instructions
/// outside ring attention whose results (but a fused chain's temporaries) are all graph outputs
/// that no later instruction reads, gathers, sends or frees before the end. Skipping one
/// changes nothing the device computes but those outputs.
std::vector<OutputKernel> output_only_kernels(const Graph& g, const DeviceProgram& p);

}  // namespace heddle
