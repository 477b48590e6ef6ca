package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// toolsFolder holds everything that is not shipped: the benchmark, the
// soak, the test wiring, the fault tests and the harnesses they run.
const toolsFolder = "github.com/shipnotify/shipnotify/internal/tools"

// The product binary links nothing under internal/tools and none of the
// SDK's test suite: the rule is the folder, so a new tool is kept out by
// where it stands. (The demo's stand-ins for SendGrid and a receiver,
// internal/sink, are the product's; the Temporal SDK links testify itself.)
func TestTheProductBinaryHoldsNoBenchOrTestSupport(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/shipnotify/shipnotify/internal/cli", "the listing is of the product")
	for _, pkg := range deps {
		for _, banned := range []string{toolsFolder, "go.temporal.io/sdk/testsuite"} {
			require.False(t, pkg == banned || strings.HasPrefix(pkg, banned+"/"), "the product binary links %s", pkg)
		}
	}
}

// The folder rule above holds only if the tooling stands in the folder:
// every package under internal/ is linked by the product binary or stands
// under internal/tools, so the tree answers "is this shipped?".
func TestInternalOutsideToolsIsWhatTheBinaryLinks(t *testing.T) {
	t.Parallel()
	deps, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	shipped := map[string]bool{}
	for _, pkg := range strings.Fields(string(deps)) {
		shipped[pkg] = true
	}
	all, err := exec.Command("go", "list", "github.com/shipnotify/shipnotify/internal/...").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(all)) {
		require.True(t, shipped[pkg] || strings.HasPrefix(pkg, toolsFolder+"/"),
			"%s is not linked by the product binary, so it is tooling: move it under internal/tools", pkg)
	}
}
