# Embeds a text file into a C++ header as a raw string literal: IN (file), OUT (header),
# NAME (identifier), NAMESPACE.
file(READ "${IN}" content)
if(content MATCHES "\\)mlatune_embed\"")
  message(FATAL_ERROR "${IN} contains the raw-string delimiter")
endif()
set(body "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n#pragma once\n\n#include <string_view>\n\nnamespace ${NAMESPACE} {\ninline constexpr std::string_view ${NAME} = R\"mlatune_embed(${content})mlatune_embed\";\n}\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL body)
  file(WRITE "${OUT}" "${body}")
endif()
