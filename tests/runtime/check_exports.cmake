# Fails unless the defined dynamic symbols of LIB are exactly the MLATUNE_API functions declared
# in HEADER: hidden visibility and --exclude-libs must keep every C++ and static-library symbol
# (ours, SQLite's helpers, the kernels) out of a library that serving stacks link.
# Inputs: LIB, NM, HEADER.
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE nm_out
                RESULT_VARIABLE rc ERROR_VARIABLE nm_err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIB}: ${nm_err}")
endif()
string(REPLACE "\n" ";" lines "${nm_out}")
set(exported "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ ]+)$")
    list(APPEND exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(SORT exported)

file(READ "${HEADER}" header)
string(REGEX MATCHALL "MLATUNE_API[^;(]*[ *](mlatune_[a-z0-9_]+)\\(" decls "${header}")
set(declared "")
foreach(d IN LISTS decls)
  string(REGEX REPLACE ".*[ *](mlatune_[a-z0-9_]+)\\($" "\\1" name "${d}")
  list(APPEND declared "${name}")
endforeach()
list(SORT declared)

list(LENGTH declared n_declared)
if(n_declared LESS 8)
  message(FATAL_ERROR "parsed only ${n_declared} declarations from ${HEADER}: ${declared}")
endif()
if(NOT exported STREQUAL declared)
  set(extra ${exported})
  list(REMOVE_ITEM extra ${declared})
  set(missing ${declared})
  list(REMOVE_ITEM missing ${exported})
  message(FATAL_ERROR "exported symbols of ${LIB} differ from ${HEADER}\n"
                      "  exported but not declared: ${extra}\n"
                      "  declared but not exported: ${missing}")
endif()
message(STATUS "${LIB} exports exactly: ${exported}")
