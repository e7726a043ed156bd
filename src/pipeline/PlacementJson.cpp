#include "heddle/pipeline/PlacementJson.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "heddle/support/BoundedRead.h"
#include "heddle/support/Keys.h"
#include "heddle/support/Limits.h"

namespace heddle::pipeline {

namespace {

using nlohmann::json;

/// Line and column (from 1) of byte offset `pos` in `text`.
SourceLoc locate(std::string_view text, size_t pos, const std::string& file) {
  SourceLoc loc{file, 1, 1};
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.col = 1;
    } else {
      ++loc.col;
    }
  }
  return loc;
}

std::vector<std::string> keys_of(const json& o) {
  std::vector<std::string> keys;
  for (const auto& item : o.items()) keys.push_back(item.key());
  return keys;
}

}  // namespace

Result<BlockPlacement> parse_placement_json(std::string_view text, const std::string& file,
                                            int devices) {
  SourceLoc where{file, 0, 0};
  auto err = [&](std::string msg) { return Diagnostic(where, std::move(msg)); };
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    auto colon = what.rfind(": ");
    return Diagnostic(
        locate(text, byte, file),
        "invalid JSON: " + (colon == std::string::npos ? what : what.substr(colon + 2)));
  } catch (const json::exception& e) {  // out_of_range: a number beyond double (1e999)
    return err(std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) return err("a placement file must hold a JSON object");
  HEDDLE_TRY(check_keys(keys_of(j), {"devices", "blocks", "deps"}, file, ""));
  BlockPlacement p;
  p.name = file;
  if (j.contains("devices")) {
    if (!j["devices"].is_number_integer() || j["devices"].get<long long>() < 1) {
      return err("\"devices\" must be a positive integer");
    }
    p.num_devices = j["devices"].get<int>();
    if (devices > 0 && devices != p.num_devices) {
      return err(fmt::format("the file says \"devices\": {} but --devices is {}; make them agree",
                             p.num_devices, devices));
    }
  } else if (devices > 0) {
    p.num_devices = devices;
  } else {
    return err("the device count is missing: add \"devices\" to the file or pass --devices");
  }
  if (!j.contains("blocks") || !j["blocks"].is_array()) {
    return err("\"blocks\" must be a list of blocks");
  }
  std::map<std::string, int> index;
  int k = 0;
  for (const json& b : j["blocks"]) {
    std::string at = fmt::format("blocks[{}]", k);
    if (!b.is_object()) return err(at + " must be an object");
    Block blk;
    if (!b.contains("name") || !b["name"].is_string()) return err(at + " needs a string \"name\"");
    blk.name = b["name"].get<std::string>();
    at += " ('" + blk.name + "')";
    HEDDLE_TRY(check_keys(keys_of(b), {"name", "type", "span", "memory", "devices"}, file, at));
    if (b.contains("type")) {
      if (!b["type"].is_string()) return err(at + ": \"type\" must be a string");
      blk.type = b["type"].get<std::string>();
    } else {
      blk.type = "forward";
    }
    if (!b.contains("span") || !b["span"].is_number()) {
      return err(at + " needs a number \"span\" (its duration in time units)");
    }
    blk.span = b["span"].get<double>();
    if (!(blk.span > 0)) {
      return err(fmt::format("{}: span is {}; spans must be positive", at, b["span"].dump()));
    }
    if (b.contains("memory")) {
      if (!b["memory"].is_number()) return err(at + ": \"memory\" must be a number");
      blk.memory = b["memory"].get<double>();
    }
    if (!b.contains("devices") || !b["devices"].is_array() || b["devices"].empty()) {
      return err(at + " needs \"devices\": a non-empty list of device numbers");
    }
    for (const json& d : b["devices"]) {
      if (!d.is_number_integer()) return err(at + ": \"devices\" must hold integers");
      long long dev = d.get<long long>();
      if (dev < 0 || dev >= p.num_devices) {
        return err(
            fmt::format("{} is on device {}, which does not exist: the placement has {} "
                        "devices (0 to {})",
                        at, dev, p.num_devices, p.num_devices - 1));
      }
      blk.devices.push_back(static_cast<int>(dev));
    }
    if (index.count(blk.name)) return err(fmt::format("{}: the name is used twice", at));
    index[blk.name] = k++;
    p.blocks.push_back(std::move(blk));
  }
  if (j.contains("deps")) {
    if (!j["deps"].is_array()) return err("\"deps\" must be a list of [from, to] pairs");
    int i = 0;
    for (const json& d : j["deps"]) {
      std::string at = fmt::format("deps[{}]", i++);
      if (!d.is_array() || d.size() != 2 || !d[0].is_string() || !d[1].is_string()) {
        return err(at + " must be a pair of block names, e.g. [\"f0\", \"f1\"]");
      }
      std::string a = d[0].get<std::string>(), b = d[1].get<std::string>();
      for (const auto& n : {a, b})
        if (!index.count(n))
          return err(fmt::format("{} names block '{}', which is not defined", at, n));
      p.deps.push_back({index[a], index[b]});
    }
  }
  HEDDLE_TRY(check_placement(p, file));
  return p;
}

Result<BlockPlacement> load_placement_file(const std::string& path, int devices) {
  auto text = read_file_bounded(
      path, {.max_bytes = limits::kMaxJsonBytes, .what = "placement file", .raise_with = ""});
  HEDDLE_TRY(text);
  return parse_placement_json(*text, path, devices);
}

std::string placement_to_json(const BlockPlacement& p) {
  json blocks = json::array();
  for (const Block& b : p.blocks) {
    blocks.push_back({{"name", b.name},
                      {"type", b.type},
                      {"span", b.span},
                      {"memory", b.memory},
                      {"devices", b.devices}});
  }
  json deps = json::array();
  for (auto [a, b] : p.deps) deps.push_back({p.blocks[a].name, p.blocks[b].name});
  json j = {{"devices", p.num_devices}, {"blocks", blocks}, {"deps", deps}};
  return j.dump(2);
}

}  // namespace heddle::pipeline
