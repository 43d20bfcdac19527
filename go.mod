module github.com/geisten/geist

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/spf13/pflag v1.1.0
	golang.org/x/sys v0.50.0
)
