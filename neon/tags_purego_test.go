//go:build purego

package neon

const purego = true
