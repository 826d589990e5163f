// Ahead-of-time folders: writing them (dump_program) and loading them (Program::load); see
// lib/aot.h and docs/aot.md.
#include "lib/aot.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "jit/arch.h"
#include "jit/codegen.h"
#include "jit/fork.h"
#include "jit/gpu_build.h"
#include "jit/hash.h"
#include "jit/host_compile.h"
#include "jit/nvrtc.h"
#include "ir/parser.h"

namespace fusejit {

struct AotFolder {
  std::filesystem::path dir;
  nlohmann::json index;
  std::string index_text;  // as read at load: a later read that differs means the folder was written again
};

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ir::replace_file: a reader sees the old file or the new one; a symlink at `p` is replaced.
void write_text(const fs::path& p, std::string_view text) {
  if (const std::string why = ir::replace_file(p.string(), {text}); !why.empty())
    throw ir::UserError(fmt::format("cannot write '{}': {}", p.string(), why));
}

// The files of a folder fusejit reads whole, and the most bytes of each (a FIFO, a device or a
// symlink to /dev/zero is refused, never read).
const ir::FileKind kIndexFile{"ahead-of-time index", "ahead-of-time indexes", uint64_t{64} << 20};
const ir::FileKind kBinaryFile{"kernel binary", "kernel binaries", uint64_t{1} << 30};

std::string read_text(const fs::path& p, const ir::FileKind& kind) { return ir::read_checked_file(p.string(), kind); }

// An flock on the folder itself (no file of fusejit's own in it): a dump holds it exclusively and a
// load shared, so a load never reads one dump's index beside another's graph.txt. A holder that
// does not let go (stopped with Ctrl-Z, hung on a slow filesystem) is named after kNote and
// refused after kWait, as the kernel cache's lock is waited for (jit/disk_store.cpp), never a
// silent hang; a dump holds it while writing its files, a load while reading and checking them
// (a CPU-path load lets go before its host compile).
class FolderLock {
 public:
  FolderLock(const fs::path& dir, int op) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0) return;
    const auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::milliseconds(1);
    bool said = false;
    while (!(held_ = ::flock(fd_, op | LOCK_NB) == 0) && (errno == EWOULDBLOCK || errno == EINTR)) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (!said && waited > kNote) {
        said = true;
        warn(fmt::format("waiting for another process that holds the folder {} (a dump writing it or a load reading "
                         "it); giving up after {} s",
                         dir.string(), kWait.count()));
      }
      if (waited > kWait) {
        ::close(fd_);
        throw ir::UserError(fmt::format("the folder {} is held by another process (a dump writing it or a load "
                                        "reading it) for over {} s: a stopped process holds it until it ends",
                                        dir.string(), kWait.count()));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }
  // Whether the lock is held (a filesystem without flock, NFS mounted nolock, gives none).
  bool held() const { return held_; }
  ~FolderLock() {
    if (fd_ >= 0) jit::unlock_and_close(fd_);  // a forked child's copy would hold it (jit/fork.h)
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  static constexpr auto kNote = std::chrono::seconds(5), kWait = std::chrono::seconds(60);
  int fd_;
  bool held_ = false;
};

// A kernel name as jit/codegen gives them: fj_<graph, 1 to 32 of [A-Za-z0-9_]>_<16 hex digits>
// (so a tampered index's name of megabytes is refused before a message shows it).
bool kernel_name_ok(std::string_view name) {
  constexpr size_t kHash = 16, kMin = 3 + 1 + 1 + kHash, kMax = 3 + 32 + 1 + kHash;
  if (name.size() < kMin || name.size() > kMax || name.substr(0, 3) != "fj_" || name[name.size() - kHash - 1] != '_')
    return false;
  const std::string_view hash = name.substr(name.size() - kHash);
  return std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }) &&
         std::all_of(hash.begin(), hash.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); });
}

// The names fusejit gives the files of a kernel: `<kernel>.cu`, `.cubin`, `.ptx`.
bool kernel_file_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  const std::string_view ext = std::string_view(name).substr(dot + 1);
  return (ext == "cu" || ext == "cubin" || ext == "ptx") && kernel_name_ok(std::string_view(name).substr(0, dot));
}

// Whether `name` is a temporary file write_text gives a file of fusejit's: ".NAME.PID.N.tmp" with
// NAME graph.txt, index.json, a prelude header or a kernel file.
bool is_temp_name(std::string_view name) {
  if (name.size() < 6 || name[0] != '.' || !name.ends_with(".tmp")) return false;
  const std::string_view core = name.substr(1, name.size() - 5);  // NAME.PID.N
  const size_t b = core.rfind('.');
  const size_t a = b == std::string_view::npos || b == 0 ? std::string_view::npos : core.rfind('.', b - 1);
  const auto digits = [](std::string_view t) {
    return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (a == std::string_view::npos || a == 0 || !digits(core.substr(a + 1, b - a - 1)) || !digits(core.substr(b + 1)))
    return false;
  const std::string file(core.substr(0, a));
  const auto headers = jit::prelude_headers();
  return file == "graph.txt" || file == "index.json" || kernel_file_name(file) ||
         std::any_of(headers.begin(), headers.end(), [&](const jit::PreludeHeader& h) { return h.name == file; });
}

// Removes the temporary files write_text left in `dir` when killed before its rename: called with
// the folder's exclusive lock held, when no other write_text can be running in it. This user's
// regular files of fusejit's names only (a user's own ".notes.1.2.tmp" stays).
void sweep_temp_files(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (is_temp_name(it->path().filename().string()) && ::lstat(it->path().c_str(), &st) == 0 &&
        S_ISREG(st.st_mode) && st.st_uid == ::geteuid())
      ::unlink(it->path().c_str());
  }
}

const char* plan_name(PlanKind kind) { return kind == PlanKind::Fused ? "fused" : "unfused"; }

// The name index.json gives a kernel's tensor: a value it writes by the first graph output it is
// (a copy of input x by its output's name), one it reads by the input's name, else the value's
// name in the graph (or vN).
std::string value_name(const ir::Graph& g, ir::NodeId id, bool written) {
  const ir::Node& n = g.node(id);
  if (written || n.op != ir::Op::Input)
    for (const ir::OutputDecl& o : g.outputs)
      if (o.node == id) return o.name;
  return n.name.empty() ? "v" + std::to_string(id) : n.name;
}

// The graph outputs a kernel's output value is, in declaration order: fusejit writes the first
// and copies it to the others (`z = y`: y and z; empty for an intermediate).
json graph_outputs(const ir::Graph& g, ir::NodeId id) {
  json names = json::array();
  for (const ir::OutputDecl& o : g.outputs)
    if (o.node == id) names.push_back(o.name);
  return names;
}

