// CPU execution of generated kernels; see jit/cpu_runner.h.
#include "jit/cpu_runner.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>

namespace fusejit::jit {

void HostBuffer::Free::operator()(unsigned char* p) const { std::free(p); }

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  // Never a null pointer, even for 0 bytes: a kernel argument must be a valid address.
  const size_t alloc = bytes > SIZE_MAX - 128 ? 0 : ((bytes + 63) / 64 + 1) * 64;
  if (alloc) mem_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, alloc)));
  // Too little host memory for the tensors asked for is the caller's problem, not a fusejit bug.
  if (!mem_) throw ir::UserError(fmt::format("not enough host memory for a buffer of {} bytes ({:.1f} GiB)", bytes,
                                             static_cast<double>(bytes) / (1u << 30)));
  std::memset(mem_.get(), 0, alloc);
}

HostBuffer::HostBuffer(const void* data, size_t bytes) : HostBuffer(bytes) {
  if (bytes) std::memcpy(mem_.get(), data, bytes);
}

HostBuffer& HostBuffer::operator=(const HostBuffer& o) {
  if (this != &o) *this = HostBuffer(o);
  return *this;
}

CpuProgram prepare_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts) {
  CpuProgram p;
  p.graph = g;
  p.plan = plan;
  p.kernels = generate_plan_kernels(g, plan, opts);
  return p;
}

void compile_cpu_programs(std::span<CpuProgram* const> programs, const HostCompileOptions& opts) {
  std::vector<GeneratedKernel> all;
  for (CpuProgram* p : programs) all.insert(all.end(), p->kernels.begin(), p->kernels.end());
  if (all.empty()) return;
  HostCompileResult r = host_compile(all, opts);
  for (CpuProgram* p : programs) {
    p->module = r.module;
    p->compile = r;
    p->trampolines.clear();
    for (const GeneratedKernel& k : p->kernels) p->trampolines.push_back(r.module->trampoline(k.name));
  }
}

CpuProgram build_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts) {
  CpuProgram p = prepare_cpu_program(g, plan, opts);
  CpuProgram* ps[] = {&p};
  compile_cpu_programs(ps);
  return p;
}

namespace {
size_t byte_size(const ir::Node& n) {
  return static_cast<size_t>(ir::num_elements(n.shape)) * static_cast<size_t>(ir::dtype_size(n.dtype));
}
}  // namespace

