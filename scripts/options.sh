# shellcheck shell=bash
# The command-line helpers of scripts/bench.sh and scripts/recipe.sh (sourced). The caller defines
# die MESSAGE (a bad command line) and sets the variables' defaults.

# usage STATUS: the comment at the top of the script, up to its `set -euo`, then exit STATUS.
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "$1"; }

# options "NAME …" "FLAG …" WORDS ARGS…: sets the caller's variable of each --NAME VALUE (dashes as underscores;
# --set adds to the array settings) and of each --FLAG (to 1); with WORDS 1, other words go to the array positional.
options() {
  local names=" $1 " flags=" $2 " words=$3 option
  shift 3
  positional=()
  while (($#)); do
    option=${1#--}
    if [[ $1 == -h || $1 == --help ]]; then
      usage 0
    elif [[ $1 == --* && $names == *" $option "* ]]; then
      (($# >= 2)) || die "$1 needs a value"
      if [ "$option" = set ]; then settings+=("$2"); else printf -v "${option//-/_}" '%s' "$2"; fi
      shift 2
    elif [[ $1 == --* && $flags == *" $option "* ]]; then
      printf -v "${option//-/_}" '%s' 1
      shift
    elif [[ $1 != -* ]] && ((words)); then
      positional+=("$1")
      shift
    else
      die "unknown argument $1 (see --help)"
    fi
  done
}

# whole MIN VALUE…: each VALUE an integer ≥ MIN (0 or 1). one_of WHAT "VALUES" ALLOWED…: each word allowed.
whole() {
  local min=$1 value
  shift
  for value in "$@"; do
    if ! [[ $value =~ ^[0-9]+$ ]] || ((value < min)); then die "'$value' is not an integer ≥ $min"; fi
  done
}
one_of() {
  local what=$1 value
  for value in $2; do [[ " ${*:3} " == *" $value "* ]] || die "unknown $what $value (${*:3})"; done
}