// One entry point's parameters, in order, with what each carries (docs/aot.md).
json args_json(const jit::KernelSignature& sig, const ir::Graph& g, const ir::FusionGroup& grp) {
  json out = json::array();
  for (const jit::ArgSlot& a : sig.args) {
    json e = {{"name", a.name}, {"kind", jit::arg_kind_name(a.kind)}, {"ctype", a.ctype}, {"bytes", a.bytes}};
    const size_t i = static_cast<size_t>(std::max(a.index, 0));
    switch (a.kind) {
      case jit::ArgKind::InputPtr:
      case jit::ArgKind::Stride:
      case jit::ArgKind::InStride:
        e["tensor"] = value_name(g, grp.inputs[i], false);
        e["index"] = a.index;
        break;
      case jit::ArgKind::OutputPtr:
      case jit::ArgKind::OutStride:
        e["tensor"] = value_name(g, grp.outputs[i], true);
        e["index"] = a.index;
        if (a.kind == jit::ArgKind::OutputPtr) e["graph_outputs"] = graph_outputs(g, grp.outputs[i]);
        break;
      case jit::ArgKind::Param:
        e["param"] = g.node(grp.params[i]).name;
        e["index"] = a.param_slot;
        break;
      case jit::ArgKind::DimSize:
      case jit::ArgKind::DimDivMul:
      case jit::ArgKind::DimDivShift:
      case jit::ArgKind::IterSize:
      case jit::ArgKind::IterDivMul:
      case jit::ArgKind::IterDivShift: e["dim"] = a.index; break;
      default: break;
    }
    if (a.kind == jit::ArgKind::Stride || a.kind == jit::ArgKind::InStride || a.kind == jit::ArgKind::OutStride)
      e["dim"] = a.dim;
    if (a.kind == jit::ArgKind::InputPtr || a.kind == jit::ArgKind::OutputPtr || a.kind == jit::ArgKind::Param)
      e["dtype"] = ir::dtype_name(a.dtype);
    out.push_back(std::move(e));
  }
  return out;
}

// Kernel k's entry points as index.json lists them (docs/aot.md): canonical, strided, and a row
// kernel's long-row entry (lane_groups > 1), which takes the canonical parameters.
json entries_json(const jit::GeneratedKernel& k, const ir::Graph& g, const ir::FusionGroup& grp) {
  json out = json::array({{{"name", k.name}, {"use", "canonical"}, {"args", args_json(k.signature, g, grp)}},
                          {{"name", k.strided_name()}, {"use", "strided"}, {"args", args_json(k.strided_signature, g, grp)}}});
  if (k.lane_groups > 1)  // the fast entry for long rows on chip (jit::GeneratedKernel::long_rows_name)
    out.push_back({{"name", k.long_rows_name()}, {"use", "long_rows"}, {"args", args_json(k.signature, g, grp)}});
  return out;
}

// What must match between an entry point in the folder and the one this fusejit generates (an
// external launcher reads them): its name and use, and every parameter's kind, position, C type,
// size and dtype, and the param and graph outputs it carries, by name (a hostile tester's find: a
// launcher reading an index with two params' names swapped, or graph.txt's outputs reordered,
// would pass the wrong values). An intermediate value's own name may differ (vN follows node
// ids, which a builder's graph printed and parsed again may number otherwise). check_args has
// checked the types.
std::string abi_text(const json& entry) {
  std::string s = entry.at("name").get<std::string>() + ":" + entry.at("use").get<std::string>() + ";";
  for (const json& a : entry.at("args"))
    s += fmt::format("{}:{}:{}:{}:{}:{}:{}:{};", a.at("kind").get<std::string>(), a.value("index", -1),
                     a.value("dim", -1), a.at("ctype").get<std::string>(), a.at("bytes").get<uint64_t>(),
                     a.value("dtype", ""), a.value("param", json()).dump(), a.value("graph_outputs", json()).dump());
  return s;
}

// Writes DIR/<kernel>.cu (the kernel after #include lines for the preludes, which dump_program
// writes beside it) and, when there is one and no earlier kernel's file holds the same image
// (`written`: the unfused plan's kernels are one NVRTC program), DIR/<kernel>.<cubin|ptx>;
// returns the index entry, which names the file holding its image.
// The NVRTC options fusejit compiles kernel k of program p with: its mode's (strict mode's
// --fmad=false: nvcc's default contracts a * b + c into an FMA, other bits) and the caller's.
std::vector<std::string> kernel_nvrtc_options(const Program::Impl& p, const jit::GeneratedKernel& k) {
  const jit::TranslationUnit tu =
      jit::emit_translation_unit(std::span<const jit::GeneratedKernel>(&k, 1), jit::Prelude::Included);
  return jit::nvrtc_options_for(k.fast_math, tu.nvrtc_options, p.options.nvrtc_options);
}

// An option as one shell word: as it is where the shell reads none of its characters, else quoted
// (--frandom-seed=s(1) is quoted, -Xptxas=-O3 is not), so the nvcc command a .cu gives runs as pasted.
std::string shell_word(const std::string& o) {
  const auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_+=,./:@%-").find(c) != std::string_view::npos;
  };
  return !o.empty() && std::all_of(o.begin(), o.end(), plain) ? o : jit::shell_quote(o);
}

// Index entry e names the file holding k's image `binary` and its hash; the file is written as
// DIR/<kernel>.<ext> unless an earlier kernel's (`written`) holds the same image.
void name_binary(const fs::path& dir, const jit::GeneratedKernel& k, const std::vector<char>& binary,
                 const std::string& ext, std::map<const std::vector<char>*, std::string>& written, json& e) {
  size_t n = binary.size();
  if (ext == "ptx" && n && binary[n - 1] == '\0') --n;  // PTX text without its terminator
  const std::string_view bytes(binary.data(), n);
  std::string& file = written[&binary];
  if (file.empty()) {
    file = k.name + "." + ext;
    write_text(dir / file, bytes);
  }
  e[ext] = file;
  e["binary_xxh3"] = jit::xxh3_128(bytes).hex();
}

// "// Fused plan: kernel 0 of 2.\n": the plans, and positions in them, of the kernel named `name`
// (one file serves both where a fused kernel is an unfused one too); the file names are hashes,
// and a new user had to open index.json to find the fused kernel among the unfused plan's.
std::string plans_holding(const Program::Impl& p, const std::string& name) {
  std::vector<std::string> in;
  for (const Program::Impl::Path* path : std::initializer_list<const Program::Impl::Path*>{&p.fused, p.unfused.get()}) {
    if (!path) continue;
    const std::vector<jit::GeneratedKernel>& ks = path->variants[0]->kernels;
    for (size_t i = 0; i < ks.size(); ++i)
      if (ks[i].name == name)
        in.push_back(fmt::format("{} plan{}: kernel {} of {}", path == &p.fused ? "fused" : "unfused",
                                 path == &p.fused ? "" : " (one kernel per op, the baseline)", i, ks.size()));
  }
  std::string s = fmt::format("// {}.\n", fmt::join(in, "; "));
  s[3] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[3])));
  return s;
}

