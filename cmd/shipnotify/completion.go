package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/shipnotify/shipnotify/internal/cli"
)

func init() {
	register("completion", "print shell completion for bash or zsh: eval \"$(shipnotify completion bash)\"", runCompletion)
}

// completionScript completes a command name from the list it was made
// with, and a command's flags from that command's own --help, read when
// asked (so they never drift from the binary on PATH). zsh runs it through
// bashcompinit.
const completionScript = `# shipnotify completion for %[1]s: eval "$(shipnotify completion %[1]s)"
%[2]s_shipnotify() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "%[3]s" -- "$cur"))
    return
  fi
  case $cur in
    -*)
      local flags
      flags=$("${COMP_WORDS[0]}" "${COMP_WORDS[1]}" --help 2>/dev/null | sed -n 's/^  -\([A-Za-z0-9-]*\).*/--\1/p')
      COMPREPLY=($(compgen -W "$flags" -- "$cur"))
      ;;
    *)
      COMPREPLY=($(compgen -f -- "$cur"))
      ;;
  esac
}
complete -F _shipnotify shipnotify
`

func runCompletion(_ context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "completion", "completion bash|zsh")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("completion takes one shell: bash or zsh")
	}
	prelude := ""
	switch fs.Arg(0) {
	case "bash":
	case "zsh":
		prelude = "autoload -U +X bashcompinit && bashcompinit\n"
	default:
		return cli.Usagef("completion: %q is not a shell it knows; want bash or zsh", fs.Arg(0))
	}
	_, err := fmt.Fprintf(e.Stdout, completionScript, fs.Arg(0), prelude, strings.Join(shipnotify.Commands(), " "))
	return err
}
