# bash completion for brokerctl(1)
_brokerctl()
{
	local cur prev words cword
	_init_completion || return

	local opts="--json --json=short --json=pretty --address --name --timeout --count --page-size --help"
	local cmds="info list status call emit monitor peers policy quota introspect tree get-property set-property"
	local i cmd= nargs=0 args=()
	_brokerctl_names() {
		brokerctl list --json 2>/dev/null | tr ',' '\n' | sed -n 's/.*"name":"\([^"]*\)".*/\1/p'
	}
	# a service's object paths, an object's interfaces, an interface's properties
	_brokerctl_paths() {
		brokerctl --json tree "$1" 2>/dev/null | tr -d '[]"' | tr ',' '\n'
	}
	_brokerctl_members() { # SERVICE OBJECT [INTERFACE]
		brokerctl --json introspect "$1" "$2" 2>/dev/null | sed 's/},{/}\n{/g' |
			if [[ -n $3 ]]; then
				sed -n "s/.*\"interface\":\"$3\",\"name\":\"\([^\"]*\)\",\"type\":\"property\".*/\1/p"
			else
				sed -n 's/.*"interface":"\([^"]*\)".*/\1/p' | sort -u
			fi
	}

	case $prev in
	--address|-a) _filedir; return ;;
	--timeout|-t|--count|-n|--page-size|-p) return ;;
	--name|-N) COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")); return ;;
	esac
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--address|-a|--name|-N|--timeout|-t|--count|-n|--page-size|-p) ((i++)) ;;
		-*) ;;
		*) if [[ -z $cmd ]]; then cmd=${words[i]}; else args+=("${words[i]}"); ((nargs++)); fi ;;
		esac
	done
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	case $cmd in
	'') COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
	status|call|monitor)
		[[ $nargs -eq 0 ]] && COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")) ;;
	emit)
		# the typed form starts with an object path (its name comes with --name)
		[[ $nargs -eq 0 && $cur != /* ]] && COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")) ;;
	policy)
		case $nargs in
		0) COMPREPLY=($(compgen -W "check" -- "$cur")) ;;
		1) COMPREPLY=($(compgen -u -- "$cur")) ;;
		2) COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")) ;;
		3) COMPREPLY=($(compgen -W "own send receive" -- "$cur")) ;;
		esac ;;
	tree)
		[[ $nargs -eq 0 ]] && COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")) ;;
	introspect|get-property|set-property)
		case $nargs in
		0) COMPREPLY=($(compgen -W "$(_brokerctl_names)" -- "$cur")) ;;
		1) COMPREPLY=($(compgen -W "$(_brokerctl_paths "${args[0]}")" -- "$cur")) ;;
		2) [[ $cmd != introspect ]] &&
			COMPREPLY=($(compgen -W "$(_brokerctl_members "${args[0]}" "${args[1]}")" -- "$cur")) ;;
		*) [[ $cmd == get-property || $nargs -eq 3 ]] && [[ $cmd != introspect ]] &&
			COMPREPLY=($(compgen -W "$(_brokerctl_members "${args[0]}" "${args[1]}" "${args[2]}")" -- "$cur")) ;;
		esac ;;
	quota)
		[[ $nargs -eq 0 ]] && COMPREPLY=($(compgen -W "all $(compgen -u)" -- "$cur")) ;;
	esac
} && complete -F _brokerctl brokerctl
