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

# kpc_use_fast_allocator(TARGET [NAMES_IT]): an executable gets mimalloc (KPC_MIMALLOC). The
# shared library is linked before libc, so its malloc/free (and so operator new/delete) are the
# process's. NAMES_IT also defines KPC_WITH_MIMALLOC for the target, so that it can name its
# allocator (`--version`, compiler/support/allocator.h: it also checks that malloc is mimalloc's).
# (Not for the test programs: a definition would recompile every test. Even under --as-needed
# the library stays: it is the first to define malloc, which every program references.)
function(kpc_use_fast_allocator target)
  if(KPC_WITH_MIMALLOC)
    target_link_libraries(${target} PRIVATE mimalloc)
    if("NAMES_IT" IN_LIST ARGN)
      target_compile_definitions(${target} PRIVATE KPC_WITH_MIMALLOC=1)
    endif()
  endif()
endfunction()
