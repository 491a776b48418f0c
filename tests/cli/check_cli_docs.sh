#!/bin/bash
# The completion scripts and man pages generated from the CLI definitions (tools/cli_docs):
#   check_cli_docs.sh BUILD_DIR SOURCE_DIR
# 1. the build wrote them into BUILD_DIR/share (bash, zsh, man) for kpc and kpc-applier, and they
#    are what the binaries generate now;
# 2. bash completion proposes the subcommands, a subcommand's flags, and an option's values;
# 3. the zsh function parses (zsh -n, when zsh is installed) and names every subcommand;
# 4. the man page renders without warnings (groff, when installed; else its structure is checked)
#    and documents every subcommand and option;
# 5. `cmake --install BUILD_DIR --prefix TMP` installs both binaries and the six files.
set -u
build=$1
src=$2
share=$build/share
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for tool in kpc kpc-applier; do
  for f in "bash-completion/completions/$tool" "zsh/site-functions/_$tool" "man/man1/$tool.1"; do
    [[ -s $share/$f ]] || bad "$share/$f missing or empty (the build generates it)"
  done
  cmp -s <("$build/bin/$tool" __complete bash) "$share/bash-completion/completions/$tool" ||
    bad "$tool: the installed bash completion is not what '$tool __complete bash' prints"
  cmp -s <("$build/bin/$tool" __man) "$share/man/man1/$tool.1" || bad "$tool: the man page is stale"
done
"$build/bin/kpc" __complete fish >/dev/null 2>&1 && bad "kpc __complete fish: accepted"

# bash: what COMPREPLY holds for a command line (the words, the cursor on the last).
complete_words() {
  local script=$1; shift
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
           fn=$(complete -p "$1" | sed -E "s/.* -F ([^ ]+) .*/\1/"); "$fn" "$1"; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$script" "$@"
}
kb=$share/bash-completion/completions/kpc
has() { grep -qx -- "$2" <<<"$1" || bad "completion of '$3' lacks '$2' (got: $(tr '\n' ' ' <<<"$1"))"; }
lacks() { ! grep -qx -- "$2" <<<"$1" || bad "completion of '$3' offers '$2'"; }
out=$(complete_words "$kb" kpc "")
for c in validate compile verify diff drift golden simulate trace; do has "$out" "$c" "kpc <TAB>"; done
lacks "$out" "__complete" "kpc <TAB>"
out=$(complete_words "$kb" kpc co)
has "$out" compile "kpc co<TAB>"
out=$(complete_words "$kb" kpc compile cluster/ --)
for o in --backend --format --prior --prior-state --stats --output --max-input-size --node; do has "$out" "$o" "kpc compile --<TAB>"; done
lacks "$out" "--expect" "kpc compile --<TAB>"
out=$(complete_words "$kb" kpc golden x --)
has "$out" --expect "kpc golden --<TAB>"
has "$out" --update "kpc golden --<TAB>"
out=$(complete_words "$kb" kpc ipvs "")
has "$out" drain-plan "kpc ipvs <TAB>"
out=$(complete_words "$kb" kpc ipvs drain-plan cluster/ --)
for o in --prior-state --format; do has "$out" "$o" "kpc ipvs drain-plan --<TAB>"; done
lacks "$out" "--expect" "kpc ipvs drain-plan --<TAB>"
out=$(complete_words "$kb" kpc compile --backend "")
for v in iptables ip6tables nftables fastpath; do has "$out" "$v" "kpc compile --backend <TAB>"; done
out=$(complete_words "$kb" kpc diff a b --format "")
for v in text json markdown; do has "$out" "$v" "kpc diff --format <TAB>"; done
out=$(complete_words "$share/bash-completion/completions/kpc-applier" kpc-applier --)
for o in --watch --node --state-dir --once --cleanup; do has "$out" "$o" "kpc-applier --<TAB>"; done
out=$(complete_words "$share/bash-completion/completions/kpc-applier" kpc-applier --verify "")
has "$out" sampled "kpc-applier --verify <TAB>"

# zsh
kz=$share/zsh/site-functions/_kpc
head -1 "$kz" | grep -qx '#compdef kpc' || bad "$kz: no #compdef line"
for c in validate compile verify diff drift golden simulate trace; do grep -q "'$c:" "$kz" || bad "$kz: no command $c"; done
grep -q "^ *'--stats\[[^]]*\]' \\\\\$" "$kz" || bad "$kz: the flag --stats is given a value"
grep -q "^ *'--backend\[[^]]*\]:[A-Z]*:(iptables ip6tables nftables fastpath[a-z ]*)' " "$kz" || bad "$kz: --backend without its values"
if command -v zsh >/dev/null; then
  zsh -n "$kz" || bad "$kz: zsh -n fails"
  zsh -n "$share/zsh/site-functions/_kpc-applier" || bad "_kpc-applier: zsh -n fails"
else
  echo "note: zsh not installed: the zsh scripts are checked by their text only"
fi

# man
for tool in kpc kpc-applier; do
  page=$share/man/man1/$tool.1
  grep -q '^\.TH ' "$page" && grep -q '^\.SH NAME' "$page" && grep -q '^\.SH SYNOPSIS' "$page" &&
    grep -q '^\.SH DESCRIPTION' "$page" && grep -q '^\.SH OPTIONS' "$page" || bad "$page: a section is missing"
  if command -v groff >/dev/null; then
    warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
    [[ -z $warnings ]] || bad "$page: groff warns: $warnings"
    text=$(groff -man -Tutf8 "$page" 2>/dev/null | col -b 2>/dev/null || groff -man -Tascii "$page")
  else
    echo "note: groff not installed: $page checked by its structure only"
    text=$(sed -e 's/\\f[BIR]//g' -e 's/\\-/-/g' "$page")
  fi
  if [[ $tool == kpc ]]; then
    for c in validate compile verify diff drift golden simulate trace; do
      grep -q "kpc $c" <<<"$text" || bad "$page: no section for kpc $c"
    done
    for o in --prior-state --expect-dnat --max-input-size --kube-proxy-version; do
      grep -q -- "$o" <<<"$text" || bad "$page: option $o not documented"
    done
    grep -q "Exit codes" <<<"$text" || bad "$page: no exit codes"
    grep -q "Examples" <<<"$text" || bad "$page: no examples"
  fi
done

# cmake --install
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null || bad "cmake --install failed"
for f in bin/kpc bin/kpc-applier share/bash-completion/completions/kpc share/zsh/site-functions/_kpc \
         share/man/man1/kpc.1 share/bash-completion/completions/kpc-applier share/zsh/site-functions/_kpc-applier \
         share/man/man1/kpc-applier.1; do
  [[ -s $prefix/$f ]] || bad "cmake --install did not install $f"
done
"$prefix/bin/kpc" --version >/dev/null || bad "the installed kpc does not run"

[[ $fail == 0 ]] && echo "ok: completion scripts, man pages and install"
exit $fail
