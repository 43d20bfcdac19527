//go:build !purego

package neon

const purego = false
