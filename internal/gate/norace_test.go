//go:build !race

package gate

const race = false
