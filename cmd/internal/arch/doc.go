// Package arch holds the module's architecture: its test lists every
// package of the module with what it may import, and the rules between
// the layers (kernels, engine, storage, the appliance core, the front
// ends, the command), and fails on any import that breaks them.
//
// It lives apart from the packages it judges, so that no layer's own
// tests carry the whole module's rules (the core's package held them
// before).
package arch
