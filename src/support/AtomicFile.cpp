// Atomic writes (temporary file, fsync, rename) and output-location checks behind AtomicFile.h.
#include "heddle/support/AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

namespace heddle {

namespace {

std::atomic<unsigned> g_serial{0};

// Temporaries not yet renamed or removed, for remove_pending_atomic_files().
std::mutex g_pending_mu;
std::set<std::string>& pending() {
  static auto* s = new std::set<std::string>;  // never destroyed: usable during exit
  return *s;
}
void track(const std::string& temp) {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  pending().insert(temp);
}
void untrack(const std::string& temp) {
  if (temp.empty()) return;
  std::lock_guard<std::mutex> lock(g_pending_mu);
  pending().erase(temp);
}

// The directory part of `path` ("." when it has none) and the file name.
std::pair<std::string, std::string> split_path(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string reason(int err) { return std::strerror(err); }

Diagnostic file_error(const std::string& path, const std::string& what) {
  return Diagnostic(SourceLoc{path, 0, 0}, what);
}

std::string with_flag(const std::string& flag, const std::string& text) {
  return flag.empty() ? text : flag + ": " + text;
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Result<AtomicFile> AtomicFile::open(const std::string& path) {
  if (path.empty()) return Diagnostic("an output path is empty");
  auto [dir, name] = split_path(path);
  if (name.empty()) return file_error(path, "cannot write: the path names a directory");
  std::string temp = (dir == "/" ? "" : dir) + "/." + name + ".tmp." + std::to_string(getpid()) +
                     "." + std::to_string(g_serial.fetch_add(1));
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return file_error(path, "cannot write: " + reason(err) + " (creating a file in " + dir + ")");
  }
  track(temp);
  return AtomicFile(path, std::move(temp), fd);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)), temp_(std::move(other.temp_)), fd_(other.fd_) {
  other.fd_ = -1;
  other.temp_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    this->~AtomicFile();
    path_ = std::move(other.path_);
    temp_ = std::move(other.temp_);
    fd_ = other.fd_;
    other.fd_ = -1;
    other.temp_.clear();
  }
  return *this;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
  untrack(temp_);
}

Diagnostic AtomicFile::fail(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  untrack(temp_);
  temp_.clear();
  return file_error(path_, "cannot write: " + what + ": " + reason(err));
}

Status AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) return file_error(path_, "cannot write: an earlier write failed");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd_, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return fail("writing", errno);
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return {};
}

Status AtomicFile::commit() {
  if (fd_ < 0) return file_error(path_, "cannot write: an earlier write failed");
  if (::fsync(fd_) != 0) return fail("flushing to disk", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return fail("closing", errno);
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) return fail("renaming into place", errno);
  untrack(temp_);
  temp_.clear();
  // The rename is durable once the directory is synced; a failure here loses nothing written.
  int dfd = ::open(split_path(path_).first.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

void remove_pending_atomic_files() noexcept {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  for (const auto& t : pending()) ::unlink(t.c_str());
  pending().clear();
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  auto f = AtomicFile::open(path);
  HEDDLE_TRY(f);
  HEDDLE_TRY(f->write(bytes));
  return f->commit();
}

Status check_writable_file(const std::string& path, const std::string& flag) {
  if (path.empty()) return Diagnostic(with_flag(flag, "the output path is empty"));
  if (is_dir(path))
    return file_error(path, with_flag(flag, "cannot write: it is a directory; give a file name"));
  auto dir = split_path(path).first;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    return file_error(path, with_flag(flag, "cannot write: " + dir + " is not a directory"));
  if (!is_dir(dir))
    return file_error(path,
                      with_flag(flag, "cannot write: the directory " + dir + " does not exist"));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return file_error(path, with_flag(flag, "cannot write in " + dir + ": " + reason(errno)));
  return {};
}

Status check_writable_dir(const std::string& dir, const std::string& flag) {
  if (dir.empty()) return Diagnostic(with_flag(flag, "the output directory is empty"));
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return file_error(dir, with_flag(flag, "cannot write: it exists and is not a directory"));
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      return file_error(dir, with_flag(flag, "cannot write: " + reason(errno)));
    return {};
  }
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  auto parent = split_path(trimmed).first;
  if (!is_dir(parent))
    return file_error(
        dir, with_flag(flag, "cannot create: the directory " + parent + " does not exist"));
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    return file_error(dir, with_flag(flag, "cannot create in " + parent + ": " + reason(errno)));
  return {};
}

Status make_dirs(const std::string& dir) {
  if (dir.empty() || is_dir(dir)) return {};
  for (size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
    std::string prefix = at == std::string::npos ? dir : dir.substr(0, at);
    if (!prefix.empty() && !is_dir(prefix) && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return file_error(dir, "cannot create the directory " + prefix + ": " + reason(errno));
    if (at == std::string::npos) break;
  }
  return {};
}

}  // namespace heddle
