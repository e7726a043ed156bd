// What a model is, for people (`heddle show`): its counts (ops, tensors, parameters, FLOPs), its
// inputs and outputs, op kinds, the table of inputs and parameters and the table of ops; the
// same figures as JSON; and the zoo's list of models.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "heddle/ir/Graph.h"

namespace heddle::model {

/// The summary of `g` as text: counts, inputs, the first 8 outputs, op kinds, then the first
/// `limit` inputs and parameters and the first `limit` ops as tables.
std::string summary_text(const Graph& g, int limit);

/// The summary of `g` as one JSON object: `graph`, `ops`, `tensors`, `parameters`,
/// `parameter_bytes`, `activation_bytes`, `flops`, `inputs` and `outputs` (name and type each).
nlohmann::json summary_json(const Graph& g);

/// The zoo's models as a table: name, family and description, one per line.
std::string zoo_list_text();

}  // namespace heddle::model
