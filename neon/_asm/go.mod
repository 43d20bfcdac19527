module github.com/geisten/geist/neon/_asm

go 1.26.0
