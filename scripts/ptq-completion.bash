# bash completion for ptq (installed as share/bash-completion/completions/ptq). The commands come
# from `ptq --help`, each command's options from `ptq COMMAND --list-options` and the presets from
# `ptq preprocess --list-presets`: the binary's own tables, so completion follows them.
_ptq() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} ptq=${COMP_WORDS[0]} cmd=${COMP_WORDS[1]:-}
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "$("$ptq" --help 2>/dev/null | awk '/^  [a-z]/ {print $1}') --help --version" -- "$cur"))
    return
  fi
  if [ "$cmd" = stats ] && [ "$COMP_CWORD" -eq 2 ]; then
    COMPREPLY=($(compgen -W "merge show" -- "$cur"))
    return
  fi
  case $prev in
    --preset|--eval-preset)
      COMPREPLY=($(compgen -W "$("$ptq" preprocess --list-presets 2>/dev/null)" -- "$cur")); return ;;
    --method|--methods|--layers-method)
      COMPREPLY=($(compgen -W "max percentile:99.99 percentile:99.999 entropy mse output-mse all" -- "$cur")); return ;;
    --layout) COMPREPLY=($(compgen -W "NCHW NHWC" -- "$cur")); return ;;
    --channel-order) COMPREPLY=($(compgen -W "RGB BGR" -- "$cur")); return ;;
    --weights) COMPREPLY=($(compgen -W "int8 qdq-fp32" -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$("$ptq" "$cmd" --list-options 2>/dev/null)" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _ptq ptq
