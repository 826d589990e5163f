// Collects the library's warnings (fusejit::set_warning_handler) for one scope and restores the
// default handler after, also when a failed REQUIRE leaves the scope: a handler left pointing at a
// test's dead locals would crash the next test that warns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "fusejit/fusejit.h"

class LibraryWarnings {
 public:
  LibraryWarnings() {
    fusejit::set_warning_handler([this](std::string_view m) { list.emplace_back(m); });
  }
  ~LibraryWarnings() { fusejit::set_warning_handler(nullptr); }
  LibraryWarnings(const LibraryWarnings&) = delete;
  LibraryWarnings& operator=(const LibraryWarnings&) = delete;

  /// How many warnings contain `part`.
  size_t count(std::string_view part) const {
    return static_cast<size_t>(
        std::count_if(list.begin(), list.end(), [&](const std::string& w) { return w.find(part) != std::string::npos; }));
  }

  std::vector<std::string> list;  ///< every warning, in order
};
