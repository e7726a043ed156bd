// Placement files: the JSON form of a placement (docs/cli.md, "Placement files"), parsed with
// diagnostics that name the file, the entry and the rule broken, and written back.
#pragma once

#include <string>
#include <string_view>

#include "heddle/pipeline/Placement.h"

namespace heddle::pipeline {

/// Parses placement JSON `text`. `file` names the source in diagnostics. `devices` > 0 is the
/// device count asked for on the command line; the file's optional "devices" must then agree;
/// one of the two must be given. Fields: blocks[].name (string, required), type (string, default
/// "forward"), span (number > 0, required), memory (number, default 0), devices (list of ints,
/// required); deps: list of [from, to] block names. The result passes check_placement.
Result<BlockPlacement> parse_placement_json(std::string_view text, const std::string& file,
                                            int devices = 0);

/// Reads and parses the placement file at `path` (see parse_placement_json).
Result<BlockPlacement> load_placement_file(const std::string& path, int devices = 0);

/// The JSON text of `p` in the file format (parse_placement_json reads it back equal, except
/// for name/family/chunks).
std::string placement_to_json(const BlockPlacement& p);

}  // namespace heddle::pipeline
