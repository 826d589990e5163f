// The `fusejit` command: a thin client of the public API (fusejit/fusejit.h, fusejit/report.h).
// One struct per subcommand (its options, then what it does); main() parses and reports errors.
// Exit codes: 0 success; 1 a check failed or a runtime (compile/driver) error; 2 bad input
// (graph, options, files); 3 an internal error (a fusejit bug).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fusejit/fusejit.h>
#include <fusejit/report.h>

namespace fj = fusejit;

namespace {

// ---- errors -------------------------------------------------------------------------------------

// A bad command-line value: `option` (e.g. "--dim") was given `value` (e.g. "N=-5"); `at` is the
// offset in `value` of the part at fault (the caret goes there).
struct ArgError : std::runtime_error {
  ArgError(std::string option, std::string value, size_t at, const std::string& message, int skip = 0)
      : std::runtime_error(message), option(std::move(option)), value(std::move(value)), at(at), skip(skip) {}
  std::string option, value;
  size_t at;
  int skip;  // the value given to `option` that many times before this one (a repeat)
};

// What `run --json` prints on stdout for an error (stderr gets the text).
struct ErrorInfo {
  fj::ErrorKind kind = fj::ErrorKind::User;
  std::string message;
  std::string file;   // graph file, "<command line>", or "" when the error has no location
  int line = 0, col = 0;
  std::string text;   // the rendered message for stderr
};

// The command line as one line of text a shell would read back (an argument with blanks, quotes
// or other shell characters in single quotes, a quote in it as '\'', a control character as '?' to
// keep one line), to point into it.
class CommandLine {
 public:
  CommandLine(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) {
      std::string a = i == 0 ? std::string("fusejit") : argv[i];
      if (i) text_ += ' ';
      const bool quote = a.empty() || std::any_of(a.begin(), a.end(), [](char c) {
                           return std::iscntrl(static_cast<unsigned char>(c)) || std::strchr(" '\"\\$`!*?;&|<>()[]{}#~", c);
                         });
      if (quote) text_ += '\'';
      starts_.push_back(text_.size());
      for (char c : a) text_ += c == '\'' ? "'\\''" : std::iscntrl(static_cast<unsigned char>(c)) ? "?" : std::string(1, c);
      args_.push_back(std::move(a));
      if (quote) text_ += '\'';
    }
  }
  const std::string& text() const { return text_; }
  // Points error `e` at 0-based column `col` of text(): "<command line>:1:COL: error: ...", the
  // command line and a caret (fusejit::format_diagnostic).
  void locate(ErrorInfo& e, size_t col) const {
    e.file = "<command line>";
    e.line = 1;
    e.col = static_cast<int>(col) + 1;
    e.text = fj::format_diagnostic(e.message, e.file, 1, e.col, text_);
  }
  // 0-based column in text() of `value`'s character `at`, where `value` was given to `option`
  // (as `--opt value`, `--opt=value`, or a later value of `--opt a b`) for the (skip + 1)th time;
  // nullopt when it is not found.
  std::optional<size_t> column(const std::string& option, const std::string& value, size_t at, int skip = 0) const {
    bool in_values = false;  // after `option`, before the next argument starting with '-'
    for (size_t i = 1; i < args_.size(); ++i) {
      std::optional<size_t> col;
      if (args_[i] == option + "=" + value) col = shown(i, option.size() + 1 + at);
      else if (in_values && args_[i] == value) col = shown(i, at);
      if (col && skip-- == 0) return col;
      in_values = takes_values(i, option, in_values);
    }
    return std::nullopt;
  }
  // 0-based column of the value given to `option` that starts with `name` and '=' (--range
  // x=0:1 for name x); nullopt when there is none.
  std::optional<size_t> column_of_name(const std::string& option, const std::string& name) const {
    const std::string prefix = name + "=";
    bool in_values = false;  // as in column(): `--dim N=1 M=2` names M in its second value
    for (size_t i = 1; i < args_.size(); ++i) {
      if (in_values && args_[i].rfind(prefix, 0) == 0) return shown(i, 0);
      if (args_[i].rfind(option + "=" + prefix, 0) == 0) return shown(i, option.size() + 1);
      in_values = takes_values(i, option, in_values);
    }
    return std::nullopt;
  }
  // 0-based column of the value given to `option` (`--opt value` or `--opt=value`) the (skip + 1)th
  // time it appears, or of `--opt` itself when no value follows, and that value; nullopt when it
  // does not appear so often.
  std::optional<std::pair<size_t, std::string>> option_value(const std::string& option, int skip = 0) const {
    const std::string alias = short_form(option);
    for (size_t i = 1; i < args_.size(); ++i) {
      std::optional<std::pair<size_t, std::string>> at;
      for (const std::string& o : {option, alias}) {
        if (o.empty() || at) continue;
        // `--out=X` is X; CLI11 reads `-o=X` as "=X", not located.
        if (o == option && args_[i].rfind(o + "=", 0) == 0) at = {shown(i, o.size() + 1), args_[i].substr(o.size() + 1)};
        else if (args_[i] == o && i + 1 < args_.size()) at = {shown(i + 1, 0), args_[i + 1]};
        else if (args_[i] == o) at = {shown(i, 0), ""};
      }
      if (at && skip-- == 0) return at;
    }
    return std::nullopt;
  }
  // 0-based column of the last argument that is `flag` (or `flag=...`); nullopt when none is.
  std::optional<size_t> last_argument(const std::string& flag) const {
    for (size_t i = args_.size(); i-- > 1;)
      if (args_[i] == flag || args_[i].rfind(flag + "=", 0) == 0) return shown(i, 0);
    return std::nullopt;
  }
  // The first argument after the subcommand that starts with '-' and names a file (a graph file
  // CLI11 read as an option), or "".
  std::string dash_file() const {
    for (size_t i = 2; i < args_.size(); ++i) {
      std::error_code ec;
      if (args_[i].size() > 1 && args_[i][0] == '-' && std::filesystem::is_regular_file(args_[i], ec)) return args_[i];
    }
    return "";
  }

 private:
  // The one-letter form of an option main() declares with one ("-o,--out"), or "".
  static std::string short_form(const std::string& option) { return option == "--out" ? "-o" : ""; }
  // Whether the arguments after argument i are values of `option` (`--opt a b`, `--opt=a b`),
  // given whether argument i was.
  bool takes_values(size_t i, const std::string& option, bool was) const {
    if (args_[i] == option || args_[i].rfind(option + "=", 0) == 0) return true;
    return was && (args_[i].empty() || args_[i][0] != '-');
  }
  // Column in text() of argument i's character at (each quote before it is shown as 4 characters).
  size_t shown(size_t i, size_t at) const {
    const std::string& a = args_[i];
    return starts_[i] + at + 3 * static_cast<size_t>(std::count(a.begin(), a.begin() + std::min(at, a.size()), '\''));
  }
  std::string text_;
  std::vector<std::string> args_;
  std::vector<size_t> starts_;
};


