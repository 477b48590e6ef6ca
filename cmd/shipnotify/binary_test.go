package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The product binary links no benchmark and none of the project's test
// support: they live in cmd/shipnotify-bench and the test-only packages
// under internal/. (The demo's stand-ins for SendGrid and a receiver,
// internal/sink, are the product's; the Temporal SDK links testify itself.)
func TestTheProductBinaryHoldsNoBenchOrTestSupport(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/shipnotify/shipnotify/internal/cli", "the listing is of the product")
	for _, pkg := range deps {
		for _, banned := range []string{
			"github.com/shipnotify/shipnotify/internal/balancer",
			"github.com/shipnotify/shipnotify/internal/bench",
			"github.com/shipnotify/shipnotify/internal/childproc",
			"github.com/shipnotify/shipnotify/internal/faults",
			"github.com/shipnotify/shipnotify/internal/pager",
			"github.com/shipnotify/shipnotify/internal/soak",
			"github.com/shipnotify/shipnotify/internal/testenv",
			"go.temporal.io/sdk/testsuite",
		} {
			require.False(t, pkg == banned || strings.HasPrefix(pkg, banned+"/"), "the product binary links %s", pkg)
		}
	}
}
