// Writing lowered programs as text files, one per device (`--emit DIR`).
#include "heddle/runtime/ProgramFiles.h"

#include "heddle/support/AtomicFile.h"

namespace heddle {

namespace {

Status write_program(const std::string& dir, const Graph& g, const Mesh& mesh,
                     const DeviceProgram& p) {
  return write_file_atomic(dir + "/device" + std::to_string(p.device) + ".txt",
                           p.to_string(g, mesh));
}

}  // namespace

Status write_programs(const std::string& dir, const Graph& g, const Mesh& mesh,
                      const std::vector<DeviceProgram>& programs) {
  HEDDLE_TRY(make_dirs(dir));
  for (const auto& p : programs) HEDDLE_TRY(write_program(dir, g, mesh, p));
  return {};
}

Status write_programs(const std::string& dir, const Graph& g, const ProgramTemplate& programs) {
  HEDDLE_TRY(make_dirs(dir));
  for (int64_t d = 0; d < programs.mesh.num_devices(); ++d)
    HEDDLE_TRY(write_program(dir, g, programs.mesh, instantiate(g, programs, d)));
  return {};
}

}  // namespace heddle
