# weightswarm.bash - bash completion for p2pctl, p2pd and p2p-tracker.
#
# Installed by meson as <datadir>/bash-completion/completions/{p2pctl,p2pd,
# p2p-tracker} (one file; bash-completion loads it by command name and it
# registers all three). Options are read from each binary's own --help, so
# the completion cannot drift from the parser (common/ws_args.c) and never
# offers hidden test-only options.

# The long options in the help text of "$@" (a command, maybe a subcommand).
_weightswarm_opts() {
  "$@" --help 2>/dev/null |
    sed -n 's/^  \(-h, \)\{0,1\}\(--[a-z0-9-]*\).*/\2/p'
}

# p2pctl's commands, from the "commands:" section of p2pctl --help.
_weightswarm_commands() {
  "$1" --help 2>/dev/null |
    awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'
}

# Completes the value of option $1 (files, directories, levels).
_weightswarm_value() {
  case "$1" in
  --log-level)
    COMPREPLY=($(compgen -W "error warn info debug" -- "$cur"))
    ;;
  --cache | --dir)
    COMPREPLY=($(compgen -d -- "$cur"))
    ;;
  --api | --config | --cluster-key | --api-token-file | --zone-file | \
    --state | --sign-key | --key | --out | --sig | --pub | --manifest)
    COMPREPLY=($(compgen -f -- "$cur"))
    ;;
  *)
    return 1
    ;;
  esac
  return 0
}

# True when option $2 of command "$1..." takes a value (has a METAVAR).
_weightswarm_takes_value() {
  local opt=$1
  shift
  "$@" --help 2>/dev/null | grep -q -- "^  $opt [A-Z]"
}

_weightswarm_daemon() {
  local cur prev
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  COMPREPLY=()
  if [[ $prev == --* ]] && _weightswarm_takes_value "$prev" "$1"; then
    _weightswarm_value "$prev"
    return 0
  fi
  COMPREPLY=($(compgen -W "$(_weightswarm_opts "$1")" -- "$cur"))
}

_weightswarm_p2pctl() {
  local cur prev cmd i
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  COMPREPLY=()
  # The command: the first word after the global options.
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
    --api) ((i++)) ;;
    -*) ;;
    *)
      cmd=${COMP_WORDS[i]}
      break
      ;;
    esac
  done
  if [[ -z $cmd ]]; then
    if [[ $prev == --api ]]; then
      COMPREPLY=($(compgen -f -- "$cur"))
    elif [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W "$(_weightswarm_opts "$1")" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$(_weightswarm_commands "$1")" -- "$cur"))
    fi
    return 0
  fi
  if [[ $cmd == manifest && $((i + 1)) -eq $COMP_CWORD ]]; then
    COMPREPLY=($(compgen -W "create check digest keygen sign verify" \
      -- "$cur"))
    return 0
  fi
  if [[ $cmd == help ]]; then
    COMPREPLY=($(compgen -W "$(_weightswarm_commands "$1")" -- "$cur"))
    return 0
  fi
  if [[ $prev == --* ]] && _weightswarm_takes_value "$prev" "$1" "$cmd"; then
    _weightswarm_value "$prev" && return 0
    return 0
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_weightswarm_opts "$1" "$cmd")" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}

complete -F _weightswarm_p2pctl p2pctl
complete -F _weightswarm_daemon p2pd p2p-tracker
