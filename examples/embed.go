// Package examples holds the example rules that `sluice serve` uses when no --config is
// given, embedded so the binary works from any directory.
package examples

import "embed"

// Config holds config/rules.yaml.
//
//go:embed config/*.yaml
var Config embed.FS

// ConfigDir is the directory of Config that holds the rules files.
const ConfigDir = "config"
