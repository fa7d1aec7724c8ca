//go:build ignore

// gen writes the Lua scripts the store runs, assembled from lua/*.lua, to lua/gen (see package
// internal/luagen): run `go generate` in this directory after changing a file of lua/.
package main

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/store/redis/internal/luagen"
)

func main() {
	if err := luagen.Write("lua", "lua/gen"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
