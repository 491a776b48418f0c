# kpc_add_library(NAME SOURCES... [DEPS ...]): one static library per module,
# aliased kpc::<name>, with the repository root on the include path so that
# includes read "compiler/model/snapshot.h".
function(kpc_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(kpc_${name} STATIC ${ARG_SOURCES})
  add_library(kpc::${name} ALIAS kpc_${name})
  target_include_directories(kpc_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(kpc_${name} PUBLIC ${ARG_DEPS})
endfunction()