json dump_kernel(const fs::path& dir, PlanKind kind, size_t group, const Program::Impl& p, const jit::GeneratedKernel& k,
                 const KernelInfo& info, const std::vector<char>* binary, const std::string& ext,
                 std::map<const std::vector<char>*, std::string>& written) {
  const ir::Graph& g = p.graph_of(kind);
  const ir::FusionGroup& grp = (kind == PlanKind::Fused ? p.fused.plan : p.unfused->plan).groups[group];
  jit::TranslationUnit tu = jit::emit_translation_unit(std::span<const jit::GeneratedKernel>(&k, 1), jit::Prelude::Included);
  // The options fusejit compiled it with, and the nvcc command that gives the same kernel.
  const std::vector<std::string> options = kernel_nvrtc_options(p, k);
  const bool ptx = p.backend == Backend::Cuda && p.gpu_target.kind == jit::OutputKind::Ptx;
  std::string nvcc = fmt::format("nvcc {} -arch={}", ptx ? "-ptx" : "-cubin",
                                 p.backend == Backend::Cuda ? p.gpu_target.name() : std::string("sm_XY"));
  std::vector<std::string> left_out;
  const std::vector<std::string>& users = p.options.nvrtc_options;
  for (const std::string& o : options) {  // fusejit's -default-device unsaid: every function it writes is marked
    const std::string same = nvcc_option(o);
    if (!same.empty()) nvcc += " " + shell_word(same);
    else if ((o != "-default-device" || std::find(users.begin(), users.end(), o) != users.end()) &&
             std::find(left_out.begin(), left_out.end(), o) == left_out.end())
      left_out.push_back(o);
  }
  const std::string left = left_out.empty() ? "" : fmt::format("\n// (NVRTC-only options left out of it: {})", fmt::join(left_out, " "));
  size_t first = 0;  // after the opening comment ("// Generated by fusejit. ...")
  while (tu.source.compare(first, 2, "//") == 0) first = tu.source.find('\n', first) + 1;
  const std::string which = plans_holding(p, k.name);
  write_text(dir / (k.name + ".cu"), fmt::format("{}{}// NVRTC options: {}\n// The same kernel with nvcc: {} {}.cu{}\n{}",
                                                 tu.source.substr(0, first), which, fmt::join(options, " "), nvcc,
                                                 k.name, left, tu.source.substr(first)));
  json e = {{"plan", plan_name(kind)}, {"group", group}, {"kernel", k.name}, {"cu", k.name + ".cu"}, {"nvrtc_options", options},
            {"elements", info.elements}, {"read_bytes", info.read_bytes}, {"write_bytes", info.write_bytes},
            {"ops", info.ops}, {"index64", k.index64}, {"vector_width", k.vector_width},
            {"split_reductions", k.split_reductions}, {"split_phases", k.split_phases},
            {"row_cache_sizes", k.row_cache_sizes}, {"row_cache_per_row", k.row_cache_per_row},
            {"row_value_sizes", k.row_value_sizes}, {"lane_groups", k.lane_groups},
            {"layout", jit::layout_fingerprint(k.signature.layout)}, {"cache", cache_outcome_name(info.cache)},
            {"entries", entries_json(k, g, grp)}};
  if (binary) name_binary(dir, k, *binary, ext, written, e);
  return e;
}

// The kernel files (.cu, .cubin, .ptx) the folder's index.json lists; empty without a readable
// fusejit index. Only names fusejit gives kernel files count (an index can name neither a file
// outside its folder nor index.json, graph.txt or a file of the user's).
std::set<std::string> indexed_files(const fs::path& dir) {
  std::set<std::string> out;
  std::string text;
  try {
    text = read_text(dir / "index.json", kIndexFile);
  } catch (const ir::UserError&) {
    return out;
  }
  const json j = text.find('\0') == std::string::npos ? json::parse(text, nullptr, false) : json();  // (as read_folder)
  if (!j.is_object() || j.value("format", "") != "fusejit-aot" || !j.contains("kernels") || !j["kernels"].is_array())
    return out;
  for (const json& k : j["kernels"]) {
    if (!k.is_object()) continue;
    for (const char* key : {"cu", "cubin", "ptx"})
      if (k.contains(key) && k[key].is_string()) {
        const std::string name = k[key].get<std::string>();
        if (kernel_file_name(name)) out.insert(name);
      }
  }
  return out;
}

void dump_path(const fs::path& dir, const Program::Impl& p, PlanKind kind, json& kernels) {
  const Program::Impl::Variant& v = *(kind == PlanKind::Fused ? p.fused : *p.unfused).variants[0];
  const std::string ext = p.backend == Backend::Cuda ? jit::to_string(p.gpu_target.kind) : "";
  std::map<const std::vector<char>*, std::string> written;  // one file an image
  for (size_t i = 0; i < v.kernels.size(); ++i) {
    const std::vector<char>* bin = p.backend == Backend::Cuda ? v.gpu.kernels[i].image.get() : nullptr;
    kernels.push_back(dump_kernel(dir, kind, i, p, v.kernels[i], v.infos[i], bin, ext, written));
  }
}

// A dump never writes over, or removes, the file its graph came from (a graph file named index.json,
// a prelude header's or a kernel's file name, in the dump folder): refused before anything is written.
// graph.txt may be it: it is written with that file's own text.
void refuse_overwriting_graph(const fs::path& dir, const Program::Impl& p) {
  const std::string& file = p.graph.impl().graph.file;
  std::error_code ec;
  if (file.empty() || !fs::is_regular_file(file, ec)) return;
  std::vector<std::string> names = {"index.json"};
  for (const jit::PreludeHeader& h : jit::prelude_headers()) names.push_back(h.name);
  for (const Program::Impl::Path* path : std::initializer_list<const Program::Impl::Path*>{&p.fused, p.unfused.get()})
    for (size_t i = 0; path && i < path->variants[0]->kernels.size(); ++i)
      for (const char* ext : {".cu", ".cubin", ".ptx"}) names.push_back(path->variants[0]->kernels[i].name + ext);
  const std::set<std::string> earlier = indexed_files(dir);  // an earlier dump's kernel files, removed at the end
  names.insert(names.end(), earlier.begin(), earlier.end());
  for (const std::string& name : names)
    if (fs::equivalent(dir / name, file, ec))
      throw ir::UserError(fmt::format("the dump would write its {} over the graph file '{}' (in the dump folder '{}'): "
                                      "dump into another folder, or rename the graph file", name, file, dir.string()));
}

// Why the index.json at `index` is not one this fusejit may replace ("" when it may): not a
// fusejit index (unreadable, another format), or one of a newer format, whose files this fusejit
// cannot tell (its own removal of an earlier dump's kernel files reads the index).
std::string foreign_index(const fs::path& index) {
  std::string text;
  try {
    text = read_text(index, kIndexFile);
  } catch (const ir::UserError& e) {
    return std::string("its index.json cannot be read (") + e.what() + ")";
  }
  const json j = text.find('\0') == std::string::npos ? json::parse(text, nullptr, false) : json();  // (as read_folder)
  if (!j.is_object() || j.value("format", "") != "fusejit-aot")
    return "its index.json is not an index fusejit wrote (no \"format\": \"fusejit-aot\")";
  const json version = j.value("format_version", json());
  if (!version.is_number_integer() || version.get<int64_t>() > kAotFormatVersion)
    return fmt::format("its index.json is of a format this fusejit does not know (format_version {}; it writes {})",
                       version.dump(), kAotFormatVersion);
  return "";
}

