// Runs the built `heddle` under mpirun for MPI CLI tests: loopback only, shared-memory transport.
// `mpirun(N, ARGS)` starts N ranks of `heddle ARGS`; `mpirun_apps(APPS)` an MPMD launch, each app
// context written `-np K [env VAR=V ...] {heddle} ARGS` with {heddle} standing for the binary.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/RunCli.h"

namespace heddle::testing {

struct Timed {
  CliResult r;
  double seconds = 0;
};

/// The launcher line. When a rank dies the launcher sends the survivors SIGTERM and,
/// odls_base_sigkill_timeout seconds later (default 1), SIGKILL: on a loaded machine a survivor
/// may not run its SIGTERM message within 1 s, so tests of killed ranks give it `sigkill_s` = 10
/// (docs/mpi.md). The launcher waits that long after any rank exits non-zero, even when every
/// rank has exited, so tests where all ranks exit by themselves pass 1.
inline std::string mpirun_prefix(const std::string& env, int sigkill_s) {
  return "env OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 " + env +
         " mpirun --oversubscribe --allow-run-as-root --mca btl self,vader "
         "--mca btl_vader_single_copy_mechanism none --mca odls_base_sigkill_timeout " +
         std::to_string(sigkill_s) + " ";
}

/// Runs `command` through the shell, timing it and capturing stdout, stderr and the exit code.
inline Timed run_timed(const std::string& command) {
  Timed t;
  auto t0 = std::chrono::steady_clock::now();
  t.r = run_shell(command);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

/// `env ENV mpirun -np N heddle ARGS`.
inline Timed mpirun(int n, const std::string& args, const std::string& env = "",
                    int sigkill_s = 10) {
  return run_timed(mpirun_prefix(env, sigkill_s) + "-np " + std::to_string(n) + " " +
                   heddle_binary() + " " + args);
}

/// An MPMD launch: `apps` with every `{heddle}` replaced by the binary's path. `sigkill_s` as in
/// mpirun_prefix().
inline Timed mpirun_apps(std::string apps, const std::string& env = "", int sigkill_s = 10) {
  const std::string mark = "{heddle}";
  for (size_t at = apps.find(mark); at != std::string::npos; at = apps.find(mark, at))
    apps.replace(at, mark.size(), heddle_binary());
  return run_timed(mpirun_prefix(env, sigkill_s) + apps);
}

/// This machine's host name, as the ranks name it in their records.
inline std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

/// How many times `what` occurs in `s`.
inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace heddle::testing
