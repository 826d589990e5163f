# Writes OUT: a C++ file defining fusejit::jit::kScalarPrelude with the text of IN.
file(READ ${IN} content)
set(delim "FJ_PRELUDE_")
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\nnamespace fusejit::jit {\nextern const char* const kScalarPrelude;\nconst char* const kScalarPrelude = R\"${delim}(${content})${delim}\";\n}\n")
