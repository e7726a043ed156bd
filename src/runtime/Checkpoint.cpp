// Training checkpoints: per-rank shard files and their index, the manifest with checksums, the
// `latest` pointer that commits a checkpoint, and the checked read that reassembles whole tensors.
#include "heddle/runtime/Checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "heddle/support/AtomicFile.h"
#include "heddle/support/BoundedRead.h"
#include "heddle/support/Hash.h"
#include "heddle/support/Log.h"

namespace heddle {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kFormat = "heddle-checkpoint";
constexpr int kVersion = 1;
constexpr int64_t kMaxIndexBytes = int64_t{64} << 20;  // a manifest or a rank's index

std::string step_dir_name(int step) { return fmt::format("step-{:08d}", step); }
std::string shard_name(int64_t rank) { return fmt::format("rank-{}.bin", rank); }
std::string index_name(int64_t rank) { return fmt::format("rank-{}.json", rank); }
std::string hex(uint64_t h) { return fmt::format("{:016x}", h); }
uint64_t checksum(std::string_view bytes) { return fnv1a_64(bytes.data(), bytes.size()); }

// HEDDLE_TEST_CHECKPOINT_KILL=RANK:NTH:PHASE (Checkpoint.h): SIGKILL here when it names this
// rank, write and phase.
void fault_point(int64_t rank, int nth, const char* phase) {
  const char* v = std::getenv("HEDDLE_TEST_CHECKPOINT_KILL");
  if (v == nullptr) return;
  long long r = -1, n = -1;
  char what[32] = {};
  if (std::sscanf(v, "%lld:%lld:%31s", &r, &n, what) == 3 && r == rank && n == nth &&
      std::string(what) == phase)
    std::raise(SIGKILL);
}

// The values a checkpoint holds: every parameter and optimizer state of the updates, in order.
std::vector<ValueId> saved_values(const std::vector<ParamUpdate>& updates) {
  std::vector<ValueId> out;
  for (const ParamUpdate& u : updates) {
    out.push_back(u.param);
    for (const auto& st : u.state) out.push_back(st.first);
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

size_t element_bytes(const Tensor& t) { return t.is_int() ? sizeof(int64_t) : sizeof(float); }

// This rank's shard (the tiles it holds, 8-byte aligned) and its index.
std::pair<std::string, json> encode_shard(const Graph& g, const std::vector<ParamUpdate>& updates,
                                          const TensorMap& tensors, int64_t rank) {
  std::string bytes;
  json entries = json::array();
  for (ValueId v : saved_values(updates)) {
    auto it = tensors.find(v);
    if (it == tensors.end()) continue;  // a tile this rank does not hold
    const Tensor& t = it->second;
    bytes.resize((bytes.size() + 7) / 8 * 8);
    const size_t n = static_cast<size_t>(t.numel()) * element_bytes(t);
    entries.push_back({{"name", g.value(v).name},
                       {"dtype", std::string(dtype_name(g.type(v).dtype()))},
                       {"shape", g.type(v).shape().values()},
                       {"start", t.region().start().values()},
                       {"extent", t.shape().values()},
                       {"offset", bytes.size()},
                       {"bytes", n}});
    const char* p = t.is_int() ? reinterpret_cast<const char*>(t.i64())
                               : reinterpret_cast<const char*>(t.f32());
    bytes.append(p, n);
  }
  return {std::move(bytes), json{{"rank", rank}, {"tensors", std::move(entries)}}};
}

// Writes `bytes` to `path` atomically, with the test-only kill point between write and rename.
Status write_shard(const std::string& path, std::string_view bytes, int64_t rank, int nth) {
  auto f = AtomicFile::open(path);
  HEDDLE_TRY(f);
  HEDDLE_TRY(f->write(bytes));
  fault_point(rank, nth, "shard");
  return f->commit();
}

// Every rank's `mine` (a single process: its own).
Result<std::vector<int64_t>> gather(const CheckpointOptions& o, const std::vector<int64_t>& mine) {
  return o.all_gather ? o.all_gather(mine) : Result<std::vector<int64_t>>(mine);
}

// The first rank (of `all`, `width` values per rank, the first of which is ok) that failed.
int64_t first_failed(const std::vector<int64_t>& all, size_t width) {
  for (size_t r = 0; r * width < all.size(); ++r)
    if (all[r * width] == 0) return static_cast<int64_t>(r);
  return -1;
}

json run_json(const CheckpointRun& r) {
  return {{"model", r.model}, {"optimizer", r.optimizer}, {"lr", r.lr},     {"seed", r.seed},
          {"mesh", r.mesh},   {"strategy", r.strategy},   {"plan", r.plan}, {"backend", r.backend}};
}

// Rank 0's commit: the manifest, then `latest`, then older checkpoints removed.
Status commit(const CheckpointOptions& o, int step, int nth, const std::vector<int64_t>& all) {
  json files = json::array();
  for (int64_t r = 0; r < o.ranks; ++r) {
    const size_t at = static_cast<size_t>(r) * 5;
    files.push_back({{"name", shard_name(r)},
                     {"bytes", all[at + 1]},
                     {"fnv1a", hex(static_cast<uint64_t>(all[at + 2]))}});
    files.push_back({{"name", index_name(r)},
                     {"bytes", all[at + 3]},
                     {"fnv1a", hex(static_cast<uint64_t>(all[at + 4]))}});
  }
  json m = {{"format", kFormat},        {"version", kVersion}, {"step", step},
            {"data_position", step},    {"ranks", o.ranks},    {"run", run_json(o.run)},
            {"files", std::move(files)}};
  const std::string step_dir = o.dir + "/" + step_dir_name(step);
  fault_point(o.rank, nth, "manifest");
  HEDDLE_TRY(write_file_atomic(step_dir + "/manifest.json", m.dump(1) + "\n"));
  fault_point(o.rank, nth, "latest");
  HEDDLE_TRY(write_file_atomic(o.dir + "/latest", step_dir_name(step) + "\n"));
  // Older complete checkpoints beyond `keep`, and any a killed run left half written.
  std::set<std::string> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o.dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0)
      steps.insert(e.path().filename().string());
  int kept = 0;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it > step_dir_name(step)) continue;  // not ours to judge
    if (kept++ < o.keep) continue;
    fs::remove_all(o.dir + "/" + *it, ec);
  }
  return {};
}

}  // namespace

