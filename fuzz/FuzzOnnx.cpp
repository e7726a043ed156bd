// libFuzzer target: the ONNX importer on arbitrary bytes. Whatever imports must give a graph that
// verifies cleanly (the importer builds with the op builders) and that prints and parses back.
#include <cstdint>
#include <string>

#include "FuzzCheck.h"
#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  heddle::OnnxImportOptions options;
  options.dims = {{"batch", 2}, {"seq", 8}};
  options.base_dir = "/nonexistent-fuzz-dir";  // external data never resolves
  auto m = heddle::import_onnx_bytes(bytes, "fuzz.onnx", options);
  if (!m.ok()) return 0;
  HEDDLE_FUZZ_CHECK(heddle::verify(m->graph).empty());
  std::string printed = heddle::print_graph(m->graph);
  HEDDLE_FUZZ_CHECK(heddle::parse_graph(printed, "printed.hd").ok());
  return 0;
}
