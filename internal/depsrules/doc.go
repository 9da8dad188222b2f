// Package depsrules holds, in its test, the one table of the import rules
// that keep Shard's packages layered: which packages must not link which,
// and which third-party packages only one package may import. A boundary
// that is not tested is not a boundary; one table, checked against one
// `go list` of the whole module, keeps every rule in one place and each
// failure naming its rule and the import chain that breaks it.
//
// The package has no code of its own.
package depsrules