Status write_checkpoint(const Graph& g, const std::vector<ParamUpdate>& updates,
                        const TensorMap& tensors, int step, const CheckpointOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  static std::atomic<int> writes{0};  // this process's writes, for the test-only kill point
  const int nth = ++writes;
  const std::string step_dir = o.dir + "/" + step_dir_name(step);
  // 1. Every rank writes its shard and index; ok, sizes and checksums go to every rank.
  auto [bytes, index] = encode_shard(g, updates, tensors, o.rank);
  const std::string index_text = index.dump() + "\n";
  Status mine = make_dirs(step_dir);
  if (mine.ok()) mine = write_shard(step_dir + "/" + shard_name(o.rank), bytes, o.rank, nth);
  if (mine.ok()) mine = write_file_atomic(step_dir + "/" + index_name(o.rank), index_text);
  auto all =
      gather(o, {mine.ok() ? 1 : 0, static_cast<int64_t>(bytes.size()),
                 static_cast<int64_t>(checksum(bytes)), static_cast<int64_t>(index_text.size()),
                 static_cast<int64_t>(checksum(index_text))});
  HEDDLE_TRY(all);
  if (!mine.ok()) return mine;
  if (int64_t bad = first_failed(*all, 5); bad >= 0)
    return Diagnostic(
        fmt::format("checkpoint {}: rank {} could not write its shard (see its "
                    "message); the previous checkpoint stays the latest",
                    step_dir, bad));
  // 2. Rank 0 commits; every rank learns whether it did.
  Status committed = o.rank == 0 ? commit(o, step, nth, *all) : Status{};
  auto done = gather(o, {committed.ok() ? 1 : 0});
  HEDDLE_TRY(done);
  if (!committed.ok()) return committed;
  if (first_failed(*done, 1) >= 0)
    return Diagnostic("checkpoint " + step_dir +
                      ": rank 0 could not write the manifest (see its message)");
  log(LogLevel::kInfo, "checkpoint", "checkpoint written to " + step_dir,
      {{"step", step},
       {"bytes", static_cast<double>(bytes.size())},
       {"seconds", seconds_since(t0)}});
  return {};
}

