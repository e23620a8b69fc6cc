# bash completion for brokerctl(1)
_brokerctl()
{
	local cur prev words cword
	_init_completion || return

	local opts="--json --address --timeout --count --page-size --help"
	local cmds="info list status call emit monitor peers policy quota"
	local i cmd= nargs=0

	case $prev in
	--address|-a) _filedir; return ;;
	--timeout|-t|--count|-n|--page-size|-p) return ;;
	esac
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--address|-a|--timeout|-t|--count|-n|--page-size|-p) ((i++)) ;;
		-*) ;;
		*) if [[ -z $cmd ]]; then cmd=${words[i]}; else ((nargs++)); fi ;;
		esac
	done
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	_brokerctl_names() {
		brokerctl list --json 2>/dev/null | tr ',' '\n' | sed -n 's/.*"name":"\([^"]*\)".*/\1/p'
	}
	case $cmd in
	'') COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
	status|call|emit|monitor)
		[[ $nargs -eq 0 ]] && COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")) ;;
	policy)
		case $nargs in
		0) COMPREPLY=($(compgen -W "check" -- "$cur")) ;;
		1) COMPREPLY=($(compgen -u -- "$cur")) ;;
		2) COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")) ;;
		3) COMPREPLY=($(compgen -W "own send receive" -- "$cur")) ;;
		esac ;;
	quota)
		[[ $nargs -eq 0 ]] && COMPREPLY=($(compgen -W "all $(compgen -u)" -- "$cur")) ;;
	esac
} && complete -F _brokerctl brokerctl
