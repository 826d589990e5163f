// fusejit::Error, error translation from the internal layers, and the warning handler.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/dim_alignment.h"
#include "ir/error.h"
#include "ir/passes/dce.h"
#include "jit/driver.h"
#include "jit/fork.h"
#include "jit/host_compile.h"
#include "jit/nvrtc.h"
#include "lib/internal.h"

namespace fusejit {

std::string_view error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::User: return "user";
    case ErrorKind::Compile: return "compile";
    case ErrorKind::Driver: return "driver";
    case ErrorKind::Internal: break;
  }
  return "internal";
}

// Messages, file names and diagnostics may quote what a user gave (a file name, an option value):
// NUL and bytes that are not UTF-8 are escaped, so what() (a C string), JSON and Python's str
// carry them whole.
Error::Error(ErrorKind kind, std::string message, std::string file, int line, int column, std::string diagnostic)
    : std::runtime_error(ir::escape_invalid_utf8(message)), kind_(kind), file_(ir::escape_invalid_utf8(file)),
      line_(line), column_(column), diagnostic_(ir::escape_invalid_utf8(diagnostic)) {
  while (!diagnostic_.empty() && diagnostic_.back() == '\n') diagnostic_.pop_back();  // as format_diagnostic's
  // "error: MESSAGE" (a compile error's log keeps its lines), a long quoted name cut as in located ones
  if (diagnostic_.empty()) diagnostic_ = "error: " + ir::shorten_quoted_names(what());
  diagnostic_ = ir::terminal_safe(diagnostic_, /*keep_line_feeds=*/true);  // for a person: no ESC reaches a terminal
}

std::string format_diagnostic(std::string_view message, std::string_view file, int line, int column,
                              std::string_view text) {
  // ir::format_diagnostic makes the message, file and line terminal-safe (one line, no escapes).
  const ir::Loc loc{static_cast<uint32_t>(std::max(line, 0)), static_cast<uint32_t>(std::max(column, 0))};
  std::string out = ir::format_diagnostic(ir::UserError(std::string(message), loc), std::string(file), text);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string terminal_safe(std::string_view text, bool keep_line_feeds) {
  return ir::terminal_safe(text, keep_line_feeds);
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
    std::string diag =
        !e.loc().known() ? "error: " + std::string(e.what()) : ir::format_diagnostic(e, shown, ir::without_bom(source));
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
// Handler calls in progress and a replacement waiting: set_warning_handler waits for the calls,
// and new calls wait while it does (so threads that keep warning cannot starve it). Once it
// returns the old handler is never called again, so its owner may free what it captured.
std::mutex g_warn_mu;
std::condition_variable g_warn_cv;
int g_calls = 0;
bool g_replacing = false;
WarningHandler g_handler;

// A fork()ed child has only the thread that forked: calls another thread had in progress (and its
// lock) would make the child's set_warning_handler wait forever (Python's exit hook calls it).
void after_fork_in_child() {
  new (&g_warn_mu) std::mutex;  // the old one may be held by a thread the child does not have
  new (&g_warn_cv) std::condition_variable;
  g_calls = 0;
  g_replacing = false;
}

// Registers after_fork_in_child once, before the first use of the state above.
void fork_safe() {
  [[maybe_unused]] static const int registered = jit::renew_in_fork_child(after_fork_in_child);
}
thread_local int t_in_handler = 0;                     // this thread runs a handler
thread_local std::optional<std::thread::id> t_origin;  // a worker's caller (WarningOrigin)

void call_handler(std::string_view message) {
  ++t_in_handler;
  struct Leave {
    ~Leave() { --t_in_handler; }
  } leave;
  if (!g_handler) {
    std::fprintf(stderr, "fusejit: warning: %.*s\n", static_cast<int>(message.size()), message.data());
    return;
  }
  // A warning never fails the call it comes from: a handler's exception (on a compile worker it
  // would end the process) is reported with the message instead.
  try {
    g_handler(message);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusejit: warning: %.*s\nfusejit: the warning handler threw (%s); ignored\n",
                 static_cast<int>(message.size()), message.data(), e.what());
  } catch (...) {
    std::fprintf(stderr, "fusejit: warning: %.*s\nfusejit: the warning handler threw; ignored\n",
                 static_cast<int>(message.size()), message.data());
  }
}
}  // namespace

void set_warning_handler(WarningHandler handler) {
  if (t_in_handler)  // it would wait for itself to return
    throw Error(ErrorKind::User, "set_warning_handler called from inside a warning handler");
  fork_safe();
  WarningHandler old;
  {
    std::unique_lock lock(g_warn_mu);
    g_warn_cv.wait(lock, [] { return !g_replacing; });
    g_replacing = true;
    g_warn_cv.wait(lock, [] { return g_calls == 0; });
    old = std::exchange(g_handler, std::move(handler));
    g_replacing = false;
  }
  g_warn_cv.notify_all();
}