// A folder of someone else's is left alone: a dump replaces index.json, graph.txt and the prelude
// headers, so nothing is written where an index.json is not one a fusejit wrote, or, with no
// index, where one of those files holds other text than the dump's (a hostile tester's find: a
// user's index.json, graph.txt and fj_scalar.h were replaced without a word). graph.txt may be
// the graph file itself (refuse_overwriting_graph).
void refuse_foreign_folder(const fs::path& dir, const std::string& graph_text, const std::string& graph_file) {
  std::error_code ec;
  std::string why;
  if (fs::exists(fs::symlink_status(dir / "index.json", ec))) {
    why = foreign_index(dir / "index.json");
  } else {
    std::vector<std::pair<std::string, std::string_view>> ours = {{"graph.txt", graph_text}};
    for (const jit::PreludeHeader& h : jit::prelude_headers()) ours.emplace_back(h.name, h.text);
    for (const auto& [name, text] : ours) {
      const fs::path f = dir / name;
      if (!fs::exists(fs::symlink_status(f, ec)) || (name == "graph.txt" && fs::equivalent(f, graph_file, ec))) continue;
      std::string have;
      try {
        have = read_text(f, kIndexFile);
      } catch (const ir::UserError&) {
      }
      if (have != text) {
        why = "it holds a " + name + " of other text and no index.json of fusejit's" +
              (name == "graph.txt" ? " (a dump of another graph killed before its index? remove the folder's files)" : "");
        break;
      }
    }
  }
  if (!why.empty())
    throw ir::UserError(fmt::format("the folder '{}' is not one fusejit wrote: {}; writing the kernels there would "
                                    "replace files of yours: choose a new or empty folder",
                                    dir.string(), why));
}

// How the caller named the folder dump_program writes: an option of its own interface, or the
// environment variable that gave it.
const char* kernel_folder_option(const Program::Impl& p) {
  if (p.dump_dir_from_env) return "the program's folder under FUSEJIT_DUMP_DIR";
  switch (p.options.message_style) {
    case MessageStyle::CommandLine: return "--dump-dir, or compile's --out";
    case MessageStyle::Python: return "dump_dir=, or compile_to_dir's out_dir";
    case MessageStyle::Api: break;
  }
  return "Options::dump_dir, or compile_to_dir's";
}

void write_folder(const Program::Impl& p) {
  ir::check_path(p.options.dump_dir, "dump folder");
  const fs::path dir(p.options.dump_dir);
  if (const std::string why = ir::make_folders(dir.string()); !why.empty())
    throw ir::UserError(fmt::format("cannot create the folder '{}' to write the kernels into ({}): {}", dir.string(),
                                    kernel_folder_option(p), why));
  const FolderLock lock(dir, LOCK_EX);
  if (lock.held()) sweep_temp_files(dir);  // what a killed dump left (never another dump's live file)
  refuse_overwriting_graph(dir, p);
  const ir::Graph& g = p.graph.impl().graph;
  // The graph as given: its own text when it was parsed (so messages keep their lines), else the
  // printed form.
  const std::string text = p.graph.impl().source.empty() ? p.graph.to_text() : p.graph.impl().source;
  refuse_foreign_folder(dir, text, g.file);
  json dims = json::object();
  for (const auto& [name, value] : p.graph.dims()) dims[name] = value;
  const bool gpu = p.backend == Backend::Cuda;
  json index = {{"format", "fusejit-aot"}, {"format_version", kAotFormatVersion}, {"fusejit_version", version()},
                {"codegen_version", jit::kCodegenVersion}, {"graph", "graph.txt"},
                {"graph_file", g.traced_file ? std::string() : g.file},  // a tracer's: none (a user's path)
                {"graph_name", g.name}, {"dims", dims}, {"target", gpu ? p.gpu_target.name() : "host"},
                {"output", gpu ? jit::to_string(p.gpu_target.kind) : "none"}, {"fast_math", p.options.fast_math},
                {"nvrtc_options", p.options.nvrtc_options}, {"nvrtc_version", gpu ? jit::nvrtc_version().str() : ""},
                {"headers", json::array()}, {"kernels", json::array()}};
  // The preludes every .cu includes: each file compiles with nvcc where it lies (docs/aot.md).
  for (const jit::PreludeHeader& h : jit::prelude_headers()) {
    write_text(dir / h.name, h.text);
    index["headers"].push_back(h.name);
  }
  const std::set<std::string> before = indexed_files(dir);
  dump_path(dir, p, PlanKind::Fused, index["kernels"]);
  if (p.unfused) dump_path(dir, p, PlanKind::Unfused, index["kernels"]);
  index["plans"] = p.unfused ? json::array({"fused", "unfused"}) : json::array({"fused"});
  // graph.txt and index.json last, one after the other: a dump that fails on the way (a full disk,
  // a kill) leaves the earlier dump's pair, which loads, not a new graph beside an old index.
  write_text(dir / "graph.txt", text);
  write_text(dir / "index.json", json_text(std::move(index)) + "\n");
  // The kernel files of an earlier dump into this folder that this one does not write again: gone,
  // so the folder holds one program (files fusejit did not write stay).
  const std::set<std::string> now = indexed_files(dir);
  std::error_code ec;
  for (const std::string& f : before)
    if (!now.count(f)) fs::remove(dir / f, ec);
}

}  // namespace

void dump_program(const Program::Impl& p) {
  if (!p.dump_dir_from_env) return write_folder(p);
  try {
    write_folder(p);
  } catch (const ir::UserError& e) {  // a user who never asked for a dump learns why one was written
    const std::string what = e.what();
    if (what.find("FUSEJIT_DUMP_DIR") != std::string::npos) throw;
    throw ir::UserError(what + " (writing the program's folder under FUSEJIT_DUMP_DIR: unset the variable to write none)");
  }
}

