// Strict keys for JSON input files: an unknown or misspelled key is an error naming the closest
// valid one, so that a typo never silently drops a field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/support/Result.h"

namespace heddle {

/// The name of `valid` closest to `name` by edit distance (case-insensitive); empty when `valid`
/// is empty.
std::string closest_name(std::string_view name, const std::vector<std::string>& valid);

/// A diagnostic at `file` for the first of `keys` not in `valid`: "unknown key 'mem' in
/// blocks[0]; did you mean 'memory'? (valid keys: ...)". `where` names the object (empty: the
/// file's top level). Success when every key is valid.
Status check_keys(const std::vector<std::string>& keys, const std::vector<std::string>& valid,
                  const std::string& file, const std::string& where);

}  // namespace heddle
