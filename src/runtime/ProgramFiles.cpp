// Writing lowered programs as text files, one per device (`--emit DIR`).
#include "heddle/runtime/ProgramFiles.h"

#include <filesystem>
#include <fstream>

namespace heddle {

namespace {

Status make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Diagnostic(SourceLoc{dir, 0, 0}, "cannot create directory: " + ec.message());
  return {};
}

Status write_program(const std::string& dir, const Graph& g, const Mesh& mesh,
                     const DeviceProgram& p) {
  std::string path = dir + "/device" + std::to_string(p.device) + ".txt";
  std::ofstream out(path);
  out << p.to_string(g, mesh);
  out.close();
  if (!out) return Diagnostic(SourceLoc{path, 0, 0}, "cannot write file");
  return {};
}

}  // namespace

Status write_programs(const std::string& dir, const Graph& g, const Mesh& mesh,
                      const std::vector<DeviceProgram>& programs) {
  HEDDLE_TRY(make_dir(dir));
  for (const auto& p : programs) HEDDLE_TRY(write_program(dir, g, mesh, p));
  return {};
}

Status write_programs(const std::string& dir, const Graph& g, const ProgramTemplate& programs) {
  HEDDLE_TRY(make_dir(dir));
  for (int64_t d = 0; d < programs.mesh.num_devices(); ++d)
    HEDDLE_TRY(write_program(dir, g, programs.mesh, instantiate(g, programs, d)));
  return {};
}

}  // namespace heddle
