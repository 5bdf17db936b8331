package main

import (
	"fmt"
	"strconv"
	"strings"
)

// desktopOptions are the flags the desktop app takes besides the server's.
type desktopOptions struct {
	screenshot string // --screenshot FILE: save the window after --after passes and exit
	after      uint64 // --after N
	width      int    // --window-size WxH, logical pixels
	height     int
}

// parseDesktopFlags takes the desktop's own flags out of args and returns the rest for the
// server. Flags may be written --name VALUE or --name=VALUE, with one dash or two.
func parseDesktopFlags(args []string) (desktopOptions, []string, error) {
	o := desktopOptions{after: 1, width: 1600, height: 960}
	var rest []string
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || (name != "screenshot" && name != "after" && name != "window-size") {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return o, nil, fmt.Errorf("--%s needs a value", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "screenshot":
			if value == "" {
				return o, nil, fmt.Errorf("--screenshot needs a file name")
			}
			o.screenshot = value
		case "after":
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil || n == 0 {
				return o, nil, fmt.Errorf("--after %q: want a positive number of forward passes", value)
			}
			o.after = n
		case "window-size":
			w, h, ok := strings.Cut(value, "x")
			wi, err1 := strconv.Atoi(w)
			hi, err2 := strconv.Atoi(h)
			if !ok || err1 != nil || err2 != nil || wi < 320 || hi < 240 || wi > 16384 || hi > 16384 {
				return o, nil, fmt.Errorf("--window-size %q: want WIDTHxHEIGHT, at least 320x240", value)
			}
			o.width, o.height = wi, hi
		}
	}
	return o, rest, nil
}
