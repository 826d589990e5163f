#include "ir/error.h"

namespace fusejit::ir {
void internal_error(const char* file, int line, const std::string& message) {
  throw InternalError("internal error at " + std::string(file) + ":" + std::to_string(line) + ": " + message);
}
}  // namespace fusejit::ir