std::thread::id warning_origin() { return t_origin.value_or(std::this_thread::get_id()); }

WarningOrigin::WarningOrigin(std::thread::id caller) : saved_(t_origin) { t_origin = caller; }
WarningOrigin::~WarningOrigin() { t_origin = saved_; }

void warn(std::string_view message) {
  if (t_in_handler) return call_handler(message);  // a handler that warns: its call is counted already
  fork_safe();
  {
    std::unique_lock lock(g_warn_mu);
    g_warn_cv.wait(lock, [] { return !g_replacing; });
    ++g_calls;
  }
  struct Done {
    ~Done() {
      std::lock_guard lock(g_warn_mu);
      if (--g_calls == 0) g_warn_cv.notify_all();
    }
  } done;
  call_handler(ir::escape_invalid_utf8(message));  // as Error's messages: whole in any handler's text
}

namespace {
// "FILE:LINE:COL: " of a node written in graph text or located by its builder (FILE:LINE: without
// a column); "" for one built in code without a location.
std::string where_of(const ir::Graph& g, const ir::Node& n) {
  if (!n.loc.known()) return "";
  return (g.file.empty() ? std::string("<graph>") : g.file) + ":" + std::to_string(n.loc.line) +
         (n.loc.col ? ":" + std::to_string(n.loc.col) : std::string()) + ": ";
}

void warn_unused_inputs(const ir::Graph& g, const std::set<std::string>& may_be_unused) {
  for (ir::NodeId id : ir::unused_inputs(g)) {
    const ir::Node& n = g.node(id);
    if (may_be_unused.count(n.name)) continue;
    warn(where_of(g, n) + "input '" + n.name + "' is not used by any output");
  }
}

// The same slip where no two named dims meet (a square literal shape; the one dim fuse traces for
// two axes of one size): a reduction's kept axis lines up with another axis of its operand's shape.
void warn_axis_slips(const ir::Graph& g, const std::set<ir::NodeId>& warned) {
  for (const ir::AxisSlip& s : ir::reduced_axis_slips(g)) {
    if (warned.count(s.node)) continue;
    const ir::Node& n = g.node(s.node);
    const ir::Node& r = g.node(s.reduction);
    warn(fmt::format("{}{} broadcasts the {} of a {} value back against that shape with the axis it keeps ({}) lined "
                     "up with axis {} (shapes align from the right): each element meets another slice's result, and "
                     "it runs only because the sizes agree{}",
                     where_of(g, n), n.name.empty() ? "a " + std::string(ir::op_name(n.op)) : "'" + n.name + "'",
                     ir::op_name(r.op), ir::shape_to_string(g.node(r.arg(0)).shape, &g), s.from, s.to,
                     ir::keepdim_hint(g, std::span<const ir::NodeId>(n.args.data(), n.nargs))));
  }
}

// Only where an operand comes from a reduction without keepdim (a slip, almost always); a graph
// whose input dim is either 1 or another dim's size lines them up on purpose.
void warn_dim_alignments(const ir::Graph& g) {
  std::set<std::pair<int32_t, int32_t>> seen;
  std::set<ir::NodeId> nodes;  // warned of here: not again by warn_axis_slips
  for (const ir::DimAlignment& m : ir::mixed_dim_alignments(g)) {
    const ir::Node& n = g.node(m.node);
    const std::string hint = ir::keepdim_hint(g, std::span<const ir::NodeId>(n.args.data(), n.nargs));
    if (!hint.empty()) nodes.insert(m.node);
    if (hint.empty() || !seen.insert({std::min(m.a, m.b), std::max(m.a, m.b)}).second) continue;
    const std::string& a = g.dims[static_cast<size_t>(m.a)].name;
    const std::string& b = g.dims[static_cast<size_t>(m.b)].name;
    std::string shapes;
    for (int k = 0; k < n.nargs; ++k)
      shapes += (k == 0 ? "" : k + 1 == n.nargs ? " and " : ", ") + ir::shape_to_string(g.node(n.arg(k)).shape, &g);
    warn(fmt::format("{}{} lines up dim {} with dim {} (shapes {}, aligned from the right), so the graph holds "
                     "only while {} == {} or one of them is 1{}",
                     where_of(g, n), n.name.empty() ? "a " + std::string(ir::op_name(n.op)) : "'" + n.name + "'", a,
                     b, shapes, a, b, hint));
  }
  warn_axis_slips(g, nodes);
}
}  // namespace

void warn_about_graph(const ir::Graph& g, const std::set<std::string>& may_be_unused) {
  warn_unused_inputs(g, may_be_unused);
  warn_dim_alignments(g);
}

}  // namespace fusejit
