# bash completion for shepherdctl (installed as share/bash-completion/completions/shepherdctl; from a
# checkout: source clients/shepherdctl/shepherdctl.bash).
_shepherdctl() {
  local cur prev words cword
  _init_completion 2>/dev/null || {
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  }
  local commands="get describe plan submit cancel restart cordon uncordon drain top"
  local globals="--server --token-file -o --output --timeout --help"
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "table wide json" -- "$cur")); return ;;
    --emit) COMPREPLY=($(compgen -W "megatron torchtitan" -- "$cur")); return ;;
    --from) COMPREPLY=($(compgen -W "last-known-good latest" -- "$cur")); return ;;
    --state) COMPREPLY=($(compgen -W "available allocated spare cordoned failed draining drained queued launching running recovering succeeded cancelled" -- "$cur")); return ;;
    --token-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  local cmd="" i
  for ((i = 1; i < cword; i++)); do
    case "${words[i]}" in
      --server|--token-file|-o|--output|--timeout) ((i++)) ;;
      -*) ;;
      *) cmd=${words[i]}; break ;;
    esac
  done
  case "$cmd" in
    "") COMPREPLY=($(compgen -W "$commands $globals" -- "$cur")) ;;
    get) COMPREPLY=($(compgen -W "nodes jobs failures checkpoints --state --spare -l --external-id --kind --job --since -w --watch $globals" -- "$cur")) ;;
    describe) COMPREPLY=($(compgen -W "job node $globals" -- "$cur")) ;;
    plan) COMPREPLY=($(compgen -f -W "--emit $globals" -- "$cur")) ;;
    submit) COMPREPLY=($(compgen -f -- "$cur")) ;;
    restart) COMPREPLY=($(compgen -W "--from --reason --replace-nodes $globals" -- "$cur")) ;;
    cordon|drain|uncordon) COMPREPLY=($(compgen -W "--reason $globals" -- "$cur")) ;;
    top) COMPREPLY=($(compgen -W "--interval $globals" -- "$cur")) ;;
  esac
}
complete -F _shepherdctl shepherdctl