namespace {

[[noreturn]] void bad_index(const std::string& where, const std::string& what) {
  throw ir::UserError(fmt::format("{}: {}; write the folder again with `fusejit compile`", where, what));
}

// x[key] when it is there and `ok` holds for it; else a User error naming the file and the key.
const json& field(const json& x, const char* key, bool (json::*ok)() const noexcept, const char* want,
                  const std::string& where) {
  const auto it = x.find(key);
  if (it == x.end()) bad_index(where, fmt::format("\"{}\" is missing (expected {})", key, want));
  if (!((*it).*ok)()) bad_index(where, fmt::format("\"{}\" is not {}", key, want));
  return *it;
}

const std::string& string_field(const json& x, const char* key, const std::string& where) {
  return field(x, key, &json::is_string, "a string", where).get_ref<const std::string&>();
}

// One entry point: an object with a string name and use, and "args": objects with a string kind
// and ctype, a byte size, integer index and dim and a string dtype where they are given.
void check_args(const json& e, const std::string& where) {
  if (!e.is_object()) bad_index(where, "an entry point of \"entries\" is not an object");
  string_field(e, "name", where);
  string_field(e, "use", where);
  for (const json& a : field(e, "args", &json::is_array, "an array", where)) {
    if (!a.is_object()) bad_index(where, "an argument is not an object");
    string_field(a, "kind", where);
    string_field(a, "ctype", where);
    field(a, "bytes", &json::is_number_unsigned, "a non-negative integer", where);
    for (const char* key : {"index", "dim"})
      if (a.contains(key)) field(a, key, &json::is_number_integer, "an integer", where);
    if (a.contains("dtype")) string_field(a, "dtype", where);
  }
}

// "nvrtc_options": strings, none choosing the target ("target" does: check_target).
void check_nvrtc_options(const json& x, const std::string& where) {
  for (const json& o : field(x, "nvrtc_options", &json::is_array, "an array", where))
    if (!o.is_string())
      bad_index(where, "\"nvrtc_options\" holds a value that is not a string");
    else if (chooses_target(o.get_ref<const std::string&>()))
      bad_index(where, fmt::format("\"nvrtc_options\" holds '{}', which chooses the target", o.get<std::string>()));
}

// Kernel k of the index: its plan and group, its kernel name, and files named as fusejit names them
// (so an index never points outside its folder).
void check_kernel(const json& k, size_t i, size_t count, const std::string& output, const std::string& file) {
  const std::string where = fmt::format("'{}', kernel {}", file, i);
  if (!k.is_object()) bad_index(where, "the entry is not an object");
  const std::string& plan = string_field(k, "plan", where);
  if (plan != "fused" && plan != "unfused") bad_index(where, "\"plan\" is neither \"fused\" nor \"unfused\"");
  if (field(k, "group", &json::is_number_unsigned, "a non-negative integer", where).get<uint64_t>() >= count)
    bad_index(where, fmt::format("\"group\" is not below the number of kernels ({})", count));
  const std::string& name = string_field(k, "kernel", where);
  if (!kernel_name_ok(name)) bad_index(where, fmt::format("\"kernel\" is not a fusejit kernel name (fj_...)"));
  if (string_field(k, "cu", where) != name + ".cu") bad_index(where, fmt::format("\"cu\" is not \"{}.cu\"", name));
  // The binary may be another kernel's file of the folder: the unfused plan's kernels share one image.
  const std::string& binary = string_field(k, output.c_str(), where);
  if (!kernel_file_name(binary) || !binary.ends_with("." + output))
    bad_index(where, fmt::format("\"{}\" is not a kernel file of the folder (fj_<name>.{})", output, output));
  const json& entries = field(k, "entries", &json::is_array, "an array", where);
  // The canonical and strided entries, and a row kernel's long-row entry (lane_groups > 1).
  if (entries.size() != 2 && entries.size() != 3)
    bad_index(where, "\"entries\" holds neither the two entry points nor three (with \"long_rows\")");
  for (const json& e : entries) check_args(e, where);
  check_nvrtc_options(k, where);  // what it was compiled with: loading compares them with the folder's mode
  if (k.contains("binary_xxh3") && (!k["binary_xxh3"].is_string() ||
                                    !jit::Hash128::from_hex(k["binary_xxh3"].get_ref<const std::string&>())))
    bad_index(where, "\"binary_xxh3\" is not 32 hex digits");
}

// Every key the loader reads, with its type: a damaged or hand-edited index is a User error naming
// the file, never a crash or a message of the JSON library.
// "target": an architecture this fusejit parses, sm_XY holding CUBINs and compute_XY PTX (the
// binary key the loader reads follows from it).
void check_target(const json& x, const std::string& where) {
  const std::string& target = string_field(x, "target", where);
  try {
    (void)jit::parse_target(target);
  } catch (const ir::UserError& e) {
    bad_index(where, fmt::format("\"target\": {}", e.what()));
  }
  const bool cubin = x["output"] == "cubin";
  if (target.rfind(cubin ? "sm_" : "compute_", 0) != 0)
    bad_index(where, fmt::format("\"target\" {} does not hold \"output\" {} (sm_XY: cubin, compute_XY: ptx)", target,
                                 cubin ? "cubin" : "ptx"));
}


void check_index(const json& x, const std::string& file) {
  const std::string where = "'" + file + "'";
  const std::string& graph = string_field(x, "graph", where);
  if (graph.empty() || graph == "." || graph == ".." || graph.find_first_of(std::string_view("/\0", 2)) != std::string::npos)
    bad_index(where, "\"graph\" is not a file name in the folder");
  string_field(x, "fusejit_version", where);  // read for messages
  for (const json& h : field(x, "headers", &json::is_array, "an array", where))
    if (!h.is_string()) bad_index(where, "\"headers\" holds a value that is not a string");
  check_target(x, where);
  field(x, "fast_math", &json::is_boolean, "true or false", where);
  check_nvrtc_options(x, where);
  for (const auto& [name, value] : field(x, "dims", &json::is_object, "an object", where).items())
    if (!value.is_number_unsigned() || value.get<uint64_t>() > uint64_t{INT64_MAX})
      bad_index(where, fmt::format("dim '{}' is not an integer from 0 to 2^63 - 1", name));
  if (x.contains("plans") && x["plans"] != json::array({"fused"}) && x["plans"] != json::array({"fused", "unfused"}))
    bad_index(where, "\"plans\" is neither [\"fused\"] nor [\"fused\", \"unfused\"]");
  const json& kernels = field(x, "kernels", &json::is_array, "an array", where);
  std::set<std::pair<std::string, uint64_t>> seen;
  for (size_t i = 0; i < kernels.size(); ++i) {
    check_kernel(kernels[i], i, kernels.size(), x["output"].get<std::string>(), file);
    if (!seen.insert({kernels[i]["plan"].get<std::string>(), kernels[i]["group"].get<uint64_t>()}).second)
      bad_index(fmt::format("'{}', kernel {}", file, i), "a second kernel for the same plan and group");
  }
}

// x[key] as a message shows it: a string as itself, anything else as JSON, "?" when missing.
std::string shown(const json& x, const char* key) {
  if (!x.contains(key)) return "?";
  return x[key].is_string() ? x[key].get<std::string>() : x[key].dump();
}

// The fused plan's kernel files are there, before a GPU is looked for (without one, a copied
// folder missing its binaries said only "needs a GPU"); their contents are read and checked at
// build. The unfused plan's are read on its first use, as before.
// Index entry i's file `name` is in the folder (an error naming index.json and entry i if not).
void check_kernel_file(const AotFolder& f, size_t i, const std::string& name) {
  const std::string file = (f.dir / "index.json").string();
  const fs::path named = f.dir / name;
  std::error_code ec;
  const bool there = fs::exists(named, ec);
  if (ec)  // not "no such file": permissions, a loop of links; writing the folder again would not help
    throw ir::UserError(fmt::format("'{}', kernel {}: cannot read its file '{}': {}", file, i, named.string(), ec.message()));
  if (!there) bad_index(fmt::format("'{}', kernel {}", file, i), fmt::format("its file '{}' is missing", named.string()));
  if (!fs::is_regular_file(named, ec))  // a folder or a FIFO in its place (docs/aot.md: regular files only)
    bad_index(fmt::format("'{}', kernel {}", file, i), fmt::format("its file '{}' is no regular file", named.string()));
}

// The binary `name` holds kernel `kernel`: a CUBIN is an ELF file whose string table holds the
// name as one string; a PTX has its `.entry <kernel>(` line. An index naming another kernel's file,
// or a file that is no binary, is the folder's error, not a driver's "named symbol not found".
void check_holds(const AotFolder& f, const std::string& name, std::string_view bytes, const std::string& kernel,
                 bool ptx) {
  const std::string file = (f.dir / name).string();
  if (!ptx && !bytes.starts_with("\x7f" "ELF"))
    throw ir::UserError(fmt::format("kernel binary '{}' is not a CUBIN (no ELF header): write the folder again with "
                                    "`fusejit compile`",
                                    file));
  const std::string needle = ptx ? ".entry " + kernel + "(" : std::string(1, '\0') + kernel + std::string(1, '\0');
  if (bytes.find(needle) == std::string_view::npos)
    throw ir::UserError(fmt::format("kernel binary '{}' does not hold kernel {} ({} lists it there): write the folder "
                                    "again with `fusejit compile`",
                                    file, kernel, (f.dir / "index.json").string()));
}

// Entry e's position in the index's "kernels" (for messages).
size_t index_entry(const AotFolder& f, const json* e) {
  const json& all = f.index.at("kernels");
  for (size_t i = 0; i < all.size(); ++i)
    if (&all[i] == e) return i;
  return all.size();
}

// The binary `name` (its bytes, a PTX's without the terminating NUL) is the one `fusejit compile`
// wrote for index entry i (a folder written before "binary_xxh3" has none to compare).
void check_binary_hash(const AotFolder& f, const json& k, const std::string& name, const jit::Hash128& hash) {
  if (k.contains("binary_xxh3") && hash != jit::Hash128::from_hex(k["binary_xxh3"].get_ref<const std::string&>()))
    throw ir::UserError(fmt::format("kernel binary '{}' is not the one '{}' lists for kernel {} (its \"binary_xxh3\" "
                                    "differs: the file was replaced or damaged): write the folder again with "
                                    "`fusejit compile`",
                                    (f.dir / name).string(), (f.dir / "index.json").string(), index_entry(f, &k)));
}

// The binary `name` that index entry i lists: there, read as a regular file of bounded size
// (kBinaryFile), not empty. PTX gets the terminating NUL NVRTC gives it.
std::shared_ptr<const std::vector<char>> read_kernel_binary(const AotFolder& f, size_t i, const std::string& name, bool ptx) {
  check_kernel_file(f, i, name);
  const std::string bytes = read_text(f.dir / name, kBinaryFile);
  if (bytes.empty())
    throw ir::UserError(fmt::format("kernel binary '{}' is empty: write the folder again with `fusejit compile`",
                                    (f.dir / name).string()));
  auto bin = std::make_shared<std::vector<char>>(bytes.begin(), bytes.end());
  if (ptx) bin->push_back('\0');
  return bin;
}

// The fused plan's files, checked before a GPU is looked for (so a folder copied without them, or
// with a damaged one, says so on any machine); the unfused plan's on its first use.
void check_fused_files(const AotFolder& f) {
  const std::string output = f.index["output"].get<std::string>();
  for (size_t i = 0; i < f.index["kernels"].size(); ++i) {
    const json& k = f.index["kernels"][i];
    if (k["plan"] != "fused") continue;
    check_kernel_file(f, i, k["cu"].get<std::string>());
    const std::string& name = k[output].get_ref<const std::string&>();
    const auto bin = read_kernel_binary(f, i, name, false);
    check_holds(f, name, std::string_view(bin->data(), bin->size()), k["kernel"].get<std::string>(), output == "ptx");
    check_binary_hash(f, k, name, jit::xxh3_128(std::string_view(bin->data(), bin->size())));
  }
}

// An index's "output": GPU binaries, not a CPU-path dump's "none".
void check_output(const json& x, const std::string& file, const std::string& dir) {
  if (!x.contains("output") || (x["output"] != "cubin" && x["output"] != "ptx" && x["output"] != "none"))
    throw ir::UserError(fmt::format("'{}' has \"output\": {} (\"cubin\" or \"ptx\" in a folder `fusejit compile` "
                                    "writes)",
                                    file, x.contains("output") ? x["output"].dump() : "missing"));
  if (x["output"] == "none")
    throw ir::UserError(fmt::format("'{}' holds no GPU binaries (a dump folder of the CPU path: Options::dump_dir, "
                                    "Python's dump_dir=, `fusejit run --dump-dir`; for reading): write a folder to "
                                    "load with `fusejit compile GRAPH --arch sm_XY -o DIR`, fusejit::compile_to_dir or "
                                    "fusejit.compile_to_dir (no GPU needed)",
                                    dir));
}

// An index's format, format_version, code generator and output: what this fusejit reads.
void check_header(const json& x, const std::string& file, const std::string& dir) {
  if (!x.is_object() || !x.contains("format") || x["format"] != "fusejit-aot")
    throw ir::UserError(fmt::format("'{}' is not a fusejit ahead-of-time index (no \"format\": \"fusejit-aot\")", file));
  if (!x.contains("format_version") || !x["format_version"].is_number_integer() ||
      x["format_version"] != kAotFormatVersion)
    throw ir::UserError(fmt::format("'{}' has format_version {}{}; this fusejit reads the number {}: write it again "
                                    "with `fusejit compile`",
                                    file, x.contains("format_version") ? x["format_version"].dump() : "(none)",
                                    x.contains("format_version") && !x["format_version"].is_number() ? ", not a number" : "",
                                    kAotFormatVersion));
  string_field(x, "codegen_version", "'" + file + "'");
  if (x["codegen_version"] != jit::kCodegenVersion)
    throw ir::UserError(fmt::format("'{}' was written by fusejit {} ({}); this one generates {}: write it again with "
                                    "`fusejit compile`",
                                    dir, shown(x, "fusejit_version"), shown(x, "codegen_version"), jit::kCodegenVersion));
  check_output(x, file, dir);
}

// The folder's index, checked for a format and code generator this fusejit reads.
std::shared_ptr<AotFolder> read_folder(const std::string& dir) {
  auto f = std::make_shared<AotFolder>();
  f->dir = dir;
  const std::string file = (f->dir / "index.json").string();
  const std::string text = read_text(file, kIndexFile);
  f->index_text = text;
  if (const size_t nul = text.find('\0'); nul != std::string::npos)  // nlohmann's parser stops at one
    throw ir::UserError(fmt::format("'{}' is not valid JSON: a NUL byte at byte {}", file, nul));
  try {
    f->index = json::parse(text);
  } catch (const json::exception& e) {
    throw ir::UserError(fmt::format("'{}' is not valid JSON: {}", file, e.what()));
  }
  check_header(f->index, file, dir);
  check_index(f->index, file);
  check_fused_files(*f);
  return f;
}


// The folder's kernels of one plan, by group (check_index: each group below the kernel count, once).
std::vector<const json*> folder_kernels(const AotFolder& f, PlanKind kind) {
  std::vector<const json*> out;
  for (const json& k : f.index.at("kernels"))
    if (k.at("plan") == plan_name(kind)) {
      const size_t group = k.at("group").get<size_t>();
      if (out.size() <= group) out.resize(group + 1, nullptr);
      out[group] = &k;
    }
  return out;
}

// Kernel i of a plan in the folder is the one this fusejit generates for graph.txt: the same name
// (a hash of its source, so the same code) and parameters. A folder whose graph.txt was edited or
// written by another dump, or whose index lacks the kernel, is refused rather than run.
void check_folder_kernel(const AotFolder& f, const Program::Impl& p, const Program::Impl::Path& path, size_t i,
                         const std::vector<const json*>& entries, const jit::GeneratedKernel& k) {
  const ir::Graph& g = p.graph_of(path.kind);
  const ir::FusionGroup& grp = path.plan.groups[i];
  const json made = entries_json(k, g, grp);
  const std::vector<std::string> options = kernel_nvrtc_options(p, k);
  const json* e = i < entries.size() ? entries[i] : nullptr;
  const char* plan = plan_name(path.kind);
  if (!e)
    throw ir::UserError(fmt::format("'{}': index.json lists no kernel {} of the {} plan (which has {} kernel{}): "
                                    "write the folder again with `fusejit compile`",
                                    f.dir.string(), i, plan, path.plan.groups.size(),
                                    path.plan.groups.size() == 1 ? "" : "s"));
  const std::string& name = e->at("kernel").get_ref<const std::string&>();
  const json& es = e->at("entries");
  bool same = name == k.name && es.size() == made.size();
  for (size_t j = 0; same && j < es.size(); ++j) same = abi_text(es[j]) == abi_text(made[j]);
  if (same && e->at("nvrtc_options") != json(options))
    throw ir::UserError(fmt::format("'{}': kernel {} of the {} plan was compiled with NVRTC options {} (index.json), "
                                    "but the folder's mode and options (\"fast_math\" {}, \"nvrtc_options\") give {} "
                                    "(was index.json edited?): write the folder again with `fusejit compile`",
                                    f.dir.string(), i, plan, e->at("nvrtc_options").dump(), p.options.fast_math,
                                    json(options).dump()));
  if (!same) {
    // The same name with other parameters: the index was edited (the name hashes the source), or
    // graph.txt's params or outputs renamed or reordered (the names are no part of the source).
    const std::string what = name == k.name ? fmt::format("{} in index.json with other parameters than the {} this "
                                                          "fusejit makes from graph.txt (was index.json edited, or "
                                                          "graph.txt's params or outputs renamed or reordered?)",
                                                          name, k.name)
                                            : fmt::format("{} in index.json, but this fusejit makes {} from graph.txt",
                                                          name, k.name);
    throw ir::UserError(fmt::format("'{}': kernel {} of the {} plan is {} (the folder's binaries were compiled from "
                                    "another graph or options: was graph.txt or index.json's \"dims\" edited, or "
                                    "was it written by another `fusejit compile`?): write the folder again with `fusejit compile`",
                                    f.dir.string(), i, plan, what));
  }
}

// The kernels this fusejit generates for `path` of the folder's graph, each checked against the
// index (check_folder_kernel).
std::vector<jit::GeneratedKernel> checked_kernels(const AotFolder& f, const Program::Impl& p,
                                                  const Program::Impl::Path& path,
                                                  const std::vector<const json*>& entries) {
  const ir::Graph& g = p.graph_of(path.kind);
  const jit::CodegenOptions cg = codegen_options(path.kind, p.options, 0);
  if (entries.size() > path.plan.groups.size())  // check_index: each group once, below the kernel count
    bad_index("'" + (f.dir / "index.json").string() + "'",
              fmt::format("it lists a kernel for group {} of the {} plan, which has {} kernel{}", entries.size() - 1,
                          plan_name(path.kind), path.plan.groups.size(), path.plan.groups.size() == 1 ? "" : "s"));
  std::vector<jit::GeneratedKernel> out;
  for (size_t i = 0; i < path.plan.groups.size(); ++i) {
    const ir::FusionGroup& grp = path.plan.groups[i];
    jit::GeneratedKernel k = jit::generate_kernel(g, grp, cg);
    check_folder_kernel(f, p, path, i, entries, k);
    out.push_back(std::move(k));
  }
  return out;
}

// Options::backend = Cpu: the folder's graph in its mode on the CPU path, compiled by the host
// C++ compiler as Program::compile does (the folder's GPU binaries are checked, not used).
// `folder`: the caller's options with the folder's mode, no dump_dir (a dump into the folder
// being loaded waited forever on its own lock).
Program cpu_program(const Graph& graph, Options folder) {
  folder.arch.clear();  // the folder's GPU target and NVRTC options mean nothing on the CPU path
  folder.nvrtc_options.clear();
  return compile_program(graph, folder, false);  // no FUSEJIT_DUMP_DIR folder: a load writes nothing
}

}  // namespace