std::function<Status(int, const TensorMap&)> checkpoint_hook(
    const Graph& g, const std::vector<ParamUpdate>& updates, CheckpointOptions o) {
  return [&g, &updates, o = std::move(o)](int step, const TensorMap& tensors) -> Status {
    if (step % o.every != 0) return {};
    return write_checkpoint(g, updates, tensors, step, o);
  };
}

namespace {

// A diagnostic on `file` of checkpoint reading.
Diagnostic bad(const std::string& file, const std::string& rule) {
  return Diagnostic(SourceLoc{file, 0, 0}, rule + "; the checkpoint is not loaded");
}

// The JSON object in `path`, and the checksum of its bytes.
Result<std::pair<json, std::string>> read_json(const std::string& path) {
  auto text = read_file_bounded(
      path, {.max_bytes = kMaxIndexBytes, .what = "checkpoint file", .raise_with = ""});
  HEDDLE_TRY(text);
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad(path, "is not a JSON object");
  return std::make_pair(std::move(j), hex(checksum(*text)));
}

// The file `name` of the manifest, checked against its size and checksum.
Result<std::string> read_checked(const std::string& dir, const json& entry) {
  const std::string path = dir + "/" + entry.at("name").get<std::string>();
  const int64_t want = entry.at("bytes").get<int64_t>();
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return bad(path, "is missing (the manifest lists it)");
  if (static_cast<int64_t>(size) != want)
    return bad(path,
               fmt::format("holds {} bytes, the manifest records {}: the file is {}", size, want,
                           static_cast<int64_t>(size) < want ? "truncated" : "changed"));
  auto bytes =
      read_file_bounded(path, {.max_bytes = want, .what = "checkpoint file", .raise_with = ""});
  HEDDLE_TRY(bytes);
  const std::string sum = hex(checksum(*bytes));
  if (sum != entry.at("fnv1a").get<std::string>())
    return bad(path, "has checksum " + sum + ", the manifest records " +
                         entry.at("fnv1a").get<std::string>() + ": the file is corrupted");
  return std::move(*bytes);
}

// The tensors a run resumes from (whole, or the needed boxes), being assembled from shards.
struct Assembly {
  std::map<std::string, ValueId> by_name;  // every value the checkpoint must hold
  const std::optional<std::map<ValueId, Box>>* need = nullptr;
  std::map<ValueId, Tensor> whole, covered;
  // The box of `v` to assemble: its need, the whole tensor without one; nullopt: not needed.
  std::optional<Box> box_of(const Graph& g, ValueId v) const {
    if (!*need) return Box::of_shape(g.type(v).shape());
    auto it = (*need)->find(v);
    return it == (*need)->end() ? std::nullopt : std::optional<Box>(it->second);
  }
};

// Copies one index entry's tile (in `bytes`) into the assembly.
Status place_tile(const Graph& g, Assembly& a, const json& e, std::string& bytes,
                  const std::string& file) {
  const std::string name = e.at("name").get<std::string>();
  auto it = a.by_name.find(name);
  if (it == a.by_name.end())
    return bad(file, "holds '" + name +
                         "', which is no parameter or optimizer state of this run: the checkpoint "
                         "was written for another model or optimizer (manifest mismatch)");
  const ValueId v = it->second;
  const TensorType& type = g.type(v);
  const IVec shape(e.at("shape").get<std::vector<int64_t>>());
  if (e.at("dtype").get<std::string>() != dtype_name(type.dtype()) || shape != type.shape())
    return bad(file,
               fmt::format("holds '{}' as {}{}, but this run's is {} (manifest mismatch)", name,
                           e.at("dtype").get<std::string>(), shape.to_string(), type.to_string()));
  const IVec start(e.at("start").get<std::vector<int64_t>>());
  const IVec extent(e.at("extent").get<std::vector<int64_t>>());
  if (start.size() != shape.size() || extent.size() != shape.size() ||
      !Box::of_shape(shape).contains(Box(start, start + extent)))
    return bad(file, "holds a tile of '" + name + "' outside its shape (manifest mismatch)");
  Tensor probe = Tensor::tile(type.dtype(), Box(start, start + extent));
  const size_t offset = e.at("offset").get<size_t>(), n = e.at("bytes").get<size_t>();
  if (n != static_cast<size_t>(probe.numel()) * element_bytes(probe) || offset % 8 != 0 ||
      offset + n > bytes.size())
    return bad(file, "records a tile of '" + name + "' that its shard does not hold");
  const std::optional<Box> want = a.box_of(g, v);
  if (!want || want->intersect(probe.region()).empty()) return {};  // not needed here
  Tensor view = Tensor::view(type.dtype(), probe.region(), bytes.data() + offset);
  auto [w, fresh] = a.whole.try_emplace(v, Tensor::tile(type.dtype(), *want));
  auto [c, unused] = a.covered.try_emplace(v, Tensor::tile(DType::kF32, *want));
  w->second.copy_from(view);
  probe = Tensor::tile(DType::kF32, probe.region());
  probe.fill(1);
  c->second.copy_from(probe);
  return {};
}

// True when the index `entries` name a tile of a needed box that `masks` (per value, 1 where
// an earlier chosen shard holds it) do not cover yet; marks them. Entries that do not parse
// count as adding (their shard is read, and place_tile names what is wrong).
bool adds_needed(const Graph& g, const Assembly& a, const json& entries,
                 std::map<ValueId, Tensor>& masks) {
  bool adds = false;
  for (const json& e : entries) {
    auto it = a.by_name.find(e.value("name", ""));
    if (it == a.by_name.end()) return true;
    const std::optional<Box> want = a.box_of(g, it->second);
    if (!want) continue;
    const IVec start(e.at("start").get<std::vector<int64_t>>());
    const IVec extent(e.at("extent").get<std::vector<int64_t>>());
    if (start.size() != want->rank() || extent.size() != want->rank()) return true;
    const Box part = want->intersect(Box(start, start + extent));
    if (part.empty()) continue;
    auto [m, fresh] = masks.try_emplace(it->second, Tensor::tile(DType::kF32, *want));
    const Tensor have = m->second.crop(part);
    if (std::find(have.f32(), have.f32() + have.numel(), 0.0f) == have.f32() + have.numel())
      continue;
    Tensor ones = Tensor::tile(DType::kF32, part);
    ones.fill(1);
    m->second.copy_from(ones);
    adds = true;
  }
  return adds;
}

// `field` of the recorded run against this run's.
template <class T>
Status same(const std::string& file, const char* field, const T& recorded, const T& now) {
  if (recorded == now) return {};
  return bad(file, fmt::format("was written by a run with {} {}; this run has {}: resume with the "
                               "same {} (manifest mismatch)",
                               field, recorded, now, field));
}

}  // namespace

