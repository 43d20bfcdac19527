//go:build race

package storage

// raceEnabled shortens the longest randomized runs under the race detector.
const raceEnabled = true
