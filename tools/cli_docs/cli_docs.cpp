#include "tools/cli_docs/cli_docs.h"

#include <cstdio>
#include <vector>

namespace kpc::cli_docs {

namespace {

// The options completion and the man page show: every named, visible option (group "" hides).
std::vector<const CLI::Option*> named_options(const CLI::App& app) {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* o : app.get_options())
    if (o->nonpositional() && !o->get_group().empty()) out.push_back(o);
  return out;
}

std::vector<const CLI::Option*> positionals(const CLI::App& app) {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* o : app.get_options())
    if (!o->nonpositional()) out.push_back(o);
  return out;
}

std::vector<const CLI::App*> visible_commands(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* s : app.get_subcommands({}))
    if (!s->get_group().empty() && !s->get_name().starts_with("__")) out.push_back(s);
  return out;
}

std::vector<std::string> names_of(const CLI::Option* o) {
  std::vector<std::string> n;
  for (const auto& s : o->get_snames()) n.push_back("-" + s);
  for (const auto& l : o->get_lnames()) n.push_back("--" + l);
  return n;
}

bool takes_value(const CLI::Option* o) { return o->get_expected_max() > 0; }  // flags expect 0 values

// The values of an option restricted by CLI::IsMember: CLI11 describes that validator as
// "{a,b,c}" in the option's type name ("TEXT:{a,b,c}").
std::vector<std::string> choices(const CLI::Option* o) {
  std::string t = o->get_type_name();
  size_t open = t.find('{'), close = t.rfind('}');
  std::vector<std::string> out;
  if (open == std::string::npos || close == std::string::npos || close < open) return out;
  std::string cur;
  for (size_t i = open + 1; i < close; ++i) {
    if (t[i] == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (t[i] != ' ') {
      cur += t[i];
    }
  }
  out.push_back(cur);
  return out;
}

// The value's placeholder: the type name without validators ("TEXT", "SIZE", "DIR").
std::string placeholder(const CLI::Option* o) {
  std::string t = o->get_type_name();
  size_t colon = t.find(':');
  // "UINT:SIZE": the validator's name says more than the C++ type.
  if (colon != std::string::npos && t.find('{', colon) == std::string::npos) return t.substr(colon + 1);
  return t.substr(0, colon);
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// ---------------------------------------------------------------- bash

std::string bash_options_case(const CLI::App& cmd, const std::string& indent) {
  std::string s = indent + "case \"$prev\" in\n";
  bool any = false;
  for (const CLI::Option* o : named_options(cmd)) {
    if (!takes_value(o)) continue;
    auto c = choices(o);
    any = true;
    s += indent + "  " + join(names_of(o), "|") + ")\n";
    s += indent + "    " +
         (c.empty() ? "COMPREPLY=($(compgen -f -- \"$cur\"))" : "COMPREPLY=($(compgen -W \"" + join(c, " ") + "\" -- \"$cur\"))") +
         "\n" + indent + "    return ;;\n";
  }
  s += indent + "esac\n";
  return any ? s : "";
}

std::string option_words(const CLI::App& cmd) {
  std::vector<std::string> w;
  for (const CLI::Option* o : named_options(cmd))
    for (const auto& n : names_of(o)) w.push_back(n);
  return join(w, " ");
}

// ---------------------------------------------------------------- zsh

// A description inside _arguments' [...] or _describe's "name:desc": no brackets, colons,
// quotes or backslashes, one line, short.
std::string zsh_desc(const std::string& d) {
  std::string s;
  for (char c : d) {
    if (c == '\n') break;
    if (c == '[' || c == ']') s += c == '[' ? '(' : ')';
    else if (c == ':') s += " -";
    else if (c == '\'' || c == '\\' || c == '`' || c == '$') continue;
    else s += c;
  }
  if (s.size() > 90) s = s.substr(0, 87) + "...";
  return s;
}

std::string zsh_specs(const CLI::App& cmd, const std::string& indent) {
  std::string s;
  for (const CLI::Option* o : named_options(cmd)) {
    std::string desc = "[" + zsh_desc(o->get_description()) + "]";
    std::string value;
    if (takes_value(o)) {
      auto c = choices(o);
      value = ":" + zsh_desc(placeholder(o)) + ":" + (c.empty() ? "_files" : "(" + join(c, " ") + ")");
    }
    bool repeat = o->get_items_expected_max() > 1;
    for (const auto& n : names_of(o)) s += indent + "'" + (repeat ? "*" : "") + n + desc + value + "' \\\n";
  }
  if (!positionals(cmd).empty()) s += indent + "'*:file:_files' \\\n";
  return s;
}

// ---------------------------------------------------------------- man

// Text as roff: backslashes escaped, a line starting with '.' or '\'' protected.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
    line_start = c == '\n';
  }
  return out;
}

