package chat

import (
	"testing"
	"time"
)

func TestStrftime(t *testing.T) {
	t.Parallel()
	// Thursday, 2026-01-01 09:05:03 and Sunday, 2023-12-31 23:59:58.
	a := time.Date(2026, time.January, 1, 9, 5, 3, 0, time.UTC)
	b := time.Date(2023, time.December, 31, 23, 59, 58, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		format string
		t      time.Time
		want   string
	}{
		{"%Y-%m-%d", a, "2026-01-01"},
		{"%d %b %Y", a, "01 Jan 2026"},
		{"%B %d, %Y", a, "January 01, 2026"},
		{"%A %a %B %b %h", a, "Thursday Thu January Jan Jan"},
		{"%H:%M:%S", a, "09:05:03"},
		{"%I %p %l|%k", a, "09 AM  9| 9"},
		{"%I %p", b, "11 PM"},
		{"%y %j %C", a, "26 001 20"},
		{"%j", b, "365"},
		{"%e|%D|%F|%T|%R|%r", a, " 1|01/01/26|2026-01-01|09:05:03|09:05|09:05:03 AM"},
		{"%c", a, "Thu Jan  1 09:05:03 2026"},
		{"%x %X", b, "12/31/23 23:59:58"},
		{"%u %w", b, "7 0"},
		{"%u %w", a, "4 4"},
		{"%U %W %V %G %g", b, "53 52 52 2023 23"},
		{"%U %W %V %G %g", a, "00 00 01 2026 26"},
		{"%z %Z", b, "+0100 CET"},
		{"%s", a, "1767258303"},
		{"100%% %n%t", a, "100% \n\t"},
		{"%Q %", a, "%Q %"},
		{"no conversions", a, "no conversions"},
		{"", a, ""},
	}
	for _, tc := range tests {
		if got := Strftime(tc.format, tc.t); got != tc.want {
			t.Errorf("Strftime(%q, %v) = %q, want %q", tc.format, tc.t, got, tc.want)
		}
	}
}

func TestStrftimeNowInTemplate(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, time.July, 26, 8, 30, 0, 0, time.UTC)
	got, err := render(`{{ strftime_now('%d %b %Y') }}/{{ strftime_now("%B %d, %Y") }}`, nil, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := "26 Jul 2024/July 26, 2024"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := render(`{{ strftime_now() }}`, nil, Options{Now: now}); err == nil {
		t.Error("strftime_now() without a format: no error")
	}
}
