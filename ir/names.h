// The graph format's rules for names (docs/graph-format.md), in one place: the lexer, the parser,
// the printer and the public GraphBuilder all use these, so every graph the builder accepts prints
// as text the parser reads back, and both reject a bad name with the same message.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ir/error.h"

namespace fusejit::ir {

// A name is [A-Za-z_][A-Za-z0-9_]* (ASCII only; the lexer's identifier token).
inline bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_identifier(std::string_view s);

// `name` as part of a C identifier or a file name: each byte outside [A-Za-z0-9_] as '_', cut to 32
// bytes, "graph" for an empty one (the graph's part of a kernel name, fj_<this>_<hash>, and of a
// FUSEJIT_DUMP_DIR folder, <this>-<hash>).
std::string identifier_part(std::string_view name);

// `s` in single quotes for a message: cut after 40 characters ("...'"), control bytes as \xNN (a
// NUL would end the message where C strings carry it).
std::string quoted(std::string_view s);

// Words of the format that cannot name a dim, input, param or value: graph, dim, input, param,
// output, true, false, inf, nan, cast. (A graph's own name may be one: `graph cast` parses.)
bool is_reserved(std::string_view s);
std::span<const std::string_view> reserved_words();

// What a name is bound to. Dims, inputs, params and values share one namespace, and a name is
// bound once.
enum class NameKind : uint8_t { Value, Dim, Input, Param };
// "a value", "a dim", "an input", "a param" (for messages).
std::string_view name_kind_word(NameKind k);

struct NameBinding {
  NameKind kind = NameKind::Value;
  uint32_t line = 0;  // where it was bound in graph text; 0 when built through the API
};

// Throws UserError at `loc` unless `name` may be bound to a new dim, input, param or value: it
// must be an identifier, not reserved, and not bound already (`prior` is its binding, or null).
// `is_temp`: a printed temporary (`%12`), which the parser accepts where an identifier would go.
void check_new_name(std::string_view name, const NameBinding* prior, Loc loc, bool is_temp = false);

// Throws UserError unless `name` is "" or an identifier: the name of `graph NAME`.
void check_graph_name(std::string_view name);

// "; did you mean 'x'?" for the candidates closest to `word` (Levenshtein distance, an adjacent
// swap counting 1; at most 1 edit up to 5 letters, 2 beyond, none for 1-2 letter words): every one
// at the fewest edits, same length first, at most three ("'elu' or 'silu'"); "" when nothing is
// close.
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

// "unknown op 'NAME'" plus did_you_mean over every op callable by name (and cast).
std::string unknown_op_message(std::string_view name);

// "unknown dtype 'NAME'" and how fusejit writes NumPy's or PyTorch's name for it ("bfloat16":
// bf16), else did_you_mean over the dtype names, else the list of them.
std::string unknown_dtype_message(std::string_view name);

}  // namespace fusejit::ir