std::shared_ptr<const Program::Impl::Variant> variant_from_folder(const Program::Impl& p, const Program::Impl::Path& path,
                                                                  int v) {
  if (!p.aot || v != 0) return nullptr;
  const AotFolder& f = *p.aot;
  // A folder written with --fused-only: the unfused plan is compiled, as a missing variant is.
  if (path.kind == PlanKind::Unfused && f.index.contains("plans") && f.index["plans"] == json::array({"fused"}))
    return nullptr;
  // The unfused plan's files are read on its first use: from the folder Program::load read.
  if (path.kind == PlanKind::Unfused && read_text(f.dir / "index.json", kIndexFile) != f.index_text)
    throw ir::UserError(fmt::format("'{}' was written again since Program::load read it (its index.json changed): "
                                    "its unfused kernels may not be the loaded program's; load the folder again",
                                    f.dir.string()));
  const std::vector<const json*> entries = folder_kernels(f, path.kind);
  if (entries.empty() && path.plan.groups.empty()) return nullptr;
  const ir::Graph& g = p.graph_of(path.kind);
  const std::vector<int> bindings = ir::output_bindings(g);
  auto out = std::make_shared<Program::Impl::Variant>();
  out->gpu.target = p.gpu_target;
  // Read and hashed once a file: the unfused plan's kernels all name one.
  std::map<std::string, std::pair<std::shared_ptr<const std::vector<char>>, jit::Hash128>> images;
  std::vector<jit::GeneratedKernel> kernels = checked_kernels(f, p, path, entries);
  const bool ptx = p.gpu_target.kind == jit::OutputKind::Ptx;
  for (size_t i = 0; i < path.plan.groups.size(); ++i) {
    const ir::FusionGroup& grp = path.plan.groups[i];
    jit::GeneratedKernel& k = kernels[i];
    const json* e = entries[i];
    const std::string file = e->at(jit::to_string(p.gpu_target.kind)).get<std::string>();
    auto& [image, hash] = images[file];
    if (!image) {
      image = read_kernel_binary(f, index_entry(f, e), file, ptx);
      hash = jit::xxh3_128(std::string_view(image->data(), image->size() - (ptx ? 1 : 0)));  // the file's bytes
    }
    check_holds(f, file, std::string_view(image->data(), image->size()), k.name, ptx);
    check_binary_hash(f, *e, file, hash);
    KernelInfo info = kernel_info(g, grp, k, CacheOutcome::Loaded, 0.0, p.rules, bindings);
    out->infos.push_back(std::move(info));
    out->gpu.kernels.push_back({k, image, jit::CacheOutcome::DiskHit, 0.0, (f.dir / file).string()});
    out->kernels.push_back(std::move(k));
  }
  return out;
}

