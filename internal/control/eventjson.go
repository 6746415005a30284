package control

import (
	"encoding/json"
	"net"
	"time"
	"unicode/utf8"

	"github.com/neighwatch/neighwatch/table"
)

// AppendEventJSON appends ev as one line of the event stream: the bytes
// json.Encoder writes for EventFromTable(ev), newline included, without
// building the Event or going through reflection. The stream is the
// agent's busiest writer under churn (an event a change, and one for
// each entry turning stale-long), and a subscriber whose writer falls
// behind loses events.
func AppendEventJSON(dst []byte, ev table.Event) []byte {
	from, to := eventStates(ev)
	dst = append(dst, `{"time":"`...)
	dst = ev.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","interface":`...)
	dst = appendJSONString(dst, ev.Interface)
	dst = append(dst, `,"family":`...)
	dst = appendJSONString(dst, ev.Family.String())
	dst = append(dst, `,"ip":`...)
	if ev.IP.IsValid() && ev.IP.Zone() == "" { // digits, dots, colons and hex
		dst = append(dst, '"')
		dst = ev.IP.AppendTo(dst)
		dst = append(dst, '"')
	} else { // "invalid IP", or a zone: an interface's name, any bytes
		dst = appendJSONString(dst, ev.IP.String())
	}
	dst = append(dst, `,"kind":`...)
	dst = appendJSONString(dst, string(ev.Kind))
	dst = append(dst, `,"from":`...)
	dst = appendJSONString(dst, from)
	dst = append(dst, `,"to":`...)
	dst = appendJSONString(dst, to)
	dst = append(dst, `,"lladdr":"`...)
	dst = appendMAC(dst, ev.LLAddr)
	dst = append(dst, '"')
	if len(ev.OldLLAddr) > 0 {
		dst = append(dst, `,"old_lladdr":"`...)
		dst = appendMAC(dst, ev.OldLLAddr)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"cause":`...)
	dst = appendJSONString(dst, string(ev.Cause))
	dst = append(dst, `,"class":`...)
	dst = appendJSONString(dst, ev.Class.String())
	if ev.Detail != "" {
		dst = append(dst, `,"detail":`...)
		dst = appendJSONString(dst, ev.Detail)
	}
	return append(dst, "}\n"...)
}

// appendJSONString appends s quoted as encoding/json quotes it: as it is
// when every byte is printable ASCII that needs no escape (names,
// states, causes: nearly always), else through encoding/json itself, so
// the escapes (HTML characters, control bytes, invalid UTF-8) are its.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendMAC appends a as net.HardwareAddr.String writes it.
func appendMAC(dst []byte, a net.HardwareAddr) []byte {
	const hex = "0123456789abcdef"
	for i, b := range a {
		if i > 0 {
			dst = append(dst, ':')
		}
		dst = append(dst, hex[b>>4], hex[b&0xf])
	}
	return dst
}
