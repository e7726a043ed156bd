// Runs the built `heddle` binary in a subprocess for CLI tests: exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace heddle::testing {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

/// The source tree (compiled in by tests/CMakeLists.txt).
inline std::string source_dir() { return HEDDLE_SOURCE_DIR; }

/// Path of the heddle binary in the build tree.
inline std::string heddle_binary() {
  return std::string(HEDDLE_BINARY_DIR) + "/tools/heddle/heddle";
}

/// Runs `command` through the shell: its exit code (128 + the signal when one ended it), stdout
/// and stderr (`command` must not redirect stderr itself). Every test that starts the `heddle`
/// binary (directly, under mpirun or from a script) goes through this.
inline CliResult run_shell(const std::string& command) {
  char tmpl[] = "/tmp/heddle_cli_XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  const std::string err_file = tmpl;
  CliResult r;
  FILE* p = popen((command + " 2>" + err_file).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_file.c_str());
  return r;
}

/// Runs `heddle ARGS` through the shell in directory `cwd` (empty: the current one); with
/// `timeout_s` > 0 a run that takes longer is killed and exits 124 (coreutils `timeout`).
inline CliResult run_heddle(const std::string& args, const std::string& cwd = "",
                            int timeout_s = 0) {
  return run_shell((cwd.empty() ? "" : "cd '" + cwd + "' && ") +
                   (timeout_s > 0 ? "timeout " + std::to_string(timeout_s) + " " : std::string()) +
                   heddle_binary() + " " + args);
}

}  // namespace heddle::testing