namespace {
// index.json's "dims": each a dim graph.txt declares, and every one it declares (the folder's
// binaries were planned at those values).
DimValues index_dims(const AotFolder& f, const Graph& parsed, const std::string& graph_file) {
  DimValues dims;
  for (const auto& [name, value] : f.index["dims"].items()) dims.emplace_back(name, value.get<int64_t>());
  const std::string where = "'" + (f.dir / "index.json").string() + "'";
  const DimValues declared = parsed.dims();
  for (const auto& dim : dims)  // not a structured binding: clang refuses to capture one
    if (std::none_of(declared.begin(), declared.end(), [&](const auto& d) { return d.first == dim.first; }))
      bad_index(where, fmt::format("\"dims\" names dim '{}', which '{}' does not declare", dim.first, graph_file));
  for (const auto& dim : declared)
    if (!f.index["dims"].contains(dim.first))
      bad_index(where, fmt::format("\"dims\" lacks dim '{}', which '{}' declares", dim.first, graph_file));
  return dims;
}

// graph.txt at index.json's "dims": a size its shapes cannot take is the index's error.
Graph with_index_dims(const AotFolder& f, const Graph& parsed, const DimValues& dims, const std::string& graph_file) {
  try {
    return parsed.with_dims(dims);
  } catch (const Error& e) {
    throw ir::UserError(fmt::format("'{}': its \"dims\" do not fit '{}': {}", (f.dir / "index.json").string(),
                                    graph_file, e.what()));
  }
}

// The caller's options in the folder's mode, target and NVRTC options, which check_extra_nvrtc_options
// takes (a folder written before a rule, or edited: a strict index whose options loosen float math).
Options folder_options(const AotFolder& f, const Options& options) {
  Options o = options;
  o.fast_math = f.index["fast_math"].get<bool>();
  o.nvrtc_options = f.index["nvrtc_options"].get<std::vector<std::string>>();
  o.arch = f.index["target"].get<std::string>();
  o.dump_dir.clear();
  try {
    check_extra_nvrtc_options(o);
  } catch (const ir::UserError& e) {
    bad_index("'" + (f.dir / "index.json").string() + "'", std::string("\"nvrtc_options\": ") + e.what());
  }
  return o;
}
}  // namespace

