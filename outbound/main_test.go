package outbound_test

import (
	"os"
	"testing"

	"github.com/refundd/refundd/store/storetest"
)

// TestMain stops the package's PostgreSQL cluster after its tests. It is
// the only TestMain of package outbound's tests: a test file of another
// sink (mail) relies on it too.
func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }
