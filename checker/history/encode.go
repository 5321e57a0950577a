package history

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// appendEvent appends e's line (without the newline) to buf. It writes only the fields e's
// type and kind use, so lines stay short, and it does not use reflection: the recorder calls
// it for every event.
func appendEvent(buf []byte, e *Event) ([]byte, error) {
	name, err := e.Type.name() // not MarshalText, whose []byte is an allocation per event
	if err != nil {
		return buf, err
	}
	buf = append(buf, `{"type":"`...)
	buf = append(buf, name...)
	buf = append(buf, '"')
	switch e.Type {
	case TypeHeader:
		buf = appendInt(buf, "time", e.Time)
		format := e.Format
		if format == 0 {
			format = FormatOf(e.Meta)
		}
		buf = appendInt(buf, "format", int64(format))
		if e.Meta != nil {
			meta, err := json.Marshal(e.Meta)
			if err != nil {
				return buf, fmt.Errorf("header meta: %w", err)
			}
			buf = append(buf, `,"meta":`...)
			buf = append(buf, meta...)
		}
	case TypeInvoke:
		if !e.Kind.valid() {
			return buf, fmt.Errorf("op %d: unknown kind %q: %w", e.ID, e.Kind, ErrMalformed)
		}
		buf = appendInt(buf, "id", e.ID)
		buf = appendInt(buf, "time", e.Time)
		buf = appendInt(buf, "client", int64(e.Client))
		buf = appendOptString(buf, "process", e.Process)
		buf = appendOptString(buf, "member", e.Member)
		buf = appendOptString(buf, "role", e.Role)
		buf = appendOptString(buf, "kind", string(e.Kind))
		if e.Kind.IsPipeline() {
			if buf, err = appendPipe(buf, "args", e.Args.Pipe); err != nil {
				return buf, fmt.Errorf("op %d: %w", e.ID, err)
			}
		} else {
			buf = appendArgs(buf, e.Kind, &e.Args)
		}
	case TypeOK, TypeFail, TypeInfo:
		buf = appendInt(buf, "id", e.ID)
		buf = appendInt(buf, "time", e.Time)
		switch {
		case e.Type == TypeOK && e.Result.Pipe != nil:
			if buf, err = appendPipe(buf, "result", e.Result.Pipe); err != nil {
				return buf, fmt.Errorf("op %d: %w", e.ID, err)
			}
		case e.Type == TypeOK:
			buf = appendResult(buf, &e.Result)
		}
		buf = appendOptString(buf, "error", e.Error)
		buf = appendOptString(buf, "message", e.Message)
	case TypeFaultStart:
		buf = appendInt(buf, "fault", e.Fault)
		buf = appendInt(buf, "time", e.Time)
		buf = appendOptString(buf, "kind", string(e.Kind))
		buf = appendOptString(buf, "process", e.Process)
		buf = appendOptString(buf, "role", e.Role)
		buf = appendOptString(buf, "member", e.Member)
		if e.Step != 0 {
			buf = appendInt(buf, "step", int64(e.Step))
		}
		buf = appendOptString(buf, "spec", e.Spec)
		if len(e.Targets) > 0 {
			buf = append(buf, `,"targets":[`...)
			for i, t := range e.Targets {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendString(buf, t)
			}
			buf = append(buf, ']')
		}
		buf = appendOptString(buf, "desc", e.Desc)
	case TypeFaultEnd:
		buf = appendInt(buf, "fault", e.Fault)
		buf = appendInt(buf, "time", e.Time)
		if e.TookHold {
			buf = append(buf, `,"took_hold":true`...)
		}
	}
	return append(buf, '}'), nil
}

// appendPipe appends `,"key":{"pipe":PAYLOAD}` for a pipeline operation's arguments or
// result, nothing when payload is nil. Pipeline operations are few beside a lease run's
// millions of writes, so the payload goes through encoding/json.
func appendPipe[T any](buf []byte, key string, payload *T) ([]byte, error) {
	if payload == nil {
		return buf, nil
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return buf, fmt.Errorf("%s.pipe: %w", key, err)
	}
	buf = append(buf, `,"`...)
	buf = append(buf, key...)
	buf = append(buf, `":{"pipe":`...)
	buf = append(buf, b...)
	return append(buf, '}'), nil
}

func appendArgs(buf []byte, k Kind, a *Args) []byte {
	write := k.IsWrite()
	work := (k == KindWork || k.IsRead()) && a.Log.Work
	if !write && !work {
		return buf
	}
	buf = append(buf, `,"args":{`...)
	sep := false
	if write {
		buf = append(buf, `"token":`...)
		buf = appendToken(buf, a.Token)
		buf = append(buf, `,"write_id":`...)
		buf = appendString(buf, a.WriteID)
		sep = true
	}
	if work {
		if sep {
			buf = append(buf, ',')
		}
		buf = append(buf, `"work_partition":`...)
		buf = strconv.AppendInt(buf, int64(a.Log.Partition), 10)
	}
	if write && a.Records != 0 {
		buf = appendInt(buf, "records", int64(a.Records))
	}
	return append(buf, '}')
}

func appendResult(buf []byte, r *Result) []byte {
	if r.Token == nil && !r.Held && r.Offset == nil && r.Records == nil {
		return buf
	}
	buf = append(buf, `,"result":{`...)
	sep := false
	comma := func() {
		if sep {
			buf = append(buf, ',')
		}
		sep = true
	}
	if r.Held {
		comma()
		buf = append(buf, `"held":true`...)
	}
	if r.Token != nil {
		comma()
		buf = append(buf, `"token":`...)
		buf = appendToken(buf, *r.Token)
	}
	if r.Offset != nil {
		comma()
		buf = append(buf, `"offset":`...)
		buf = strconv.AppendInt(buf, *r.Offset, 10)
	}
	if r.Records != nil {
		comma()
		buf = append(buf, `"records":[`...)
		for i := range r.Records {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendRecord(buf, &r.Records[i])
		}
		buf = append(buf, ']')
	}
	return append(buf, '}')
}

func appendRecord(buf []byte, r *Record) []byte {
	buf = append(buf, `{"offset":`...)
	buf = strconv.AppendInt(buf, r.Offset, 10)
	buf = append(buf, `,"kind":"`...)
	buf = append(buf, r.Kind.String()...)
	buf = append(buf, '"')
	buf = appendOptString(buf, "member", r.Member)
	buf = appendOptString(buf, "role", r.Role)
	if r.Kind == RecordLease || r.Kind == RecordWork {
		buf = append(buf, `,"token":`...)
		buf = appendToken(buf, r.Token)
		buf = appendOptString(buf, "write_id", r.WriteID)
	}
	if r.Count != 0 {
		buf = appendInt(buf, "index", int64(r.Index))
		buf = appendInt(buf, "count", int64(r.Count))
	}
	return append(buf, '}')
}

func appendToken(buf []byte, t Token) []byte {
	buf = append(buf, `{"producer_id":`...)
	buf = strconv.AppendInt(buf, t.ProducerID, 10)
	buf = append(buf, `,"epoch":`...)
	buf = strconv.AppendInt(buf, int64(t.Epoch), 10)
	return append(buf, '}')
}

func appendInt(buf []byte, key string, v int64) []byte {
	buf = append(buf, ',', '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return strconv.AppendInt(buf, v, 10)
}

func appendOptString(buf []byte, key, v string) []byte {
	if v == "" {
		return buf
	}
	buf = append(buf, ',', '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return appendString(buf, v)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping as encoding/json does (without its HTML
// escaping) and replacing invalid UTF-8 with U+FFFD.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
