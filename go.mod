module github.com/geisten/geist

go 1.26