Program Program::load(const std::string& dir, const Options& options) {
  return translate_errors([&] {
    check_options(options);
    ir::check_path(dir, "ahead-of-time folder");
    if (std::error_code ec; fs::is_regular_file(dir, ec))  // the index itself, say: name the folder
      throw ir::UserError(fmt::format("'{}' is a file: {} takes the folder `fusejit compile -o` wrote{}", dir,
                                      options.message_style == MessageStyle::Python ? "fusejit.load" : "Program::load",
                                      fs::path(dir).filename() == "index.json" ? " (this file's folder)" : ""));
    std::optional<FolderLock> lock(std::in_place, dir, LOCK_SH);
    std::shared_ptr<AotFolder> f = read_folder(dir);
    const json& x = f->index;
    // At the dims it was compiled for; messages name the folder's graph.txt (the same lines), and
    // index.json's "dims" for a dim graph.txt does not declare.
    const std::string graph_file = (f->dir / x["graph"].get<std::string>()).string();
    const Graph parsed = Graph::load(graph_file);  // read and parsed once (an unused input warns once)
    const Graph graph = with_index_dims(*f, parsed, index_dims(*f, parsed, graph_file), graph_file);
    const Options o = folder_options(*f, options);
    // graph.txt is the one the binaries came from, checked on any machine (planned as
    // compile_to_dir plans it: the kernels do not depend on the GPU's shared memory).
    const std::shared_ptr<const Impl> planned = rewrite_and_plan(graph, o, 0);
    (void)checked_kernels(*f, *planned, planned->fused, folder_kernels(*f, PlanKind::Fused));
    if (options.backend == Backend::Cpu) {
      lock.reset();  // the folder is read and checked: the host compile (seconds) holds no one up
      return cpu_program(graph, o);
    }
    const bool python = options.message_style == MessageStyle::Python;
    std::string why;
    std::shared_ptr<jit::DeviceContext> device = open_device(options, &why);
    if (!device)
      throw jit::DriverError(jit::DriverErrorKind::NoDevice,
                             fmt::format("{} needs a GPU to run the folder's binaries: {} (the folder is checked; {} "
                                         "runs its graph on the CPU path instead)",
                                         python ? "fusejit.load" : "Program::load", why,
                                         python ? "backend=\"cpu\"" : "Options::backend = Backend::Cpu"));
    const jit::Arch cc{device->info().cc_major, device->info().cc_minor};
    if (const std::string no = jit::target_runs_on(jit::parse_target(o.arch), cc); !no.empty())
      throw ir::UserError(fmt::format("'{}' holds kernels for {}: {}; write it for this GPU with `fusejit compile GRAPH "
                                      "--arch sm_{} -o DIR`",
                                      dir, o.arch, no, cc.number()));
    std::shared_ptr<Impl> p = rewrite_and_plan(graph, o, device->info().shared_per_block_optin);
    p->loaded = true;
    p->aot = f;
    p->device = device;
    p->backend = Backend::Cuda;
    p->gpu_target = jit::parse_target(o.arch);  // not checked against NVRTC: none may be installed
    p->target = p->gpu_target.name() +
                (p->gpu_target.kind == jit::OutputKind::Cubin ? " (CUBIN)" : " (PTX, JIT-compiled by the driver)");
    p->fused.variants[0] = build_variant(*p, p->fused, 0);
    if (options.build_unfused) p->path(PlanKind::Unfused);
    return Program(std::move(p));
  });
}

}  // namespace fusejit
