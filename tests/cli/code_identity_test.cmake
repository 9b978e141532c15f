# cmake/hash_variants.cmake: editing one variant's source changes that variant's identity only;
# a shared file or the flags change every identity that covers them.
# Usage: cmake -DSCRIPT=<hash_variants.cmake> -DWORK=<dir> -P code_identity_test.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
file(WRITE "${WORK}/a.cc" "int a() { return 1; }\n")
file(WRITE "${WORK}/b.cc" "int b() { return 2; }\n")
file(WRITE "${WORK}/common.h" "// shared\n")
set(variants "va=${WORK}/a.cc,${WORK}/common.h|vb=${WORK}/b.cc,${WORK}/common.h")

function(identities out_var flags)
  execute_process(COMMAND ${CMAKE_COMMAND} -DOUT=${WORK}/ids.h "-DBUILD_FLAGS=${flags}"
                          "-DVARIANTS=${variants}" -P ${SCRIPT}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "hash_variants.cmake failed")
  endif()
  file(STRINGS "${WORK}/ids.h" lines REGEX "k_v[ab] = ")
  set(${out_var} "${lines}" PARENT_SCOPE)
endfunction()

function(expect_changed before after which)
  list(GET before ${which} x)
  list(GET after ${which} y)
  if(x STREQUAL y)
    message(FATAL_ERROR "identity ${which} should have changed: ${x}")
  endif()
endfunction()

function(expect_same before after which)
  list(GET before ${which} x)
  list(GET after ${which} y)
  if(NOT x STREQUAL y)
    message(FATAL_ERROR "identity ${which} should not have changed: ${x} -> ${y}")
  endif()
endfunction()

identities(base "-O3")
list(LENGTH base n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected two identities, got: ${base}")
endif()
identities(again "-O3")
expect_same("${base}" "${again}" 0)
expect_same("${base}" "${again}" 1)

file(WRITE "${WORK}/a.cc" "int a() { return 3; }\n")
identities(edited_a "-O3")
expect_changed("${base}" "${edited_a}" 0)
expect_same("${base}" "${edited_a}" 1)

file(WRITE "${WORK}/common.h" "// shared, edited\n")
identities(edited_common "-O3")
expect_changed("${edited_a}" "${edited_common}" 0)
expect_changed("${edited_a}" "${edited_common}" 1)

identities(new_flags "-O2")
expect_changed("${edited_common}" "${new_flags}" 0)
expect_changed("${edited_common}" "${new_flags}" 1)
message(STATUS "code identity checks passed")