int exit_code(fj::ErrorKind k) {
  switch (k) {
    case fj::ErrorKind::User: return 2;
    case fj::ErrorKind::Internal: return 3;
    default: return 1;
  }
}

// While alive, the library's warnings are printed to stderr (as by default) and kept.
class WarningLog {
 public:
  WarningLog() {
    fj::set_warning_handler([this](std::string_view m) {
      std::fprintf(stderr, "fusejit: warning: %.*s\n", static_cast<int>(m.size()), m.data());
      std::lock_guard<std::mutex> lock(mu_);
      kept_.emplace_back(m);
    });
  }
  ~WarningLog() { fj::set_warning_handler(nullptr); }
  WarningLog(const WarningLog&) = delete;
  WarningLog& operator=(const WarningLog&) = delete;
  void append_to(std::vector<std::string>& out) const {
    std::lock_guard<std::mutex> lock(mu_);
    out.insert(out.end(), kept_.begin(), kept_.end());
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> kept_;
};

void locate_cli11_error(const CommandLine& line, ErrorInfo& e);

// The library's refusal of a value it quotes first ("NVRTC option '-x' ...": lib/options.cpp;
// "cannot create the folder 'D' ...": lib/aot.cpp) points at the value of whichever of `options`
// gave it.
bool locate_quoted_value(const CommandLine& line, ErrorInfo& e, const std::string& prefix,
                         std::initializer_list<const char*> options) {
  const size_t end = e.message.rfind(prefix, 0) == 0 ? e.message.find('\'', prefix.size()) : std::string::npos;
  if (end == std::string::npos) return false;
  const std::string value = e.message.substr(prefix.size(), end - prefix.size());
  for (const char* option : options)
    if (const auto col = line.column(option, value, 0)) {
      line.locate(e, *col);
      return true;
    }
  return false;
}

bool locate_option_error(const CommandLine& line, ErrorInfo& e);

// The parser's "unknown dim 'Q' in a dim override" (ir/parser.cpp: it knows the graph's dims, not
// the command line) is --dim Q's: said so, and located as that option's error. False for another.
bool locate_unknown_dim(const CommandLine& line, ErrorInfo& e) {
  const std::string unknown_dim = "unknown dim '", tail = "' in a dim override";
  if (e.message.rfind(unknown_dim, 0) != 0 || e.message.find(tail) == std::string::npos) return false;
  ErrorInfo d = e;
  d.message = "--dim " + e.message.substr(unknown_dim.size(), e.message.find(tail) - unknown_dim.size()) + ": " +
              e.message;
  if (!locate_option_error(line, d)) return false;
  e = d;
  return true;
}

// A library error about a value given on the command line ("--range x: ...", from RunOptions
// checked against the graph) points at that value; so do an unknown --dim (locate_unknown_dim), a
// refused --nvrtc-option and a --dump-dir (or compile's --out) that cannot be made; a "--arch:
// ..." points at the value the message quotes, as CLI11's own errors do.
bool locate_option_error(const CommandLine& line, ErrorInfo& e) {
  if (locate_quoted_value(line, e, "NVRTC option '", {"--nvrtc-option"}) ||
      locate_quoted_value(line, e, "cannot create the folder '", {"--dump-dir", "--out", "-o"}) ||
      locate_unknown_dim(line, e))
    return true;
  if (e.message.rfind("--", 0) != 0) return false;
  const size_t sp = e.message.find(' ');
  if (sp != std::string::npos && sp > 2 && e.message[sp - 1] == ':') {  // "--arch: ...": about the option's value
    ErrorInfo v = e;
    locate_cli11_error(line, v);
    if (v.line == 0) return false;
    e = v;
    return true;
  }
  const size_t end = e.message.find_first_of(":=", sp == std::string::npos ? 0 : sp);
  if (sp == std::string::npos || end == std::string::npos || end <= sp + 1) return false;
  const std::string option = e.message.substr(0, sp), name = e.message.substr(sp + 1, end - sp - 1);
  // "--range x: ..." names a NAME= value; "--arch sm_88: ..." the whole value.
  auto col = line.column_of_name(option, name);
  if (!col) col = line.column(option, name, 0);
  if (!col) return false;
  line.locate(e, *col);
  return true;
}

// CLI11's "--seed: must be >= 0" points at the value; its "--seed: At Most 1 required but received
// 2" says what happened instead and points at the second one.
// CLI11's "--dot excludes --json": the caret under whichever of the two comes last. False for
// another error.
bool locate_excludes(const CommandLine& line, ErrorInfo& e) {
  const size_t ex = e.message.find(" excludes ");
  if (e.message.rfind("--", 0) != 0 || ex == std::string::npos) return false;
  const auto a = line.last_argument(e.message.substr(0, ex)), b = line.last_argument(e.message.substr(ex + 10));
  if (a || b) line.locate(e, std::max(a.value_or(0), b.value_or(0)));
  return true;
}

void locate_cli11_error(const CommandLine& line, ErrorInfo& e) {
  if (locate_excludes(line, e)) return;
  const size_t colon = e.message.find(": ");
  if (e.message.rfind("--", 0) != 0 || colon == std::string::npos) return;
  const std::string option = e.message.substr(0, colon);
  const std::string at_most = "At Most 1 required but received ";
  if (e.message.compare(colon + 2, at_most.size(), at_most) == 0) {
    e.message = option + " is given " + e.message.substr(colon + 2 + at_most.size()) + " times: give it once";
    e.text = "fusejit: error: " + e.message;  // unless located below
    if (const auto at = line.option_value(option, 1)) line.locate(e, at->first);
    return;
  }
  // CLI11 checks every value of an option given twice before it counts them: the caret goes under
  // the value the message quotes ("'0x10' is not ...", "got 0"), or the empty one it calls empty.
  const std::string said = e.message.substr(colon + 2);
  std::optional<std::pair<size_t, std::string>> first = line.option_value(option, 0), at = first;
  for (int k = 0; first && at; at = line.option_value(option, ++k)) {
    const std::string& v = at->second;
    if (v.empty() ? said.find("empty") != std::string::npos
                  : said.find("'" + v + "'") != std::string::npos || said.ends_with("got " + v) ||
                        said.starts_with(v + " not in "))  // CLI::IsMember's words
      break;
  }
  if (const auto& where = at ? at : first) line.locate(e, where->first);
}

// The error being handled (inside a catch block) as an ErrorInfo.
ErrorInfo current_error(const CommandLine& line) {
  ErrorInfo e;
  try {
    throw;
  } catch (const ArgError& a) {
    e.message = a.option + (a.value.empty() ? "" : " " + a.value) + ": " + a.what();
    if (auto col = line.column(a.option, a.value, a.at, a.skip)) line.locate(e, *col);
    else e.text = "fusejit: " + fj::format_diagnostic(e.message, "", 0, 0, "");  // one line
  } catch (const CLI::Error& c) {
    e.message = c.what();
    e.text = "fusejit: error: " + e.message;
    locate_cli11_error(line, e);
  } catch (const fj::Error& f) {
    e.kind = f.kind();
    e.message = f.what();
    e.file = f.file();
    e.line = f.line();
    e.col = f.column();
    e.text = f.diagnostic();
    while (!e.text.empty() && e.text.back() == '\n') e.text.pop_back();
    if (locate_option_error(line, e)) return e;
    // Errors without a file location read like the command line's own: "fusejit: error: ...".
    if (e.text.rfind("error: ", 0) == 0 || e.text.rfind("internal error", 0) == 0) e.text = "fusejit: " + e.text;
  } catch (const std::bad_alloc&) {  // a graph or tensors too large for this machine: no fusejit bug
    e.kind = fj::ErrorKind::User;
    e.message = "not enough host memory for this run (std::bad_alloc): its graph or tensors are too large for this "
                "machine (make them smaller, e.g. with --dim)";
    e.text = "fusejit: error: " + e.message;
  } catch (const std::exception& x) {
    e.kind = fj::ErrorKind::Internal;
    e.message = x.what();
    e.text = "fusejit: internal error: " + e.message;
  }
  return e;
}

// Prints the error on stderr and, for tools (`--json`), as a JSON object on stdout.
int report(const ErrorInfo& e, bool json) {
  // An argument's or file name's ESC or CR stays out of the terminal; an NVRTC log keeps its lines.
  const std::string text = fj::terminal_safe(e.text, /*keep_line_feeds=*/true);
  std::fprintf(stderr, "%s\n", text.c_str());
  if (json) {
    nlohmann::json j = {{"ok", false},
                        {"error", {{"kind", fj::error_kind_name(e.kind)}, {"message", e.message}, {"file", e.file},
                                   {"line", e.line}, {"col", e.col}}}};
    // Error holds a file name's or option value's bytes that are not UTF-8 as "\xNN" text, as the
    // library's JSON does; `replace` only keeps a missed one from throwing.
    std::fputs((j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str(), stdout);
  }
  return exit_code(e.kind);
}

// ---- option values ------------------------------------------------------------------------------

// Splits "name=value" given to `option`.
std::pair<std::string, std::string> split_kv(const std::string& s, const std::string& option) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw ArgError(option, s, eq == std::string::npos ? 0 : eq,
                   option == "--input" ? "expected NAME=FILE" : option == "--range" ? "expected NAME=LO:HI" : "expected NAME=VALUE");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

// Every NAME=VALUE of a repeatable option, split; a NAME given twice is an error (the last one
// won silently, so `--dim N=4 ... --dim N=8` in a long script ran at a size nobody read).
std::vector<std::pair<std::string, std::string>> split_kv_list(const std::vector<std::string>& items,
                                                               const std::string& option) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < items.size(); ++i) {
    auto kv = split_kv(items[i], option);
    for (const auto& prev : out)
      if (prev.first == kv.first)  // the caret under this one, not under an identical first
        throw ArgError(option, items[i], 0,
                       "'" + kv.first + "' is given twice (" + option + " " + prev.first + "=" + prev.second +
                           " before); give each name once",
                       static_cast<int>(std::count(items.begin(), items.begin() + static_cast<long>(i), items[i])));
    out.push_back(std::move(kv));
  }
  return out;
}

