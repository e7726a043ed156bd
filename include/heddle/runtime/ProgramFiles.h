// Writing lowered programs as text files, one per device (`heddle run/show --emit DIR`): the
// readable form golden tests and people compare.
#pragma once

#include <string>
#include <vector>

#include "heddle/runtime/Program.h"
#include "heddle/runtime/ProgramTemplate.h"

namespace heddle {

/// Writes `DIR/device<N>.txt` for every program. Errors name the path.
Status write_programs(const std::string& dir, const Graph& g, const Mesh& mesh,
                      const std::vector<DeviceProgram>& programs);

/// Writes `DIR/device<N>.txt` for every device of `programs`' mesh, instantiating one device's
/// program at a time (memory stays that of one program). Errors name the path.
/// Precondition: `programs` was lowered from `g`.
Status write_programs(const std::string& dir, const Graph& g, const ProgramTemplate& programs);

}  // namespace heddle
