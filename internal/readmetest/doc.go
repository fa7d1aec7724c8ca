// Package readmetest holds the tests that follow README.md and docs/*.md as a reader would:
// every Go snippet compiled in the context the text gives it (a whole program as it is, a
// fragment inside a function with the imports it names), the programs that serve started
// and asked, and the Set up section's commands run against a built sluice, each output
// checked against the one the README shows. It has no code of its own.
package readmetest