CpuRunResult run_cpu_program(const CpuProgram& prog, std::span<const HostBuffer> inputs,
                             std::span<const ir::Scalar> params, const CpuRunOptions& opts) {
  const LaunchShape& launch = opts.launch;
  const ir::Graph& g = prog.graph;
  if (inputs.size() != g.inputs.size())
    throw ir::UserError(fmt::format("graph has {} inputs but {} were given", g.inputs.size(), inputs.size()));
  for (size_t s = 0; s < inputs.size(); ++s) {
    const ir::Node& n = g.node(g.inputs[s]);
    if (inputs[s].size() != byte_size(n))
      throw ir::UserError(fmt::format("input '{}' needs {} bytes ({} {}) but has {}", n.name, byte_size(n),
                                      ir::dtype_name(n.dtype), ir::shape_to_string(n.shape, &g), inputs[s].size()));
  }
  std::vector<ir::Scalar> param_values;
  if (params.empty()) {
    for (const ir::ParamDecl& d : g.params) param_values.push_back(d.default_value);
  } else {
    if (params.size() != g.params.size())
      throw ir::UserError(fmt::format("graph has {} params but {} values were given", g.params.size(), params.size()));
    param_values.assign(params.begin(), params.end());
  }
  FJ_CHECK(prog.trampolines.size() == prog.plan.groups.size(), "run_cpu_program: program is not compiled");

  // Misaligned copies of the inputs: element alignment kept, 16-byte alignment broken.
  std::vector<HostBuffer> shifted;
  if (opts.misalign_inputs)
    for (size_t s = 0; s < inputs.size(); ++s) {
      const size_t esz = static_cast<size_t>(ir::dtype_size(g.node(g.inputs[s]).dtype));
      shifted.emplace_back(inputs[s].size() + esz);
      if (inputs[s].size()) std::memcpy(shifted.back().data() + esz, inputs[s].data(), inputs[s].size());
    }
  // Allocate every written value first so the timed part is the launches alone.
  std::map<ir::NodeId, HostBuffer> written;
  for (const ir::FusionGroup& grp : prog.plan.groups)
    for (ir::NodeId o : grp.outputs)
      if (!written.count(o)) written.emplace(o, HostBuffer(byte_size(g.node(o))));
  // A graph input is always read from the caller's buffer (a copy group that writes an input
  // to an output buffer reads the original, not its own destination).
  auto read_addr = [&](ir::NodeId id) -> uint64_t {
    const ir::Node& n = g.node(id);
    if (n.op == ir::Op::Input) {
      const size_t s = static_cast<size_t>(n.slot);
      if (opts.misalign_inputs)
        return reinterpret_cast<uint64_t>(shifted[s].data() + ir::dtype_size(n.dtype));
      return reinterpret_cast<uint64_t>(inputs[s].data());
    }
    auto it = written.find(id);
    FJ_CHECK(it != written.end(), fmt::format("run_cpu_program: v{} is read before it is written", id));
    return reinterpret_cast<uint64_t>(it->second.data());
  };
  CpuRunResult r;
  std::vector<PackedArgs> packed;
  for (size_t gi = 0; gi < prog.plan.groups.size(); ++gi) {
    const ir::FusionGroup& grp = prog.plan.groups[gi];
    std::vector<uint64_t> in_addrs, out_addrs;
    for (ir::NodeId id : grp.inputs) in_addrs.push_back(read_addr(id));
    for (ir::NodeId id : grp.outputs) out_addrs.push_back(reinterpret_cast<uint64_t>(written.at(id).data()));
    packed.push_back(pack_args(prog.kernels[gi].signature, g, grp, in_addrs, out_addrs, param_values, launch));
    if (!opts.vector_path) {
      const auto& args = prog.kernels[gi].signature.args;
      for (size_t a = 0; a < args.size(); ++a)
        if (args[a].kind == ArgKind::VecFlag) *static_cast<int32_t*>(packed.back().params()[a]) = 0;
    } else {
      r.vector_launches += packed.back().vectorized();
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  for (size_t gi = 0; gi < prog.plan.groups.size(); ++gi)
    prog.trampolines[gi](packed[gi].params(), launch.grid, launch.block);
  r.run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.kernels_launched = static_cast<int>(prog.plan.groups.size());

  for (const ir::OutputDecl& o : g.outputs) {
    if (auto it = written.find(o.node); it != written.end()) {
      r.outputs.push_back(it->second);
      continue;
    }
    const ir::Node& n = g.node(o.node);
    FJ_CHECK(n.op == ir::Op::Input, fmt::format("run_cpu_program: output '{}' is never written by the plan", o.name));
    r.outputs.push_back(inputs[static_cast<size_t>(n.slot)]);
  }
  return r;
}

}  // namespace fusejit::jit

namespace fusejit::jit {

CpuTensorRunResult run_cpu_program(const CpuProgram& prog, std::span<const ir::Tensor> inputs,
                                   std::span<const ir::Scalar> params, const CpuRunOptions& opts) {
  const ir::Graph& g = prog.graph;
  if (inputs.size() != g.inputs.size())
    throw ir::UserError(fmt::format("graph has {} inputs but {} were given", g.inputs.size(), inputs.size()));
  std::vector<HostBuffer> bufs;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const ir::Node& n = g.node(g.inputs[s]);
    const std::vector<int64_t> want = ir::shape_sizes(n.shape);
    if (inputs[s].dtype != n.dtype || inputs[s].shape != want)
      throw ir::UserError(fmt::format("input '{}': expected {}, found {}", n.name, ir::tensor_type_string(n.dtype, want),
                                      ir::tensor_type_string(inputs[s].dtype, inputs[s].shape)));
    bufs.emplace_back(inputs[s].data.data(), inputs[s].data.size());
  }
  CpuRunResult r = run_cpu_program(prog, bufs, params, opts);
  CpuTensorRunResult t;
  t.run_ms = r.run_ms;
  t.kernels_launched = r.kernels_launched;
  t.vector_launches = r.vector_launches;
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const ir::Node& n = g.node(g.outputs[o].node);
    ir::Tensor out(n.dtype, ir::shape_sizes(n.shape));
    FJ_CHECK(out.data.size() == r.outputs[o].size(), "run_cpu_program: output size mismatch");
    if (!out.data.empty()) std::memcpy(out.data.data(), r.outputs[o].data(), out.data.size());
    t.outputs.push_back(std::move(out));
  }
  return t;
}

}  // namespace fusejit::jit
