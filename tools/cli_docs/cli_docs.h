// Shell completion scripts and a man page generated from a tool's CLI11 definitions (its
// subcommands, options, value choices, help texts and footers), so they never drift from the
// real command line. Each tool answers `TOOL __complete bash|zsh` and `TOOL __man` before it
// parses anything (hidden: not in --help); tools/kpc/CMakeLists.txt runs them at build time
// and `cmake --install` installs the results (docs/cli.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kpc::cli_docs {

/// A bash completion script defining _NAME and `complete -F _NAME NAME`: subcommands, each
/// subcommand's options, the choices of options restricted to a set (IsMember), files elsewhere.
std::string bash_completion(const CLI::App& app, const std::string& name);
/// A zsh completion function (#compdef NAME) in _arguments form, with option descriptions.
std::string zsh_completion(const CLI::App& app, const std::string& name);
/// A man page (roff, section 1): NAME, SYNOPSIS, DESCRIPTION, one subsection per subcommand
/// with its options, examples and exit codes (the --help footers), OPTIONS of the tool itself.
std::string man_page(const CLI::App& app, const std::string& name, const std::string& version);

/// When argv asks for one of the above (`__complete bash|zsh`, `__man`), prints it to stdout
/// and returns true with *exit_code set; else false (parse as usual).
bool handle(const CLI::App& app, const std::string& name, const std::string& version, int argc, char** argv,
            int* exit_code);

}  // namespace kpc::cli_docs
