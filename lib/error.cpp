// fusejit::Error, error translation from the internal layers, and the warning handler.
#include <cstdio>
#include <mutex>
#include <new>

#include "ir/diagnostic.h"
#include "ir/error.h"
#include "ir/passes/dce.h"
#include "jit/driver.h"
#include "jit/host_compile.h"
#include "jit/nvrtc.h"
#include "lib/internal.h"

namespace fusejit {

Error::Error(ErrorKind kind, std::string message, std::string file, int line, int column, std::string diagnostic)
    : std::runtime_error(std::move(message)), kind_(kind), file_(std::move(file)), line_(line), column_(column),
      diagnostic_(std::move(diagnostic)) {
  if (diagnostic_.empty()) diagnostic_ = "error: " + std::string(what());
}

void rethrow_current(const std::string& file, std::string_view source) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const ir::FileError& e) {
    // About a .npy file or the environment, not the graph text: no graph file, no graph lines.
    std::string diag = (e.file().empty() ? "" : e.file() + ": ") + "error: " + e.what() + "\n";
    throw Error(ErrorKind::User, e.what(), e.file(), 0, 0, diag);
  } catch (const ir::UserError& e) {
    // An error without a place in the graph (a launch's arguments) names no graph file.
    std::string shown = file.empty() ? std::string("<graph>") : file;
    std::string diag = !e.loc().known() ? "error: " + std::string(e.what()) : ir::format_diagnostic(e, shown, source);
    throw Error(ErrorKind::User, e.what(), file, static_cast<int>(e.loc().line), static_cast<int>(e.loc().col), diag);
  } catch (const ir::InternalError& e) {
    throw Error(ErrorKind::Internal, e.what(), {}, 0, 0, "internal error (a fusejit bug; please report it): " + std::string(e.what()));
  } catch (const jit::CompileError& e) {
    throw Error(ErrorKind::Compile, e.what());
  } catch (const jit::HostCompileError& e) {
    throw Error(ErrorKind::Compile, e.what());
  } catch (const jit::NvrtcUnavailable& e) {
    throw Error(ErrorKind::Compile, e.what());
  } catch (const jit::DriverError& e) {
    // Refused arguments (an output overlapping an input) are the caller's mistake.
    throw Error(e.kind() == jit::DriverErrorKind::BadArgument ? ErrorKind::User : ErrorKind::Driver, e.what());
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Internal, e.what(), {}, 0, 0, "internal error (a fusejit bug; please report it): " + std::string(e.what()));
  }
}

namespace {
std::mutex g_warn_mu;
WarningHandler g_handler;
}  // namespace

void set_warning_handler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(g_warn_mu);
  g_handler = std::move(handler);
}

void warn(std::string_view message) {
  WarningHandler h;
  {
    std::lock_guard<std::mutex> lock(g_warn_mu);
    h = g_handler;
  }
  if (h) h(message);
  else std::fprintf(stderr, "fusejit: warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

void warn_unused_inputs(const ir::Graph& g) {
  for (ir::NodeId id : ir::unused_inputs(g)) {
    const ir::Node& n = g.node(id);
    std::string where;
    if (n.loc.known())
      where = (g.file.empty() ? std::string("<graph>") : g.file) + ":" + std::to_string(n.loc.line) + ":" +
              std::to_string(n.loc.col) + ": ";
    warn(where + "input '" + n.name + "' is not used by any output");
  }
}

}  // namespace fusejit
