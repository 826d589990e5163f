// How messages name options, and param values from Params.
#include <algorithm>

#include <fmt/format.h>

#include "ir/error.h"
#include "lib/internal.h"

namespace fusejit {

namespace {
// The Python package's keyword for an option (python/fusejit/__init__.py).
std::string python_option_name(OptionField field) {
  switch (field) {
    case OptionField::Arch: return "arch";
    case OptionField::NvrtcOptions: return "nvrtc_options";
    case OptionField::Params: return "params";
    case OptionField::InputFiles: return "input_files";
    case OptionField::InputRanges: return "input_ranges";
    case OptionField::SaveDir: return "save_dir";
    case OptionField::Dims: return "dims";
    case OptionField::RowSplit: return "row_split";
  }
  return "an option";
}
}  // namespace

std::string option_name(OptionField field, MessageStyle style) {
  if (style == MessageStyle::Python) return python_option_name(field);
  const bool cli = style == MessageStyle::CommandLine;
  switch (field) {
    case OptionField::Arch: return cli ? "--arch" : "Options::arch";
    case OptionField::NvrtcOptions: return cli ? "--nvrtc-option" : "Options::nvrtc_options";
    case OptionField::Params: return cli ? "--param" : "params";
    case OptionField::InputFiles: return cli ? "--input" : "RunOptions::input_files";
    case OptionField::InputRanges: return cli ? "--range" : "RunOptions::input_ranges";
    case OptionField::SaveDir: return cli ? "--save-dir" : "RunOptions::save_dir";
    case OptionField::Dims: return cli ? "--dim" : "the dims argument";
    case OptionField::RowSplit: return cli ? "--row-split" : "Options::row_split";
  }
  return "an option";
}

void check_row_split(const Options& o) {
  if (o.row_split < 0)
    throw ir::UserError(option_name(OptionField::RowSplit, o.message_style) + " " + std::to_string(o.row_split) +
                        ": must be >= 0 (0: the launcher's rule, 1: never split)");
}

void resolve_params_into(const ir::Graph& g, const Params& params, MessageStyle style, std::vector<ir::Scalar>& out) {
  out.clear();
  for (const ir::ParamDecl& p : g.params) out.push_back(p.default_value);
  if (!params.positional().empty() && !params.named().empty())
    throw ir::UserError(option_name(OptionField::Params, style) + ": give param values by name or by position, not both");
  const std::vector<Scalar>& pos = params.positional();
  if (!pos.empty() && pos.size() != g.params.size())
    throw ir::UserError(fmt::format("{}: the graph has {} param(s), got {} positional value(s)",
                                    option_name(OptionField::Params, style), g.params.size(), pos.size()));
  for (size_t k = 0; k < pos.size(); ++k) out[k] = to_ir_scalar(pos[k], g.node(g.params[k].node).dtype);
  for (const auto& entry : params.named()) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& name = entry.first;
    const auto& value = entry.second;
    auto it = std::find_if(g.params.begin(), g.params.end(), [&](const ir::ParamDecl& p) { return g.node(p.node).name == name; });
    if (it == g.params.end()) {
      std::string names;
      for (const ir::ParamDecl& p : g.params) names += (names.empty() ? "" : ", ") + g.node(p.node).name;
      throw ir::UserError(fmt::format("{} {}: the graph has no param named '{}' ({})", option_name(OptionField::Params, style),
                                      name, name, names.empty() ? "it has no params" : "its params: " + names));
    }
    out[static_cast<size_t>(it - g.params.begin())] = to_ir_scalar(value, g.node(it->node).dtype);
  }
}

std::vector<ir::Scalar> resolve_params(const ir::Graph& g, const Params& params, MessageStyle style) {
  std::vector<ir::Scalar> out;
  resolve_params_into(g, params, style, out);
  return out;
}

}  // namespace fusejit
