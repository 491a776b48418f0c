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

# kpc_use_fast_allocator(TARGET): an executable gets mimalloc (KPC_MIMALLOC). The shared
# library is linked before libc, so its malloc/free (and so operator new/delete) are the
# process's; KPC_WITH_MIMALLOC lets the program name its allocator (kpc --version) and
# references mi_version(), which keeps the library linked even under --as-needed.
function(kpc_use_fast_allocator target)
  if(KPC_WITH_MIMALLOC)
    target_link_libraries(${target} PRIVATE mimalloc)
    target_compile_definitions(${target} PRIVATE KPC_WITH_MIMALLOC=1)
  endif()
endfunction()