Result<LoadedCheckpoint> read_checkpoint(const std::string& dir, const Graph& g,
                                         const std::vector<ParamUpdate>& updates,
                                         const CheckpointRun& run,
                                         const std::optional<std::map<ValueId, Box>>& need,
                                         int64_t reader) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string latest_path = dir + "/latest";
  if (!fs::exists(latest_path))
    return bad(latest_path, "is missing: " + dir +
                                " holds no complete checkpoint (give a DIR a run wrote with "
                                "--checkpoint)");
  auto latest = read_file_bounded(latest_path,
                                  {.max_bytes = 256, .what = "checkpoint file", .raise_with = ""});
  HEDDLE_TRY(latest);
  std::string name = *latest;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.size() != 13 || name.rfind("step-", 0) != 0 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos)
    return bad(latest_path, "does not name a step directory (step-NNNNNNNN)");
  LoadedCheckpoint out;
  out.path = dir + "/" + name;
  const std::string manifest_path = out.path + "/manifest.json";
  if (!fs::exists(manifest_path)) return bad(manifest_path, "is missing (`latest` names it)");
  auto read = read_json(manifest_path);
  HEDDLE_TRY(read);
  const json* m = &read->first;
  out.manifest_fnv1a = read->second;
  Assembly a;
  a.need = &need;
  for (ValueId v : saved_values(updates)) a.by_name.emplace(g.value(v).name, v);
  try {
    if (m->value("format", "") != kFormat || m->value("version", 0) != kVersion)
      return bad(manifest_path, fmt::format("is not a {} version {} manifest", kFormat, kVersion));
    out.step = m->at("step").get<int>();
    out.data_position = m->at("data_position").get<int64_t>();
    if (step_dir_name(out.step) != name)
      return bad(manifest_path, "records step " + std::to_string(out.step) + " but sits in " +
                                    name + " (manifest mismatch)");
    const json& r = m->at("run");
    out.run.model = r.at("model").get<std::string>();
    out.run.optimizer = r.at("optimizer").get<std::string>();
    out.run.lr = r.at("lr").get<double>();
    out.run.seed = r.at("seed").get<uint64_t>();
    out.run.mesh = r.at("mesh").get<std::string>();
    out.run.strategy = r.at("strategy").get<std::string>();
    out.run.plan = r.at("plan").get<std::string>();
    out.run.backend = r.at("backend").get<std::string>();
    HEDDLE_TRY(same(manifest_path, "model", out.run.model, run.model));
    HEDDLE_TRY(same(manifest_path, "--optimizer", out.run.optimizer, run.optimizer));
    HEDDLE_TRY(same(manifest_path, "--lr", out.run.lr, run.lr));
    HEDDLE_TRY(same(manifest_path, "--seed", out.run.seed, run.seed));
    const int64_t ranks = m->at("ranks").get<int64_t>();
    if (ranks < 1 || m->at("files").size() != static_cast<size_t>(2 * ranks))
      return bad(manifest_path, "does not list two files per rank (manifest mismatch)");
    // Every index checked first (they are small); then the shards holding needed tiles, each
    // checked before its tiles are placed: the reader's own first, then in rank order.
    std::vector<json> indexes;
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const json& shard_entry = m->at("files")[static_cast<size_t>(2 * rank)];
      const json& index_entry = m->at("files")[static_cast<size_t>(2 * rank + 1)];
      if (shard_entry.at("name") != shard_name(rank) || index_entry.at("name") != index_name(rank))
        return bad(manifest_path, "lists files out of rank order (manifest mismatch)");
      auto index_text = read_checked(out.path, index_entry);
      HEDDLE_TRY(index_text);
      json index = json::parse(*index_text, nullptr, false);
      if (index.is_discarded() || !index.contains("tensors"))
        return bad(out.path + "/" + index_name(rank), "is not a shard index");
      indexes.push_back(std::move(index));
    }
    std::vector<int64_t> order;
    if (reader >= 0 && reader < ranks) order.push_back(reader);
    for (int64_t rank = 0; rank < ranks; ++rank)
      if (rank != reader) order.push_back(rank);
    std::map<ValueId, Tensor> masks;
    for (int64_t rank : order) {
      const json& index = indexes[static_cast<size_t>(rank)];
      if (need && !adds_needed(g, a, index.at("tensors"), masks)) continue;
      auto shard = read_checked(out.path, m->at("files")[static_cast<size_t>(2 * rank)]);
      HEDDLE_TRY(shard);
      out.shards_read.push_back(rank);
      for (const json& e : index.at("tensors"))
        HEDDLE_TRY(place_tile(g, a, e, *shard, out.path + "/" + index_name(rank)));
    }
    std::sort(out.shards_read.begin(), out.shards_read.end());
  } catch (const json::exception& e) {
    return bad(manifest_path,
               std::string("misses a field or has one of the wrong type (") + e.what() + ")");
  }
  for (const auto& [n, v] : a.by_name) {
    const std::optional<Box> want = a.box_of(g, v);
    if (!want) continue;
    auto c = a.covered.find(v);
    int64_t missing = want->shape().product();
    if (c != a.covered.end())
      for (int64_t i = 0; i < c->second.numel(); ++i) missing -= c->second.f32()[i] != 0 ? 1 : 0;
    if (missing > 0)
      return bad(manifest_path, fmt::format("leaves {} element(s) of '{}' unwritten by any shard "
                                            "(a file or tile is missing: manifest mismatch)",
                                            missing, n));
  }
  out.tensors = std::move(a.whole);
  log(LogLevel::kInfo, "checkpoint", "checkpoint read from " + out.path,
      {{"step", out.step},
       {"shards", static_cast<double>(out.shards_read.size())},
       {"seconds", seconds_since(t0)}});
  return out;
}

}  // namespace heddle
