// Ahead-of-time folders: what `fusejit compile GRAPH --arch sm_XY -o DIR` and Options::dump_dir
// write (the graph, each kernel's source and binary, index.json), and what Program::load reads.
// The format is stable and versioned: docs/aot.md.
#pragma once

#include <memory>

#include "lib/program_impl.h"

namespace fusejit {

// index.json's "format_version": bumped whenever a reader of version N could misread the folder.
inline constexpr int kAotFormatVersion = 1;

// Writes every built kernel of both plans of `p` (variant 0), the graph and index.json into
// p.options.dump_dir. Throws ir::UserError when the folder cannot be written.
void dump_program(const Program::Impl& p);

// Variant `v` of `path` from the folder of a program made by Program::load: its kernels as code
// generation makes them, with the folder's binaries and names (checked against index.json's
// argument lists). nullptr when the folder does not hold it (variant 1, or a path of a plan made
// for other dims): it is then compiled.
std::shared_ptr<const Program::Impl::Variant> variant_from_folder(const Program::Impl& p, const Program::Impl::Path& path,
                                                                  int v);

}  // namespace fusejit
