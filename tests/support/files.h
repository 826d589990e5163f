// Files the tests read: a file's bytes, paths in the source tree, the sample graphs. One copy of
// what about a dozen tests wrote for themselves.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace fusejit::testing {

// The bytes of `path` (binary mode). Throws std::runtime_error naming the path when it cannot be
// opened, so a missing file fails the test that reads it, by name.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// `rel` in the source tree: FUSEJIT_SOURCE_DIR of the environment when set (a test binary copied
// to another machine, as scripts/device-check.sh does), else the one the build defines.
inline std::filesystem::path source_path(const std::string& rel) {
  const char* dir = std::getenv("FUSEJIT_SOURCE_DIR");
  return std::filesystem::path(dir && *dir ? dir : FUSEJIT_SOURCE_DIR) / rel;
}

// samples/graphs/NAME.
inline std::string sample_path(const std::string& name) { return source_path("samples/graphs/" + name).string(); }

// Every samples/graphs/*.txt, sorted (directory order differs between file systems).
inline std::vector<std::filesystem::path> sample_graphs() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(source_path("samples/graphs")))
    if (e.path().extension() == ".txt") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fusejit::testing
