// The peer watch and the SIGTERM handler behind MpiLiveness.h. The handler may only make
// async-signal-safe calls, so everything it reads is a plain global and it formats by hand.
#include "MpiLiveness.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace heddle::mpi_liveness {

namespace {

// Exit codes (support/ExitCode.h) of a rank the launcher stops.
constexpr int kExitPeerLost = 5;
constexpr int kExitTerminated = 143;
constexpr long kLingerNs = 500 * 1000 * 1000;  // how long a SIGTERMed rank waits before exiting

constexpr int kMaxWatched = 4096;
pid_t g_pids[kMaxWatched];  // 0: a peer whose process ids mean nothing here (not watched)
int g_rank = -1, g_size = 0;
char g_host[64] = {};  // this rank's host name, for the SIGTERM record
bool g_json = false, g_timestamps = false;
volatile sig_atomic_t g_reported = 0;  // this rank already said why it stops

// A bounded text buffer for the handler.
struct Line {
  char buf[512];
  size_t n = 0;
  void add(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
  }
  void add_int(long long v, int width = 0) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0 && k < 23);
    while (k < width && k < 23) digits[k++] = '0';
    while (k > 0 && n + 1 < sizeof buf) buf[n++] = digits[--k];
  }
  // The UTC time as Log.h writes it: 2026-11-26T08:40:01.123Z (days to a civil date by hand:
  // gmtime_r is not async-signal-safe).
  void add_now() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    long long secs = ts.tv_sec, days = secs / 86400, rem = secs % 86400;
    days += 719468;
    const long long era = days / 146097, doe = days - era * 146097;
    const long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    const long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    add_int(yoe + era * 400 + (m <= 2), 4);
    add("-");
    add_int(m, 2);
    add("-");
    add_int(d, 2);
    add("T");
    add_int(rem / 3600, 2);
    add(":");
    add_int(rem % 3600 / 60, 2);
    add(":");
    add_int(rem % 60, 2);
    add(".");
    add_int(ts.tv_nsec / 1000000, 3);
    add("Z");
  }
};

// The launcher stops the surviving ranks with SIGTERM when one dies (and forwards its own SIGTERM:
// scancel, preemption, Ctrl-C): say so, naming the dead rank when it ran in this PID namespace,
// unless this rank already reported its failure. Exit 5 (peer lost) when a peer is known gone,
// else 143.
extern "C" void on_terminate(int) {
  const int dead = dead_peer();
  const int code = dead >= 0 || g_reported ? kExitPeerLost : kExitTerminated;
  if (!g_reported) {
    Line why;
    why.add("stopped by the launcher");
    if (dead >= 0) {
      why.add(": rank ");
      why.add_int(dead);
      why.add(" failed (its process is gone)");
    } else {
      why.add(" (SIGTERM: another rank failed or the job was cancelled)");
    }
    why.buf[why.n] = '\0';
    Line out;
    if (g_json) {
      out.add("{\"time\":\"");
      out.add_now();
      out.add("\",\"level\":\"error\",\"event\":\"failure\",\"rank\":");
      out.add_int(g_rank);
      out.add(",\"host\":\"");
      out.add(g_host);
      out.add("\",\"message\":\"error: ");
      out.add(why.buf);
      out.add("\",\"signal\":\"SIGTERM\",\"exit_code\":");
      out.add_int(code);
      out.add("}\n");
    } else {
      if (g_timestamps) {
        out.add_now();
        out.add(" ");
      }
      out.add("heddle: rank ");
      out.add_int(g_rank);
      out.add(" (");
      out.add(g_host);
      out.add("): error: ");
      out.add(why.buf);
      out.add("\n");
    }
    ssize_t ignored = write(STDERR_FILENO, out.buf, out.n);
    (void)ignored;
  }
  // Linger before exiting: when every rank gets SIGTERM at once (scancel, mpirun forwarding its
  // own), a peer whose handler runs late (a loaded machine) must not find this process gone and
  // report it as a failure. Within mpirun's default SIGKILL delay (1 s).
  timespec linger{0, kLingerNs};
  nanosleep(&linger, nullptr);
  _exit(code);
}

}  // namespace

PeerId this_peer() {
  PeerId me;
  me.pid = static_cast<int64_t>(getpid());
  gethostname(me.host, sizeof me.host - 1);
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!std::fgets(me.boot_id, sizeof me.boot_id, f)) me.boot_id[0] = '\0';
    std::fclose(f);
  }
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) == 0) me.pid_ns = static_cast<uint64_t>(st.st_ino);
  return me;
}

void watch_peers(int rank, const std::vector<PeerId>& all, bool json, bool timestamps) {
  const PeerId& me = all[static_cast<size_t>(rank)];
  g_rank = rank;
  g_size = std::min(static_cast<int>(all.size()), kMaxWatched);
  std::memcpy(g_host, me.host, sizeof g_host - 1);
  g_json = json;
  g_timestamps = timestamps;
  for (int q = 0; q < g_size; ++q) {
    const PeerId& o = all[static_cast<size_t>(q)];
    const bool same_space = me.boot_id[0] != '\0' && me.pid_ns != 0 &&
                            std::strncmp(o.boot_id, me.boot_id, sizeof o.boot_id) == 0 &&
                            o.pid_ns == me.pid_ns;
    g_pids[q] = same_space ? static_cast<pid_t>(o.pid) : 0;
  }
  struct sigaction sa {};
  sa.sa_handler = on_terminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

void stop_watching() {
  signal(SIGTERM, SIG_DFL);
  g_size = 0;
}

int dead_peer() {
  for (int r = 0; r < g_size && r < kMaxWatched; ++r)
    if (r != g_rank && g_pids[r] > 0 && kill(g_pids[r], 0) == -1 && errno == ESRCH) return r;
  return -1;
}

void mark_reported() { g_reported = 1; }

}  // namespace heddle::mpi_liveness
