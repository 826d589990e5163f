// Ahead-of-time folders: writing them (dump_program) and loading them (Program::load); see
// lib/aot.h and docs/aot.md.
#include "lib/aot.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/arch.h"
#include "jit/codegen.h"
#include "jit/nvrtc.h"

namespace fusejit {

struct AotFolder {
  std::filesystem::path dir;
  nlohmann::json index;
};

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_text(const fs::path& p, std::string_view text) {
  std::ofstream f(p, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) throw ir::UserError("cannot write '" + p.string() + "'");
}

std::string read_text(const fs::path& p, const char* what) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw ir::UserError(fmt::format("cannot read {} '{}'", what, p.string()));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* plan_name(PlanKind kind) { return kind == PlanKind::Fused ? "fused" : "unfused"; }

// The name index.json gives a kernel's tensor: a graph input's or output's name, else the value's
// name in the graph (or vN).
std::string value_name(const ir::Graph& g, ir::NodeId id) {
  const ir::Node& n = g.node(id);
  if (n.op != ir::Op::Input)
    for (const ir::OutputDecl& o : g.outputs)
      if (o.node == id) return o.name;
  return n.name.empty() ? "v" + std::to_string(id) : n.name;
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
        e["tensor"] = value_name(g, grp.inputs[i]);
        e["index"] = a.index;
        break;
      case jit::ArgKind::OutputPtr:
      case jit::ArgKind::OutStride:
        e["tensor"] = value_name(g, grp.outputs[i]);
        e["index"] = a.index;
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

// What must match between a kernel in the folder and the one this fusejit generates: every
// parameter's kind, position and C type (names of values may differ).
std::string abi_text(const json& args) {
  std::string s;
  for (const json& a : args)
    s += fmt::format("{}:{}:{}:{};", a.at("kind").get<std::string>(), a.value("index", -1), a.value("dim", -1),
                     a.at("ctype").get<std::string>());
  return s;
}

// Writes DIR/<kernel>.cu (a complete translation unit: prelude + kernel) and, when there is one,
// DIR/<kernel>.<cubin|ptx>; returns the index entry.
json dump_kernel(const fs::path& dir, PlanKind kind, size_t group, const Program::Impl& p, const jit::GeneratedKernel& k,
                 const KernelInfo& info, const std::vector<char>* binary, const std::string& ext) {
  const ir::Graph& g = p.graph_of(kind);
  const ir::FusionGroup& grp = (kind == PlanKind::Fused ? p.fused.plan : p.unfused->plan).groups[group];
  jit::TranslationUnit tu = jit::emit_translation_unit(std::span<const jit::GeneratedKernel>(&k, 1));
  write_text(dir / (k.name + ".cu"), tu.source);
  json e = {{"plan", plan_name(kind)}, {"group", group}, {"kernel", k.name}, {"cu", k.name + ".cu"},
            {"elements", info.elements}, {"read_bytes", info.read_bytes}, {"write_bytes", info.write_bytes},
            {"ops", info.ops}, {"index64", k.index64}, {"vector_width", k.vector_width},
            {"split_reductions", k.split_reductions}, {"split_phases", k.split_phases},
            {"row_cache_sizes", k.row_cache_sizes},
            {"layout", jit::layout_fingerprint(k.signature.layout)}, {"cache", cache_outcome_name(info.cache)},
            {"entries", json::array({{{"name", k.name}, {"use", "canonical"}, {"args", args_json(k.signature, g, grp)}},
                                     {{"name", k.strided_name()}, {"use", "strided"},
                                      {"args", args_json(k.strided_signature, g, grp)}}})}};
  if (binary) {
    size_t n = binary->size();
    if (ext == "ptx" && n && (*binary)[n - 1] == '\0') --n;  // PTX text without its terminator
    write_text(dir / (k.name + "." + ext), std::string_view(binary->data(), n));
    e[ext] = k.name + "." + ext;
  }
  return e;
}

// The kernel files (.cu, .cubin, .ptx) the folder's index.json lists; empty without a readable
// fusejit index. Only plain file names count (an index cannot point outside its folder).
std::set<std::string> indexed_files(const fs::path& dir) {
  std::set<std::string> out;
  std::ifstream in(dir / "index.json");
  if (!in) return out;
  const json j = json::parse(in, nullptr, false);
  if (!j.is_object() || j.value("format", "") != "fusejit-aot" || !j.contains("kernels") || !j["kernels"].is_array())
    return out;
  for (const json& k : j["kernels"]) {
    if (!k.is_object()) continue;
    for (const char* key : {"cu", "cubin", "ptx"})
      if (k.contains(key) && k[key].is_string()) {
        const std::string name = k[key].get<std::string>();
        if (!name.empty() && fs::path(name).filename().string() == name && name != "." && name != "..") out.insert(name);
      }
  }
  return out;
}

void dump_path(const fs::path& dir, const Program::Impl& p, PlanKind kind, json& kernels) {
  const Program::Impl::Variant& v = *(kind == PlanKind::Fused ? p.fused : *p.unfused).variants[0];
  const std::string ext = p.backend == Backend::Cuda ? jit::to_string(p.gpu_target.kind) : "";
  for (size_t i = 0; i < v.kernels.size(); ++i) {
    const std::vector<char>* bin = p.backend == Backend::Cuda ? v.gpu.kernels[i].image.get() : nullptr;
    kernels.push_back(dump_kernel(dir, kind, i, p, v.kernels[i], v.infos[i], bin, ext));
  }
}

}  // namespace

void dump_program(const Program::Impl& p) {
  const fs::path dir(p.options.dump_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ir::UserError("cannot create dump folder '" + dir.string() + "': " + ec.message());
  const ir::Graph& g = p.graph.impl().graph;
  // The graph as given: its own text when it was parsed (so messages keep their lines), else the
  // printed form.
  const std::string text = p.graph.impl().source.empty() ? p.graph.to_text() : p.graph.impl().source;
  write_text(dir / "graph.txt", text);
  json dims = json::object();
  for (const auto& [name, value] : p.graph.dims()) dims[name] = value;
  const bool gpu = p.backend == Backend::Cuda;
  json index = {{"format", "fusejit-aot"}, {"format_version", kAotFormatVersion}, {"fusejit_version", version()},
                {"codegen_version", jit::kCodegenVersion}, {"graph", "graph.txt"}, {"graph_file", g.file},
                {"graph_name", g.name}, {"dims", dims}, {"target", gpu ? p.gpu_target.name() : "host"},
                {"output", gpu ? jit::to_string(p.gpu_target.kind) : "none"}, {"fast_math", p.options.fast_math},
                {"nvrtc_options", p.options.nvrtc_options}, {"nvrtc_version", gpu ? jit::nvrtc_version().str() : ""},
                {"kernels", json::array()}};
  const std::set<std::string> before = indexed_files(dir);
  dump_path(dir, p, PlanKind::Fused, index["kernels"]);
  dump_path(dir, p, PlanKind::Unfused, index["kernels"]);
  write_text(dir / "index.json", index.dump(2) + "\n");
  // The kernel files of an earlier dump into this folder that this one does not write again: gone,
  // so the folder holds one program (files fusejit did not write stay).
  const std::set<std::string> now = indexed_files(dir);
  for (const std::string& f : before)
    if (!now.count(f)) fs::remove(dir / f, ec);
}

namespace {

// The folder's index, checked for a format and code generator this fusejit reads.
std::shared_ptr<AotFolder> read_folder(const std::string& dir) {
  auto f = std::make_shared<AotFolder>();
  f->dir = dir;
  const std::string text = read_text(f->dir / "index.json", "ahead-of-time index");
  try {
    f->index = json::parse(text);
  } catch (const json::exception& e) {
    throw ir::UserError(fmt::format("'{}' is not valid JSON: {}", (f->dir / "index.json").string(), e.what()));
  }
  const json& x = f->index;
  if (!x.is_object() || x.value("format", "") != "fusejit-aot")
    throw ir::UserError(fmt::format("'{}' is not a fusejit ahead-of-time index (no \"format\": \"fusejit-aot\")",
                                    (f->dir / "index.json").string()));
  if (x.value("format_version", 0) != kAotFormatVersion)
    throw ir::UserError(fmt::format("'{}' has format_version {}; this fusejit reads {}: write it again with "
                                    "`fusejit compile`",
                                    dir, x.value("format_version", 0), kAotFormatVersion));
  if (x.value("codegen_version", "") != jit::kCodegenVersion)
    throw ir::UserError(fmt::format("'{}' was written by fusejit {} ({}); this one generates {}: write it again with "
                                    "`fusejit compile`",
                                    dir, x.value("fusejit_version", "?"), x.value("codegen_version", "?"),
                                    jit::kCodegenVersion));
  if (x.value("output", "") != "cubin" && x.value("output", "") != "ptx")
    throw ir::UserError(fmt::format("'{}' holds no GPU binaries (it was dumped from the CPU path)", dir));
  return f;
}

// The folder's kernels of one plan, by group.
std::vector<const json*> folder_kernels(const AotFolder& f, PlanKind kind) {
  std::vector<const json*> out;
  for (const json& k : f.index.at("kernels"))
    if (k.value("plan", "") == plan_name(kind)) {
      const size_t group = k.at("group").get<size_t>();
      if (out.size() <= group) out.resize(group + 1, nullptr);
      out[group] = &k;
    }
  return out;
}

}  // namespace

std::shared_ptr<const Program::Impl::Variant> variant_from_folder(const Program::Impl& p, const Program::Impl::Path& path,
                                                                  int v) {
  if (!p.aot || v != 0) return nullptr;
  const AotFolder& f = *p.aot;
  const std::vector<const json*> entries = folder_kernels(f, path.kind);
  if (entries.empty()) return nullptr;
  const ir::Graph& g = p.graph_of(path.kind);
  const jit::CodegenOptions cg = codegen_options(path.kind, p.options, 0);
  auto out = std::make_shared<Program::Impl::Variant>();
  out->gpu.target = p.gpu_target;
  std::map<std::string, std::shared_ptr<const std::vector<char>>> images;  // kernels of one program share one
  for (size_t i = 0; i < path.plan.groups.size(); ++i) {
    const ir::FusionGroup& grp = path.plan.groups[i];
    jit::GeneratedKernel k = jit::generate_kernel(g, grp, cg);
    const json* e = i < entries.size() ? entries[i] : nullptr;
    const bool same = e && e->at("entries").size() == 2 &&
                      abi_text(e->at("entries")[0].at("args")) == abi_text(args_json(k.signature, g, grp)) &&
                      abi_text(e->at("entries")[1].at("args")) == abi_text(args_json(k.strided_signature, g, grp));
    if (!same || entries.size() != path.plan.groups.size())
      throw ir::UserError(fmt::format("'{}': kernel {} of the {} plan does not match the kernel this fusejit makes for "
                                      "the graph (was the folder or graph.txt edited?): write it again with "
                                      "`fusejit compile`",
                                      f.dir.string(), i, plan_name(path.kind)));
    k.name = e->at("kernel").get<std::string>();
    const std::string file = e->at(jit::to_string(p.gpu_target.kind)).get<std::string>();
    auto& image = images[file];
    if (!image) {
      const std::string bytes = read_text(f.dir / file, "kernel binary");
      auto bin = std::make_shared<std::vector<char>>(bytes.begin(), bytes.end());
      if (p.gpu_target.kind == jit::OutputKind::Ptx) bin->push_back('\0');  // as NVRTC returns PTX
      image = bin;
    }
    KernelInfo info = kernel_info(g, grp, k, CacheOutcome::Loaded, 0.0, split_rules(p.options));
    info.source = read_text(f.dir / e->at("cu").get<std::string>(), "kernel source");
    out->infos.push_back(std::move(info));
    out->gpu.kernels.push_back({k, image, jit::CacheOutcome::DiskHit, 0.0});
    out->kernels.push_back(std::move(k));
  }
  return out;
}

Program Program::load(const std::string& dir, const Options& options) {
  return translate_errors([&] {
    std::shared_ptr<AotFolder> f = read_folder(dir);
    const json& x = f->index;
    const std::string text = read_text(f->dir / x.value("graph", "graph.txt"), "graph");
    const Graph graph = Graph::parse(text, x.value("graph_file", "graph.txt"));
    Options o = options;
    o.fast_math = x.value("fast_math", false);
    o.nvrtc_options = x.value("nvrtc_options", std::vector<std::string>{});
    o.arch = x.value("target", "");
    o.dump_dir.clear();
    std::shared_ptr<Impl> p = rewrite_and_plan(graph, o);
    p->loaded = true;
    p->aot = f;
    std::string why;
    p->device = open_device(options.device, &why);
    if (!p->device) throw jit::DriverError(jit::DriverErrorKind::NoDevice, "Program::load needs a GPU: " + why);
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