// Decimal only (as in graph text): "010" is ten, not octal eight; no blanks. nullopt when `v`
// is not an integer; throws ArgError (at `at` in `raw`) when it does not fit in 64 bits.
int64_t parse_int(const std::string& v, const std::string& option, const std::string& raw, size_t at) {
  try {
    size_t pos = 0;
    if (v.empty() || !(std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-')) throw std::invalid_argument(v);
    long long x = std::stoll(v, &pos, 10);
    if (pos != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::out_of_range&) {
    throw ArgError(option, raw, at, "'" + v + "' is out of range for a 64-bit integer");
  } catch (const std::exception&) {
    throw ArgError(option, raw, at, "'" + v + "' is not an integer");
  }
}

// A signed decimal integer within i64 (an ArgError past it: no silent rounding to a float).
int64_t decimal_integer(const std::string& v, const std::string& option, const std::string& raw, size_t at) {
  int64_t x = 0;
  const char* first = v.data() + (v[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(first, v.data() + v.size(), x);
  if (ec == std::errc::result_out_of_range)
    throw ArgError(option, raw, at,
                   "integer " + v + " does not fit in i64 (for a float, write it as one: " + v + ".0)");
  if (ec != std::errc() || end != v.data() + v.size()) throw ArgError(option, raw, at, "'" + v + "' is not a number");
  return x;
}

// A number as graph text writes one: a decimal integer (within i64: no silent rounding to a
// float), a decimal float, inf or nan (signed), true or false. No hex, no blanks.
fj::Scalar parse_scalar(const std::string& v, const std::string& option, const std::string& raw, size_t at,
                        const char* examples = "0.5, 3, inf, nan, true") {
  if (v == "true") return fj::Scalar(true);
  if (v == "false") return fj::Scalar(false);
  const size_t sign = !v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0;
  const std::string body = v.substr(sign);
  if (!body.empty() && body.find_first_not_of("0123456789") == std::string::npos)
    return fj::Scalar(decimal_integer(v, option, raw, at));
  const bool decimal = body == "inf" || body == "nan" ||
                       (!body.empty() && body.find_first_not_of("0123456789.eE+-") == std::string::npos);
  if (decimal) {
    // strtod, not stod: an underflow to a subnormal (1e-320) is a value, only overflow is an error.
    errno = 0;
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() + v.size()) {
      if (errno == ERANGE && std::fabs(d) > 1.0) throw ArgError(option, raw, at, "'" + v + "' is out of range");
      return fj::Scalar(d);
    }
  }
  throw ArgError(option, raw, at, "'" + v + "' is not a number (use e.g. " + examples + ")");
}

// One bound of --range, by the graph's `range` rules (ir/parser.cpp): a number, not true/false; an
// integer within +-2^53, since ranges are held in f64 and a larger one would be rounded silently.
double range_bound(const std::string& v, const char* which, const std::string& raw, size_t at) {
  const std::string body = v.substr(!v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0);
  const bool integer = !body.empty() && body.find_first_not_of("0123456789") == std::string::npos;
  uint64_t magnitude = 0;
  if (integer && (std::from_chars(body.data(), body.data() + body.size(), magnitude).ec != std::errc() ||
                  magnitude > (uint64_t{1} << 53)))
    throw ArgError("--range", raw, at, std::string("the range's ") + which + " " + v + " is past +-2^53 (ranges are held in f64)");
  const fj::Scalar s = parse_scalar(v, "--range", raw, at, "-1, 0.5");
  if (s.kind == fj::Scalar::Kind::Bool) throw ArgError("--range", raw, at, "'" + v + "' is not a number (use e.g. -1, 0.5)");
  return s.as_double();
}

// --dim NAME=VALUE, VALUE >= 0 (checked here, so the caret points at the command line).
fj::DimValues parse_dims(const std::vector<std::string>& dims) {
  fj::DimValues out;
  for (const auto& [k, v] : split_kv_list(dims, "--dim")) {
    const std::string d = k + "=" + v;
    int64_t n = parse_int(v, "--dim", d, k.size() + 1);
    if (n < 0) throw ArgError("--dim", d, k.size() + 1, "a dim's value must be >= 0, got " + v);
    out.emplace_back(k, n);
  }
  return out;
}

// An integer option's value: decimal only (as --dim and graph text: CLI11 alone read `--seed 0x10`
// as 16 and `--seed 010` as octal 8), within [lo, hi] (CLI11 would store a number past T's
// maximum as that maximum, and its range message prints the largest double). An empty value
// (`--row-split "$N"` with N unset) is refused: CLI11 would read it as 0.
const char* const kEmptyNumber = "an empty value: give a number";
template <class T>
CLI::Validator integer_in(T lo, T hi, const char* name) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        if (v.empty()) return kEmptyNumber;
        const bool digits = std::all_of(v.begin() + (v[0] == '-' ? 1 : 0), v.end(),
                                        [](char c) { return c >= '0' && c <= '9'; });
        if (!digits || v == "-") return "'" + v + "' is not a decimal integer";
        if (v[0] == '-' && v.find_first_not_of('0', 1) == std::string::npos) v = "0";  // -0 is 0
        T n = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (v[0] == '-' && !(ec == std::errc() && n >= lo)) return "must be >= " + std::to_string(lo) + ", got " + v;
        if (ec == std::errc::result_out_of_range || n > hi || n < lo)
          return "must be " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " + v;
        v = std::to_string(n);  // "010" as ten: CLI11 converts with base 0 (octal); hence transform()
        return {};
      },
      name);
}
const CLI::Validator kNonNegative = integer_in<int>(0, std::numeric_limits<int>::max(), "NONNEGATIVE");
const CLI::Validator kNonNegative64 = integer_in<int64_t>(0, std::numeric_limits<int64_t>::max(), "NONNEGATIVE");
const CLI::Validator kUnsigned64 = integer_in<uint64_t>(0, std::numeric_limits<uint64_t>::max(), "UINT64");
// A folder flag given an empty value (`--save-dir "$OUT"` with OUT unset) is a mistake, not "unset".
const CLI::Validator kPath(
    [](std::string& v) { return v.empty() ? std::string("an empty path: give a folder")
                                          : std::string(); },
    "PATH");
// An --arch given an empty value (`--arch "$ARCH"` with ARCH unset) is a mistake, not "the GPU's".
const CLI::Validator kArch(
    [](std::string& v) { return v.empty() ? std::string("an empty value: give sm_XY or compute_XY, e.g. sm_90")
                                          : std::string(); },
    "ARCH");

// The options every graph subcommand takes.
struct Common {
  std::string graph;
  std::vector<std::string> dims;
  bool fast_math = false;

  void define(CLI::App* cmd) {
    cmd->add_option("GRAPH", graph, "graph file (format: docs/graph-format.md)")->required();
    cmd->add_option("--dim", dims, "override a named dim, NAME=VALUE (repeatable)");
    cmd->add_flag("--fast-math", fast_math,
                  "allow value-changing rewrites, FMA contraction and f32 intermediates (default: strict, bitwise)");
  }
  fj::Graph load() const { return fj::Graph::load(graph, parse_dims(dims)); }
  // As load(), with the dims that `--input` files give (fj::input_file_dims) where no --dim sets
  // them, as a Program call takes dims from its tensors.
  fj::Graph load(const std::vector<std::pair<std::string, std::string>>& input_files) const {
    fj::DimValues given = parse_dims(dims);
    fj::Graph g = fj::Graph::load(graph, given);
    const fj::DimValues now = g.dims();
    bool changed = false;
    for (const auto& dim : fj::input_file_dims(g, input_files)) {
      auto set = [&](const auto& d) { return d.first == dim.first; };
      if (std::any_of(given.begin(), given.end(), set)) continue;
      changed |= std::find_if(now.begin(), now.end(), set)->second != dim.second;
      given.push_back(dim);
    }
    if (!changed) return g;
    try {
      return fj::Graph::load(graph, given);
    } catch (const fj::Error& e) {  // a size a file gave: said, or the graph looks at fault
      std::string from;
      for (const auto& dim : fj::input_file_dims(g, input_files))
        from += (from.empty() ? "" : ", ") + dim.first + " = " + std::to_string(dim.second);
      const std::string note = "\nnote: the --input files gave the dims " + from + " (--dim sets a dim instead)";
      std::string text = e.diagnostic();
      while (!text.empty() && text.back() == '\n') text.pop_back();
      throw fj::Error(e.kind(), e.what() + note, e.file(), e.line(), e.column(), text + note);
    }
  }
};

// `--param` on a command that does not run the graph (a run command line turned into a plan or
// compile one): params are kernel arguments, so say why instead of CLI11's "arguments were not
// expected".
struct NoParams {
  std::vector<std::string> given;
  void define(CLI::App* cmd) { cmd->add_option("--param", given)->group("")->expected(0, 1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll); }  // hidden
  void check(const char* command) const {
    if (given.empty()) return;
    throw ArgError("--param", given[0], 0,
                   std::string(command) + " takes no --param: a param is a kernel argument, set at each launch, "
                                          "and changes neither the plan nor the generated code (`fusejit run` takes it)");
  }
};

// ---- subcommands --------------------------------------------------------------------------------

struct RunCommand {
  CLI::App* cmd = nullptr;
  Common common;
  std::vector<std::string> params, inputs, ranges, nvrtc;
  uint64_t seed = 0;
  std::string save_dir, dump_dir, arch, backend = "auto", cache_dir;
  int device = 0, repeats = 20, warmup = 3;
  int64_t row_split = 0, row_cache_limit = 0;
  bool json = false, no_cache = false, no_check = false, special = false, no_row_cache = false;

  void define(CLI::App& app) {
    cmd = app.add_subcommand("run", "run a graph fused and unfused, time, check and report");
    common.define(cmd);
    cmd->add_option("--param", params, "set a param, NAME=VALUE (repeatable; a value must fit its dtype, but unlike a default may round to 0, as a decaying rate does)");
    cmd->add_option("--input", inputs,
                    "read an input from a NumPy .npy file, NAME=FILE (repeatable); the dims of its shape follow the "
                    "file unless --dim sets them");
    cmd->add_option("--range", ranges,
                    "random range of an input, NAME=LO:HI, finite LO < HI (repeatable, once a name; "
                    "overrides the graph's `range`)");
    cmd->add_option("--seed", seed, "seed of the deterministic random inputs (0 to 2^64-1)")
        ->default_val(0)->transform(kUnsigned64);
    cmd->add_flag("--special", special,
                  "mix hard cases into random inputs: NaN, +-inf, -0.0, subnormals, extremes (docs/ops.md)");
    cmd->add_option("--save-dir", save_dir,
                    "write each output as DIR/<name>.npy (bf16 as f32 holding the same values; docs/ops.md); DIR and its "
                    "missing parents are made, as mkdir -p")
        ->check(kPath);
    cmd->add_option("--dump-dir", dump_dir, "write every kernel's .cu (and .cubin/.ptx) with an index.json (made as mkdir -p); "
                    "without it, FUSEJIT_DUMP_DIR=DIR writes them to a folder of the program's own under DIR")
        ->check(kPath);
    cmd->add_option("--arch", arch, "target architecture: sm_XY (CUBIN) or compute_XY (PTX); default: the GPU's")->check(kArch);
    cmd->add_option("--nvrtc-option", nvrtc,
                    "extra NVRTC option for every GPU kernel, e.g. --nvrtc-option=--maxrregcount=32 (repeatable; "
                    "those fusejit passes on, docs/api.md; without --fast-math, none that loosens float math such "
                    "as --fmad=true)");
    cmd->add_option("--backend", backend, "auto (GPU if present), cuda, or cpu")
        ->check(CLI::IsMember({"auto", "cuda", "cpu"}))->default_val("auto");
    cmd->add_option("--device", device, "CUDA device ordinal")->default_val(0)->transform(kNonNegative);
    cmd->add_option("--row-split", row_split,
                    "blocks per row of reductions: 0 = fusejit's rule (<= 16 rows of > 57,344 elements, <= 512 of > 253,952, or few "
                    "groups of columns of > 8,192, split), 1 = never, N = N parts (same bits either way; docs/ops.md)")
        ->default_val(0)->transform(kNonNegative64);
    cmd->add_flag("--no-row-cache", no_row_cache,
                  "reduction kernels re-read each row from memory in every pass instead of keeping it in shared "
                  "memory (same bits; to measure the difference; docs/ops.md)");
    cmd->add_option("--row-cache-limit", row_cache_limit,
                    "most bytes of shared memory a block's row cache may take: 0 = fusejit's rule (the GPU's opt-in "
                    "maximum less 12 KiB; 48 KiB on the CPU), N = at most N (same bits; docs/ops.md)")
        ->default_val(0)->transform(kNonNegative64);
    cmd->add_option("--repeats", repeats, "timed runs per path on a GPU (at most 3 on the CPU path); the median is reported")
        ->default_val(20)->transform(integer_in<int>(1, 100000, "1-100000"));
    cmd->add_option("--warmup", warmup, "untimed runs before timing, on a GPU (the CPU path times without them)")->default_val(3)->transform(integer_in<int>(0, 100000, "0-100000"));
    cmd->add_option("--cache-dir", cache_dir,
                    "kernel cache folder, private to you (default: $FUSEJIT_CACHE_DIR, $XDG_CACHE_HOME/fusejit, ~/.cache/fusejit)")
        ->check(kPath);
    cmd->add_flag("--no-cache", no_cache, "do not read or write the on-disk kernel cache (nothing is left on disk; an interrupted run's build folder is removed by the next)");
    cmd->add_flag("--no-check", no_check, "skip the reference evaluation and checks");
    cmd->add_flag("--json", json, "print the report as JSON (on an error, a JSON error object: kind, message, file, line, col)");
  }

  fj::RunOptions run_options() const {
    fj::RunOptions ro;
    for (const auto& [k, v] : split_kv_list(params, "--param"))
      ro.params.set(k, parse_scalar(v, "--param", k + "=" + v, k.size() + 1));
    ro.input_files = split_kv_list(inputs, "--input");
    for (const auto& [k, v] : split_kv_list(ranges, "--range")) {
      const std::string r = k + "=" + v;
      auto colon = v.find(':');
      if (colon == std::string::npos) throw ArgError("--range", r, k.size() + 1, "expected NAME=LO:HI");
      const double lo = range_bound(v.substr(0, colon), "LO", r, k.size() + 1);
      const double hi = range_bound(v.substr(colon + 1), "HI", r, k.size() + 2 + colon);
      ro.input_ranges.push_back({k, {lo, hi}});
    }
    ro.seed = seed;
    ro.special_values = special;
    ro.save_dir = save_dir;
    ro.repeats = repeats;
    ro.warmup = warmup;
    ro.check = !no_check;
    ro.options.fast_math = common.fast_math;
    ro.options.arch = arch;
    ro.options.dump_dir = dump_dir;
    ro.options.device = device;
    ro.options.cache_dir = cache_dir;
    ro.options.disk_cache = !no_cache;
    ro.options.nvrtc_options = nvrtc;
    ro.options.message_style = fj::MessageStyle::CommandLine;
    ro.options.row_split = row_split;
    ro.options.row_cache = !no_row_cache;
    ro.options.row_cache_limit = row_cache_limit;
    ro.options.backend = backend == "cuda" ? fj::Backend::Cuda : backend == "cpu" ? fj::Backend::Cpu : fj::Backend::Auto;
    return ro;
  }

  int exec() const {
    fj::RunOptions ro = run_options();
    const WarningLog log;  // the library's warnings go to stderr and, with --json, into the report
    fj::RunReport rep = fj::run_graph(common.load(ro.input_files), ro);
    if (json) log.append_to(rep.warnings);
    // A file or folder name's ESC or BEL stays out of the terminal, as in errors (a hostile tester's find).
    std::fputs((json ? rep.to_json() + "\n" : fj::terminal_safe(rep.to_text(), /*keep_line_feeds=*/true)).c_str(), stdout);
    if (!json) files_written(rep);
    return rep.ok() ? 0 : 1;
  }

  // Where --save-dir wrote (the report is the library's; its plan line names --dump-dir's folder).
  void files_written(const fj::RunReport& rep) const {
    if (!save_dir.empty()) {
      std::string names;
      for (const fj::TensorInfo& o : rep.outputs) names += (names.empty() ? "" : ", ") + o.name + ".npy";
      std::printf("  saved     %s in %s\n", fj::terminal_safe(names).c_str(), fj::terminal_safe(save_dir).c_str());
    }
  }
};

struct PlanCommand {
  CLI::App* cmd = nullptr;
  Common common;
  NoParams no_params;
  bool dot = false, json = false, no_row_cache = false;
  int64_t row_split = 0, row_cache_limit = 0;
  std::string arch;

  void define(CLI::App& app) {
    cmd = app.add_subcommand("plan", "print the rewritten graph and its fusion plan");
    common.define(cmd);
    no_params.define(cmd);
    cmd->add_option("--arch", arch,
                    "plan as a GPU of this compute capability runs the graph (sm_90: row caches up to 215 KiB, short "
                    "rows re-read); default: as without a GPU (48 KiB)")
        ->check(kArch);
    cmd->add_option("--row-split", row_split, "plan reductions as `run --row-split N` runs them (0 = fusejit's rule)")
        ->default_val(0)->transform(kNonNegative64);
    cmd->add_flag("--no-row-cache", no_row_cache, "plan reductions as `run --no-row-cache` runs them");
    cmd->add_option("--row-cache-limit", row_cache_limit,
                    "plan reductions as `run --row-cache-limit N` runs them (0 = fusejit's rule: 48 KiB without --arch)")
        ->default_val(0)->transform(kNonNegative64);
    CLI::Option* as_dot = cmd->add_flag("--dot", dot,
                                        "print the plan as Graphviz DOT (one cluster per fusion group, with its bytes; a "
                                        "recomputed node drawn dashed in each kernel that computes it)");
    cmd->add_flag("--json", json, "print the plan as JSON (on an error, a JSON error object: kind, message, file, line, col)")
        ->excludes(as_dot);
  }
  int exec() const {
    no_params.check("plan");
    const WarningLog log;  // with --json, the warnings (an unused input, ...) go into the JSON too, as run's
    fj::Options o;
    o.fast_math = common.fast_math;
    o.row_split = row_split;
    o.row_cache = !no_row_cache;
    o.row_cache_limit = row_cache_limit;
    o.arch = arch;
    o.message_style = fj::MessageStyle::CommandLine;
    fj::PlanReport rep = fj::plan_graph(common.load(), o);
    if (json) {
      nlohmann::json j = nlohmann::json::parse(rep.json);
      std::vector<std::string> warnings;
      log.append_to(warnings);
      j["warnings"] = warnings;
      rep.json = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    std::fputs((dot ? rep.dot : json ? rep.json + "\n" : fj::terminal_safe(rep.text, /*keep_line_feeds=*/true)).c_str(),
               stdout);
    return 0;
  }
};

struct CompileCommand {
  CLI::App* cmd = nullptr;
  Common common;
  NoParams no_params;
  std::string arch = "sm_90", out_dir, cache_dir;
  bool ptx = false, no_cache = false, fused_only = false;
  std::vector<std::string> nvrtc;

  void define(CLI::App& app) {
    cmd = app.add_subcommand("compile", "generate and compile every kernel ahead of time (no GPU needed)");
    common.define(cmd);
    no_params.define(cmd);
    cmd->add_option("--arch", arch, "target: sm_XY (or compute_XY for PTX)")->default_val("sm_90")->check(kArch);
    cmd->add_flag("--ptx", ptx, "emit PTX instead of a CUBIN: --arch sm_XY becomes compute_XY (as --arch compute_XY)");
    cmd->add_flag("--fused-only", fused_only,
                  "write the fused plan's kernels only, not the unfused baseline (a program loaded from the folder "
                  "compiles that with NVRTC if it is ever run)");
    cmd->add_option("-o,--out", out_dir, "output folder (made with its missing parents, as mkdir -p)")->required()->check(kPath);
    cmd->add_option("--cache-dir", cache_dir, "kernel cache folder (default as for run)")->check(kPath);
    cmd->add_flag("--no-cache", no_cache, "do not read or write the on-disk kernel cache");
    cmd->add_option("--nvrtc-option", nvrtc,
                    "extra NVRTC option, e.g. --nvrtc-option=--maxrregcount=32 (repeatable; those fusejit passes "
                    "on, docs/api.md; without --fast-math, none that loosens float math such as --fmad=true)");
  }
  int exec() const {
    no_params.check("compile");
    fj::Graph g = common.load();
    std::string a = arch;
    if (ptx && a.rfind("sm_", 0) == 0) a = "compute_" + a.substr(3);
    fj::Options co;
    co.cache_dir = cache_dir;
    co.disk_cache = !no_cache;
    co.nvrtc_options = nvrtc;
    co.message_style = fj::MessageStyle::CommandLine;
    auto kernels = fj::compile_to_dir(g, a, out_dir, common.fast_math, co, !fused_only);
    // Said out loud: on a build machine without a GPU a forgotten --arch would give sm_90 binaries
    // silently (`run` defaults to the GPU's own architecture; compile needs no GPU, so it cannot).
    const std::string as = (a != arch ? " (PTX: --ptx made --arch " + arch + " " + a + ")" : std::string()) +
                           (cmd->count("--arch") == 0 ? " (the default: give --arch sm_XY for another GPU)" : "");
    // Both plans are written, fused first: say which is which (the unfused ones are the
    // one-kernel-per-op baseline `fusejit run` compares with).
    const fj::PlanReport plans = fj::plan_graph(g, common.fast_math);
    const bool split = static_cast<size_t>(plans.fused_kernels) + static_cast<size_t>(plans.unfused_kernels) == kernels.size();
    const std::string shared = plans.unfused_kernels > 1 ? "; those share one binary)" : ")";
    const std::string which = fused_only ? " (the fused plan only: --fused-only)"
                              : split    ? " (" + std::to_string(plans.fused_kernels) + " fused + " +
                                            std::to_string(plans.unfused_kernels) +
                                            " unfused, the one-kernel-per-op baseline" + shared
                                         : "";
    std::printf("compiled %zu kernel(s)%s for %s%s into %s (index.json lists them)\n", kernels.size(), which.c_str(),
                a.c_str(), as.c_str(), fj::terminal_safe(out_dir).c_str());
    // The file names are hashes of the code: say which files hold the fused kernels.
    for (size_t k = 0; k < static_cast<size_t>(plans.fused_kernels) && k < kernels.size(); ++k)
      std::printf("  fused kernel %zu: %s.cu (%zu op%s)\n", k, kernels[k].name.c_str(), kernels[k].ops.size(),
                  kernels[k].ops.size() == 1 ? "" : "s");
    return 0;
  }
};

struct CacheCommand {
  CLI::App* cmd = nullptr;
  CLI::App *stats = nullptr, *list = nullptr, *clear = nullptr, *path = nullptr;
  std::string dir;

  void define(CLI::App& app) {
    cmd = app.add_subcommand("cache", "inspect or clear the on-disk kernel cache (GPU kernels and CPU modules)");
    cmd->require_subcommand(1);
    cmd->add_option("--cache-dir", dir, "cache folder (default as for run)")->check(kPath);
    stats = cmd->add_subcommand("stats", "entries, bytes and the size cap");
    list = cmd->add_subcommand("list", "one line per entry: key, bytes, target (sm_XY, compute_XY or host), kernel name(s)");
    clear = cmd->add_subcommand("clear", "remove every entry and temporary file (except those of builds running in other processes)");
    path = cmd->add_subcommand("path", "print the cache folder");
    // `cache stats --cache-dir X` works too, and each subcommand's --help lists the option.
    for (CLI::App* c : {stats, list, clear, path})
      c->add_option("--cache-dir", dir, "cache folder (default as for run)")->check(kPath);
    // Both would write `dir`: the last one silently won.
    cmd->parse_complete_callback([this] {
      for (CLI::App* c : {stats, list, clear, path})
        if (*c && c->count("--cache-dir") && cmd->count("--cache-dir"))
          throw CLI::ArgumentMismatch("--cache-dir is given twice, before and after `" + c->get_name() +
                                      "`: give it once");
    });
  }
  int exec() const {
    fj::Options o;
    o.cache_dir = dir;
    if (*path) std::printf("%s\n", fj::terminal_safe(fj::cache_path(o)).c_str());
    if (*stats) print_stats(fj::cache_stats(o));
    if (*list) print_list(o);
    if (*clear) {
      long long n = static_cast<long long>(fj::cache_clear(o));
      std::printf("removed %lld entr%s\n", n, n == 1 ? "y" : "ies");
    }
    return 0;
  }
  static void print_stats(const fj::CacheStats& s) {
    // FUSEJIT_CACHE_MAX_MB=0: no cap.
    const std::string cap = s.cap_bytes == 0 ? std::string("none (FUSEJIT_CACHE_MAX_MB=0: entries are never evicted)")
                                             : std::to_string(s.cap_bytes) +
                                                   " bytes for all entries (least recently used evicted first)";
    std::printf("path:         %s%s%s\nGPU kernels:  %s, %s\nCPU modules:  %s, %s\ncap:          %s\n"
                "damaged:      %s (each deleted on its next load; `fusejit cache clear` removes all now); %s\n",
                fj::terminal_safe(s.path).c_str(), s.enabled ? "" : " (disk cache off: ",
                s.enabled ? "" : fj::terminal_safe(s.disabled_reason + ")").c_str(), count(s.entries, "entry", "entries").c_str(),
                count(s.bytes, "byte", "bytes").c_str(), count(s.host_modules, "entry", "entries").c_str(),
                count(s.host_bytes, "byte", "bytes").c_str(), cap.c_str(), count(s.invalid, "entry", "entries").c_str(),
                count(s.temp_files, "temporary file", "temporary files").c_str());
    for (const std::string& why : s.unusable_subfolders)
      std::printf("not used:     %s (its kernels are compiled again by each process; mend or remove it, as its owner)\n",
                  fj::terminal_safe(why).c_str());
  }
  // "1 entry", "2 entries".
  static std::string count(int64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  }
  static void print_list(const fj::Options& o) {
    const std::vector<fj::CacheEntryInfo> entries = fj::cache_list(o);
    for (const fj::CacheEntryInfo& e : entries)
      std::printf("%s %10lld %-12s %s%s%s%s\n", fj::terminal_safe(e.key).c_str(), static_cast<long long>(e.bytes),
                  fj::terminal_safe(e.target).c_str(), fj::terminal_safe(e.label).c_str(), e.valid ? "" : "  (damaged: ",
                  fj::terminal_safe(e.problem).c_str(), e.valid ? "" : "; deleted on its next load)");  // read from files
    if (entries.empty()) std::printf("no entries in %s\n", fj::terminal_safe(fj::cache_path(o)).c_str());
  }
};

// `run ... --json` or `plan ... --json` anywhere on the command line: errors are then reported as
// JSON too (also when the command line itself does not parse, before CLI11 has set the flag).
bool wants_json(int argc, char** argv) {
  bool json_command = false, json = false;
  for (int i = 1; i < argc; ++i) {
    json_command |= std::string(argv[i]) == "run" || std::string(argv[i]) == "plan";
    json |= std::string(argv[i]) == "--json" || std::string(argv[i]) == "--json=";  // CLI11 reads both as the flag
  }
  return json_command && json;
}

// "--name" of every option of `app` and its subcommands that takes a value (not the flags).
void value_options(const CLI::App& app, std::set<std::string>& out) {
  for (const CLI::Option* o : app.get_options())
    if (o->get_expected_min() > 0)  // a flag expects none
      for (const std::string& n : o->get_lnames()) out.insert("--" + n);
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) value_options(*c, out);
}

// CLI11 reads `--opt=` (nothing after '=') as `--opt` and takes the next argument as its value:
// `cache --cache-dir= stats` set the folder "stats" and then lacked a subcommand. Such an argument
// of an option that takes a value is split into `--opt` and an empty value, which the option's
// validator then names (a flag's `--json=` stays as CLI11 reads it: the flag).
std::vector<std::string> split_empty_values(const CLI::App& app, int argc, char** argv) {
  std::set<std::string> takes_value;
  value_options(app, takes_value);
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    const std::string& a = args[i];
    if (a.size() > 1 && a.back() == '=' && takes_value.count(a.substr(0, a.size() - 1))) {
      args[i].pop_back();
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(++i), std::string());
    }
  }
  return args;
}

