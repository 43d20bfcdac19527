package chat

import (
	"strconv"
	"strings"
	"time"
)

// Strftime formats t like C's strftime in the "C" locale (which Python's
// time.strftime and llama.cpp's strftime_now use). Supported conversions:
// %a %A %b %h %B %c %C %d %D %e %F %g %G %H %I %j %k %l %m %M %n %p %r %R
// %s %S %t %T %u %U %V %w %W %x %X %y %Y %z %Z %%. An unknown conversion is
// copied through unchanged, as glibc does.
func Strftime(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		writeConv(&b, format[i], t)
	}
	return b.String()
}

func pad(b *strings.Builder, n, width int, fill byte) {
	s := strconv.Itoa(n)
	for k := len(s); k < width; k++ {
		b.WriteByte(fill)
	}
	b.WriteString(s)
}

func writeConv(b *strings.Builder, c byte, t time.Time) {
	switch c {
	case 'a':
		b.WriteString(t.Weekday().String()[:3])
	case 'A':
		b.WriteString(t.Weekday().String())
	case 'b', 'h':
		b.WriteString(t.Month().String()[:3])
	case 'B':
		b.WriteString(t.Month().String())
	case 'c':
		b.WriteString(Strftime("%a %b %e %H:%M:%S %Y", t))
	case 'C':
		pad(b, t.Year()/100, 2, '0')
	case 'd':
		pad(b, t.Day(), 2, '0')
	case 'D', 'x':
		b.WriteString(Strftime("%m/%d/%y", t))
	case 'e':
		pad(b, t.Day(), 2, ' ')
	case 'F':
		b.WriteString(Strftime("%Y-%m-%d", t))
	case 'g':
		y, _ := t.ISOWeek()
		pad(b, y%100, 2, '0')
	case 'G':
		y, _ := t.ISOWeek()
		pad(b, y, 1, '0')
	case 'H':
		pad(b, t.Hour(), 2, '0')
	case 'I':
		pad(b, hour12(t), 2, '0')
	case 'j':
		pad(b, t.YearDay(), 3, '0')
	case 'k':
		pad(b, t.Hour(), 2, ' ')
	case 'l':
		pad(b, hour12(t), 2, ' ')
	case 'm':
		pad(b, int(t.Month()), 2, '0')
	case 'M':
		pad(b, t.Minute(), 2, '0')
	case 'n':
		b.WriteByte('\n')
	case 'p':
		if t.Hour() < 12 {
			b.WriteString("AM")
		} else {
			b.WriteString("PM")
		}
	case 'r':
		b.WriteString(Strftime("%I:%M:%S %p", t))
	case 'R':
		b.WriteString(Strftime("%H:%M", t))
	case 's':
		b.WriteString(strconv.FormatInt(t.Unix(), 10))
	case 'S':
		pad(b, t.Second(), 2, '0')
	case 't':
		b.WriteByte('\t')
	case 'T', 'X':
		b.WriteString(Strftime("%H:%M:%S", t))
	case 'u':
		w := int(t.Weekday())
		if w == 0 {
			w = 7
		}
		pad(b, w, 1, '0')
	case 'U': // week of the year, Sunday first
		pad(b, (t.YearDay()+6-int(t.Weekday()))/7, 2, '0')
	case 'V':
		_, w := t.ISOWeek()
		pad(b, w, 2, '0')
	case 'w':
		pad(b, int(t.Weekday()), 1, '0')
	case 'W': // week of the year, Monday first
		pad(b, (t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2, '0')
	case 'y':
		pad(b, t.Year()%100, 2, '0')
	case 'Y':
		pad(b, t.Year(), 1, '0')
	case 'z':
		b.WriteString(t.Format("-0700"))
	case 'Z':
		name, _ := t.Zone()
		b.WriteString(name)
	case '%':
		b.WriteByte('%')
	default:
		b.WriteByte('%')
		b.WriteByte(c)
	}
}

func hour12(t time.Time) int {
	h := t.Hour() % 12
	if h == 0 {
		h = 12
	}
	return h
}