std::string man_options(const CLI::App& cmd) {
  std::string s;
  for (const CLI::Option* o : positionals(cmd))
    s += ".TP\n\\fI" + roff(o->get_name(true)) + "\\fR\n" + roff(o->get_description()) + "\n";
  for (const CLI::Option* o : named_options(cmd)) {
    std::vector<std::string> n;
    for (const auto& x : names_of(o)) n.push_back("\\fB" + roff(x) + "\\fR");
    s += ".TP\n" + join(n, ", ");
    if (takes_value(o)) {
      auto c = choices(o);
      s += " \\fI" + roff(c.empty() ? placeholder(o) : join(c, "|")) + "\\fR";
    }
    s += "\n" + roff(o->get_description());
    if (!o->get_default_str().empty()) s += " (default: " + roff(o->get_default_str()) + ")";
    s += "\n";
  }
  return s;
}

std::string man_footer(const CLI::App& cmd) {
  std::string f = cmd.get_footer();
  if (f.empty()) return "";
  return ".PP\n.nf\n" + roff(f) + (f.back() == '\n' ? "" : "\n") + ".fi\n";
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string bash_completion(const CLI::App& app, const std::string& name) {
  std::string fn = "_" + name;
  for (auto& c : fn)
    if (c == '-') c = '_';
  auto cmds = visible_commands(app);
  std::string s = "# bash completion for " + name + " (generated by `" + name +
                  " __complete bash` from its CLI definitions; do not edit)\n";
  s += fn + "() {\n";
  s += "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\" cmd=\"\" i\n";
  s += "  ((COMP_CWORD > 0)) && prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n";
  s += "  COMPREPLY=()\n";
  if (cmds.empty()) {
    s += bash_options_case(app, "  ");
    s += "  if [[ $cur == -* ]]; then\n";
    s += "    COMPREPLY=($(compgen -W \"" + option_words(app) + "\" -- \"$cur\"))\n";
    s += "  else\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n";
  } else {
    std::vector<std::string> names;
    for (const auto* c : cmds) names.push_back(c->get_name());
    // The subcommand is the first word that is not an option (the tool itself has no option taking a value).
    s += "  for ((i = 1; i < COMP_CWORD; i++)); do\n";
    s += "    case \"${COMP_WORDS[i]}\" in -*) ;; *) cmd=\"${COMP_WORDS[i]}\"; break ;; esac\n";
    s += "  done\n";
    s += "  if [[ -z $cmd ]]; then\n";
    s += "    COMPREPLY=($(compgen -W \"" + join(names, " ") + " " + option_words(app) + "\" -- \"$cur\"))\n";
    s += "    return\n  fi\n";
    s += "  local opts=\"\"\n";
    s += "  case \"$cmd\" in\n";
    for (const auto* c : cmds) {
      s += "    " + c->get_name() + ")\n";
      auto subs = visible_commands(*c);
      if (subs.empty()) {
        s += bash_options_case(*c, "      ");
        s += "      opts=\"" + option_words(*c) + "\" ;;\n";
        continue;
      }
      // A command group (`kpc ipvs drain-plan`): its command is the next word that is not an option.
      std::vector<std::string> sub_names;
      for (const auto* sc : subs) sub_names.push_back(sc->get_name());
      s += "      local sub=\"\" j\n";
      s += "      for ((j = i + 1; j < COMP_CWORD; j++)); do\n";
      s += "        case \"${COMP_WORDS[j]}\" in -*) ;; *) sub=\"${COMP_WORDS[j]}\"; break ;; esac\n";
      s += "      done\n";
      s += "      if [[ -z $sub ]]; then\n";
      s += "        COMPREPLY=($(compgen -W \"" + join(sub_names, " ") + " " + option_words(*c) + "\" -- \"$cur\"))\n";
      s += "        return\n      fi\n";
      s += "      case \"$sub\" in\n";
      for (const auto* sc : subs) {
        s += "        " + sc->get_name() + ")\n";
        s += bash_options_case(*sc, "          ");
        s += "          opts=\"" + option_words(*sc) + "\" ;;\n";
      }
      s += "        *) return ;;\n      esac ;;\n";
    }
    s += "    *) return ;;\n  esac\n";
    s += "  if [[ $cur == -* ]]; then\n";
    s += "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n";
    s += "  else\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n";
  }
  s += "complete -o filenames -F " + fn + " " + name + "\n";
  return s;
}

std::string zsh_completion(const CLI::App& app, const std::string& name) {
  std::string fn = "_" + name;
  for (auto& c : fn)
    if (c == '-') c = '_';
  auto cmds = visible_commands(app);
  std::string s = "#compdef " + name + "\n# zsh completion for " + name + " (generated by `" + name +
                  " __complete zsh` from its CLI definitions; do not edit)\n";
  s += fn + "() {\n";
  if (cmds.empty()) {
    s += "  _arguments -s \\\n" + zsh_specs(app, "    ") + "    && return 0\n}\n";
  } else {
    s += "  local curcontext=\"$curcontext\" state line\n  typeset -A opt_args\n";
    s += "  _arguments -C \\\n" + zsh_specs(app, "    ") + "    '1: :->command' \\\n    '*:: :->args' && return 0\n";
    s += "  case $state in\n    command)\n      local -a commands\n      commands=(\n";
    for (const auto* c : cmds) s += "        '" + c->get_name() + ":" + zsh_desc(c->get_description()) + "'\n";
    s += "      )\n      _describe -t commands 'command' commands ;;\n";
    s += "    args)\n      case $line[1] in\n";
    for (const auto* c : cmds) {
      auto subs = visible_commands(*c);
      if (subs.empty()) {
        s += "        " + c->get_name() + ")\n          _arguments -s \\\n" + zsh_specs(*c, "            ") + "            ;;\n";
        continue;
      }
      // A command group: its commands at the first position after it, then their options.
      s += "        " + c->get_name() + ")\n";
      s += "          if (( CURRENT == 2 )); then\n            local -a subcommands\n            subcommands=(\n";
      for (const auto* sc : subs) s += "              '" + sc->get_name() + ":" + zsh_desc(sc->get_description()) + "'\n";
      s += "            )\n            _describe -t commands '" + c->get_name() + " command' subcommands\n";
      s += "          else\n            shift words\n            (( CURRENT-- ))\n            case $words[1] in\n";
      for (const auto* sc : subs)
        s += "              " + sc->get_name() + ")\n                _arguments -s \\\n" + zsh_specs(*sc, "                  ") +
             "                  ;;\n";
      s += "            esac\n          fi ;;\n";
    }
    s += "      esac ;;\n  esac\n}\n";
  }
  s += "\n" + fn + " \"$@\"\n";
  return s;
}

std::string man_page(const CLI::App& app, const std::string& name, const std::string& version) {
  auto cmds = visible_commands(app);
  std::string desc = app.get_description();
  std::string first = desc.substr(0, desc.find('\n'));
  if (first.starts_with(name + ": ")) first = first.substr(name.size() + 2);
  std::string s = ".\\\" Generated by `" + name + " __man` from its CLI definitions; do not edit.\n";
  s += ".TH " + upper(name) + " 1 \"\" \"" + roff(version) + "\" \"User Commands\"\n";
  s += ".SH NAME\n" + roff(name) + " \\- " + roff(first) + "\n";
  s += ".SH SYNOPSIS\n.B " + roff(name) + "\n";
  s += cmds.empty() ? "[\\fIOPTIONS\\fR]\n" : "\\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]\n";
  s += ".SH DESCRIPTION\n" + roff(desc.starts_with(name + ": ") ? desc.substr(name.size() + 2) : desc) + "\n";
  if (!cmds.empty()) {
    s += ".SH COMMANDS\n";
    for (const auto* c : cmds) {
      s += ".SS \"" + roff(name + " " + c->get_name()) + "\"\n" + roff(c->get_description()) + "\n";
      s += man_options(*c) + man_footer(*c);
      for (const auto* sub : visible_commands(*c)) {  // a command group's commands (`kpc ipvs drain-plan`)
        s += ".SS \"" + roff(name + " " + c->get_name() + " " + sub->get_name()) + "\"\n" +
             roff(sub->get_description()) + "\n";
        s += man_options(*sub) + man_footer(*sub);
      }
    }
  }
  s += ".SH OPTIONS\n" + man_options(app) + man_footer(app);
  return s;
}

bool handle(const CLI::App& app, const std::string& name, const std::string& version, int argc, char** argv,
            int* exit_code) {
  if (argc < 2) return false;
  std::string a = argv[1];
  if (a != "__complete" && a != "__man") return false;
  // `__complete bash|zsh [FILE]`, `__man [FILE]`: the build writes FILE (no shell redirection).
  int shell_args = a == "__complete" ? 1 : 0;
  std::string shell = shell_args && argc > 2 ? argv[2] : "";
  std::string out;
  if (a == "__man" && argc <= 3) out = man_page(app, name, version);
  else if (shell == "bash" && argc <= 4) out = bash_completion(app, name);
  else if (shell == "zsh" && argc <= 4) out = zsh_completion(app, name);
  if (out.empty()) {
    std::fprintf(stderr, "%s: usage: %s __complete bash|zsh [FILE], or %s __man [FILE]\n", name.c_str(),
                 name.c_str(), name.c_str());
    *exit_code = 2;
    return true;
  }
  int file_arg = 2 + shell_args;
  FILE* f = argc > file_arg ? std::fopen(argv[file_arg], "w") : stdout;
  bool ok = f && std::fputs(out.c_str(), f) >= 0;
  ok = f && (f == stdout ? std::fflush(f) == 0 : std::fclose(f) == 0) && ok;
  if (!ok) std::fprintf(stderr, "%s: cannot write %s\n", name.c_str(), argc > file_arg ? argv[file_arg] : "stdout");
  *exit_code = ok ? 0 : 2;
  return true;
}

}  // namespace kpc::cli_docs