// An option name as compared for a suggestion: lower case, '_' as '-' (`--fast_math`: --fast-math).
std::string option_key(std::string s) {
  for (char& c : s) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "; --dims is no option of `run`: did you mean --dim?" for the first unknown `--option` among
// `extra` that options of `cmd` are a prefix of or that is a prefix of them (or that another
// subcommand of `app` takes: "; --repeats is an option of `fusejit run`, not of `plan`"); "" when
// none is.
// The long options of `cmd` other than `opt` that `key` (opt's key) is a prefix of or that are a
// prefix of it, comma-separated ("" when none).
std::string near_options(const CLI::App& cmd, const std::string& opt, const std::string& key) {
  std::string near;
  for (const CLI::Option* o : cmd.get_options())
    for (const std::string& n : o->get_lnames())
      if (const std::string known = "--" + n; known != opt && (known.rfind(key, 0) == 0 || key.rfind(known, 0) == 0))
        near += (near.empty() ? "" : ", ") + known;
  return near;
}

std::string close_options(const CLI::App& app, const CLI::App& cmd, const std::vector<std::string>& extra) {
  for (const std::string& a : extra) {
    const std::string opt = a.substr(0, a.find('='));
    if (opt.size() < 3 || opt.rfind("--", 0) != 0) continue;
    const std::string key = option_key(opt);
    if (const std::string near = near_options(cmd, opt, key); !near.empty())
      return "; " + opt + " is no option of `" + cmd.get_name() + "`: did you mean " + near + "?";
    if (&cmd != &app && cmd.get_option_no_throw(key) != nullptr)  // `fusejit --json plan g.txt`
      return "; " + key + " is an option of `" + cmd.get_name() + "`: give it after `" + cmd.get_name() + "`";
    for (const CLI::App* other : app.get_subcommands([](const CLI::App*) { return true; }))
      if (other != &cmd && other->get_option_no_throw(key) != nullptr)
        return "; " + key + " is an option of `fusejit " + other->get_name() + "`, not of `" + cmd.get_name() + "`";
  }
  return "";
}

// CLI11's message for arguments no option takes lists them last first (the reversal in main) and
// suggests nothing ("not expected: B=8 --dims"). This one names them in order, with the options an
// unknown one is close to (`--dims`: --dim; `--fused`: --fused-only).
// With `subcommand_required`: a command that needs a subcommand got an unknown word instead
// (`fusejit frob`, `cache frob`; CLI11 says only "A subcommand is required").
// The subcommand chosen (`cache stats`: stats), or `app` itself.
const CLI::App* chosen(const CLI::App& app) {
  const CLI::App* cmd = &app;
  while (!cmd->get_subcommands().empty()) cmd = cmd->get_subcommands().front();
  return cmd;
}

// "fusejit plan", "fusejit cache stats": the command with the subcommands chosen.
std::string command_path(const CLI::App& app) {
  std::string path = "fusejit";
  for (const CLI::App* cmd = &app; !cmd->get_subcommands().empty();) {
    cmd = cmd->get_subcommands().front();
    path += " " + cmd->get_name();
  }
  return path;
}

ErrorInfo extras_error(const CLI::App& app, bool subcommand_required) {
  const CLI::App* cmd = chosen(app);
  const std::string path = command_path(app);
  const std::vector<std::string> extra = app.remaining(true);
  std::string args;
  for (const std::string& a : extra) args += (args.empty() ? "" : " ") + a;
  ErrorInfo e;
  std::string names;  // the subcommands `cmd` takes
  for (const CLI::App* c : cmd->get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + c->get_name();
  if (subcommand_required && !names.empty()) {
    e.message = "unknown subcommand '" + extra.front() + "': `" + path + "` takes " + names;
  } else {
    e.message = "unexpected argument" + std::string(extra.size() == 1 ? "" : "s") + ": " + args +
                close_options(app, *cmd, extra) + " (`" + path + " --help` lists what it takes)";
  }
  e.text = "fusejit: error: " + e.message;
  return e;
}

// `fusejit` or `fusejit cache` alone (CLI11 says only "A subcommand is required"): the subcommands
// it takes; nullopt where the missing piece is no subcommand (a required option).
std::optional<ErrorInfo> missing_subcommand(const CLI::App& app) {
  const CLI::App* cmd = chosen(app);
  const std::string path = command_path(app);
  std::string names;
  for (const CLI::App* c : cmd->get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + c->get_name();
  if (names.empty()) return std::nullopt;
  ErrorInfo e;
  e.message = "`" + path + "` takes a subcommand: " + names + " (`" + path + " --help` says what each does)";
  e.text = "fusejit: error: " + e.message;
  return e;
}

}  // namespace

// What CLI11's refusal of the command line `e` (inside its catch block) is reported as.
ErrorInfo parse_error(const CLI::App& app, const CommandLine& line, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) return extras_error(app, false);
  const bool required = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
  const std::vector<std::string> rest = app.remaining(true);
  if (required && !rest.empty() && rest.front().rfind('-', 0) != 0) return extras_error(app, true);
  // `fusejit --json`: options only, no subcommand.
  if (required && std::all_of(rest.begin(), rest.end(), [](const std::string& a) { return a.rfind('-', 0) == 0; }))
    if (const std::optional<ErrorInfo> m = missing_subcommand(app)) return *m;
  ErrorInfo error = current_error(line);  // "fusejit: error: ...", as every other error
  if (required && error.message == "--out is required") {  // as every page writes it (a new user's find)
    error.message = "-o/--out DIR is required: the folder to write the kernels into";
    error.text = "fusejit: error: " + error.message;
  }
  if (const std::string file = line.dash_file(); required && !file.empty()) {
    error.message += "; '" + file + "' is a file, read as an option: give a file whose name starts with '-' "
                     "after `--` (" + command_path(app) + " -- " + file + ")";
    error.text = "fusejit: error: " + error.message;
    if (const auto col = line.last_argument(file)) line.locate(error, *col);
  }
  return error;
}

int main(int argc, char** argv) {
  CLI::App app{"fusejit: a runtime JIT kernel fuser for NVIDIA GPUs.\n"
               "Fuses graphs of elementwise ops and reductions into generated CUDA kernels (NVRTC,\n"
               "cached), runs them fused and unfused, and reports time, bytes moved, bandwidth and a\n"
               "bitwise check.",
               "fusejit"};
  app.footer("Exit codes: 0 success; 1 run's check failed (fused, unfused and reference differ) or a compile or\n"
             "driver error; 2 bad input (graph, options, files: the message says where); 3 an internal error.");
  app.require_subcommand(1);
  app.set_version_flag("--version", "fusejit " + std::string(fj::version()));
  RunCommand run;
  PlanCommand plan;
  CompileCommand compile;
  CacheCommand cache;
  run.define(app);
  plan.define(app);
  compile.define(app);
  cache.define(app);

  const CommandLine line(argc, argv);
  const bool json = wants_json(argc, argv);
  std::vector<std::string> args = split_empty_values(app, argc, argv);
  std::reverse(args.begin() + 1, args.end());  // CLI11 takes the arguments last first
  args.erase(args.begin());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return report(parse_error(app, line, e), json);
  }
  try {
    if (*run.cmd) return run.exec();
    if (*plan.cmd) return plan.exec();
    if (*compile.cmd) return compile.exec();
    if (*cache.cmd) return cache.exec();
  } catch (...) {
    return report(current_error(line), json);
  }
  return 0;
}
