// Package bench runs Sluice side by side with peer libraries on the same workloads in the same
// run. It is a separate module so the peers never become dependencies of Sluice itself.
//
//	cd bench && go test -run '^$' -bench . -benchmem
package bench
