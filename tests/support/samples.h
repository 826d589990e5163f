// The sample graphs as tests use them: parsed with every named dim set to one small value, so a
// test runs each sample quickly whatever size the sample declares.
#pragma once

#include <cstdint>
#include <filesystem>

#include "ir/parser.h"
#include "tests/support/files.h"

namespace fusejit::testing {

// The graph at `path` with every dim it declares set to `dim`.
inline ir::Graph parse_small(const std::filesystem::path& path, int64_t dim) {
  const ir::Graph probe = ir::parse_graph_file(path.string());
  ir::DimOverrides small;
  for (const ir::DimDecl& d : probe.dims) small.push_back({d.name, dim});
  return ir::parse_graph_file(path.string(), small);
}

}  // namespace fusejit::testing
