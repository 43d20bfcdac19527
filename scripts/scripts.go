// Package scripts carries the sample configuration and the systemd unit in
// the binary, so that geist init can write them on a device that has only
// the binary (scripts/INSTALL.md).
package scripts

import _ "embed"

// Config is the sample geist serve configuration, geist.toml.
//
//go:embed geist.toml
var Config string

// Unit is the systemd unit, geist.service.
//
//go:embed geist.service
var Unit string
