package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

// DecodeClient decodes one frame a client sent into its message type
// (Hello, GoalSubmit, ...). It peeks "v", "type" and "id", then decodes the
// payload strictly: every required field present and non-null, every field
// of its JSON type, every enum one of its values, field names matched
// exactly. Unknown fields are ignored, as the dialect asks of receivers,
// and an optional field sent as null reads as absent (choice: the dialect
// says senders omit them; null is taken as the same thing rather than
// refused).
//
// A failure is a *DecodeError whose Code says what was wrong and whose ID
// carries the frame's id when it could be read; its Replies are what the
// server sends back.
func DecodeClient(data []byte) (ClientMessage, error) {
	top, typ, id, err := peek(data)
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypeHello:
		m, err := decodeAs[Hello](top, typ, id)
		if err == nil && m.Protocol != Version {
			return nil, &DecodeError{Code: CodeBadVersion, Type: typ, Field: "protocol", ID: id,
				Detail: "protocol " + strconv.Itoa(m.Protocol) + ", want 1"}
		}
		return client(m, err)
	case TypeGoalSubmit:
		return client(decodeAs[GoalSubmit](top, typ, id))
	case TypeUserMessage:
		return client(decodeAs[UserMessage](top, typ, id))
	case TypeDecisionAnswer:
		return client(decodeAs[DecisionAnswerMsg](top, typ, id))
	case TypeTaskAction:
		return client(decodeAs[TaskActionMsg](top, typ, id))
	case TypeAgentAction:
		return client(decodeAs[AgentActionMsg](top, typ, id))
	case TypeDiffRequest:
		return client(decodeAs[DiffRequest](top, typ, id))
	case TypeRepoAdd:
		return client(decodeAs[RepoAdd](top, typ, id))
	}
	return nil, unknownType(typ, id, isServerType(typ))
}

// DecodeServer decodes one frame a server sent, with the same rules as
// DecodeClient applied to every nested entity. Shard's server does not
// need it; it is for clients written in Go (tests, tools) and for checking
// that what Encode produces is what the dialect's clients accept.
func DecodeServer(data []byte) (ServerMessage, error) {
	top, typ, id, err := peek(data)
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypeSnapshot:
		return server(decodeAs[Snapshot](top, typ, id))
	case TypeAgentUpsert:
		return server(decodeAs[AgentUpsert](top, typ, id))
	case TypeAgentLog:
		return server(decodeAs[AgentLog](top, typ, id))
	case TypeAgentSay:
		return server(decodeAs[AgentSay](top, typ, id))
	case TypeTaskUpsert:
		return server(decodeAs[TaskUpsert](top, typ, id))
	case TypeDecisionUpsert:
		return server(decodeAs[DecisionUpsert](top, typ, id))
	case TypeRepoUpsert:
		return server(decodeAs[RepoUpsert](top, typ, id))
	case TypeMemoryUpsert:
		return server(decodeAs[MemoryUpsert](top, typ, id))
	case TypeGoalUpsert:
		return server(decodeAs[GoalUpsert](top, typ, id))
	case TypeFeedAdd:
		return server(decodeAs[FeedAdd](top, typ, id))
	case TypeDiff:
		return server(decodeAs[Diff](top, typ, id))
	case TypeNotify:
		return server(decodeAs[Notify](top, typ, id))
	case TypeForemanStatus:
		return server(decodeAs[ForemanStatusMsg](top, typ, id))
	case TypeAck:
		return server(decodeAs[Ack](top, typ, id))
	case TypeError:
		return server(decodeAs[Error](top, typ, id))
	}
	return nil, unknownType(typ, id, isClientType(typ))
}

// Encode produces the frame of a server message: one JSON object with "v",
// "type", and the payload's fields, required ones always present and
// optional ones only when set.
func Encode(m ServerMessage) ([]byte, error) { return json.Marshal(m) }

// client and server turn a decoded value into the interface, nil on error
// (a zero struct in an interface would not be nil).
func client[T ClientMessage](m T, err error) (ClientMessage, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

func server[T ServerMessage](m T, err error) (ServerMessage, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// unknownType is the error for a type this direction does not have;
// other says whether it is a message of the other direction.
func unknownType(typ Type, id string, other bool) error {
	detail := strconv.Quote(clip(string(typ)))
	if other {
		detail += " is a message of the other direction"
	}
	return &DecodeError{Code: CodeUnknownType, Type: typ, ID: id, Detail: detail}
}

func isServerType(t Type) bool {
	switch t {
	case TypeSnapshot, TypeAgentUpsert, TypeAgentLog, TypeAgentSay, TypeTaskUpsert,
		TypeDecisionUpsert, TypeRepoUpsert, TypeMemoryUpsert, TypeGoalUpsert, TypeFeedAdd,
		TypeDiff, TypeNotify, TypeForemanStatus, TypeAck, TypeError:
		return true
	}
	return false
}

func isClientType(t Type) bool {
	switch t {
	case TypeHello, TypeGoalSubmit, TypeUserMessage, TypeDecisionAnswer, TypeTaskAction,
		TypeAgentAction, TypeDiffRequest, TypeRepoAdd:
		return true
	}
	return false
}

// peek reads the envelope: the frame must be one JSON object; its "id",
// when present, a string (read first, so that later failures can name
// it); "v" the number 1; "type" a string.
func peek(data []byte) (top map[string]json.RawMessage, typ Type, id string, err error) {
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		detail := "not a JSON object"
		if err != nil {
			detail = err.Error()
		}
		return nil, "", "", &DecodeError{Code: CodeBadJSON, Detail: detail, Err: err}
	}
	if raw, ok := top["id"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, "", "", &DecodeError{Code: CodeWrongType, Field: "id", Detail: "want string", Err: err}
		}
	}
	rawType, ok := top["type"]
	if ok && !isNull(rawType) {
		var s string
		if err := json.Unmarshal(rawType, &s); err != nil {
			return nil, "", id, &DecodeError{Code: CodeWrongType, Field: "type", ID: id, Detail: "want string", Err: err}
		}
		typ = Type(s)
	}
	rawV, ok := top["v"]
	if !ok || isNull(rawV) {
		return nil, typ, id, &DecodeError{Code: CodeMissingField, Type: typ, Field: "v", ID: id}
	}
	var v any
	if err := json.Unmarshal(rawV, &v); err != nil {
		return nil, typ, id, &DecodeError{Code: CodeWrongType, Type: typ, Field: "v", ID: id, Detail: "want number", Err: err}
	}
	if _, ok := v.(float64); !ok {
		return nil, typ, id, &DecodeError{Code: CodeWrongType, Type: typ, Field: "v", ID: id, Detail: "want number"}
	}
	// Choice: the literal must be 1 exactly (1.0 and 1e0 are refused);
	// the dialect's senders write it so.
	if lit := string(bytes.TrimSpace(rawV)); lit != "1" {
		return nil, typ, id, &DecodeError{Code: CodeBadVersion, Type: typ, Field: "v", ID: id, Detail: "v " + clip(lit) + ", want 1"}
	}
	if typ == "" {
		return nil, "", id, &DecodeError{Code: CodeMissingField, Field: "type", ID: id}
	}
	return top, typ, id, nil
}

// decodeAs decodes the object top into a T, strictly (see canon).
func decodeAs[T any](top map[string]json.RawMessage, typ Type, id string) (T, error) {
	var m T
	canonical, err := canonObject(top, reflect.TypeFor[T](), "")
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Type, de.ID = typ, id
		}
		return m, err
	}
	if err := json.Unmarshal(canonical, &m); err != nil {
		// canon has checked every leaf; this is a bug, not bad input.
		return m, &DecodeError{Code: CodeWrongType, Type: typ, ID: id, Detail: err.Error(), Err: err}
	}
	return m, nil
}

// unmarshalerType is the interface of types that decode themselves.
var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// optionType is the type *OptionRef reports in its UnmarshalTypeError.
var optionType = reflect.TypeFor[OptionRef]()

// enumType is the Enum interface, to check enum leaves.
var enumType = reflect.TypeFor[Enum]()

// canon checks raw against t and returns it with only t's fields, spelled
// exactly, kept at every level (encoding/json would match names case
// insensitively and fill a field from "TEXT"). A required field — one
// whose json tag has no omitempty — must be present and non-null; an
// optional null is dropped. Leaves are decoded once here to check their
// JSON type and, for an Enum, its value, so that errors name the field.
func canon(raw json.RawMessage, t reflect.Type, path string) (json.RawMessage, error) {
	if t.Kind() == reflect.Pointer {
		return canon(raw, t.Elem(), path)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return leaf(raw, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, wrongType(path, "object", err)
		}
		return canonObject(obj, t, path)
	case reflect.Slice:
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err != nil || arr == nil {
			return nil, wrongType(path, "array", err)
		}
		out := make([]json.RawMessage, len(arr))
		for i, el := range arr {
			p := path + "[" + strconv.Itoa(i) + "]"
			if isNull(el) {
				return nil, wrongType(p, "non-null element", nil)
			}
			c, err := canon(el, t.Elem(), p)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return json.Marshal(out)
	}
	return leaf(raw, t, path)
}

// canonObject is canon for an object already split into its fields.
func canonObject(obj map[string]json.RawMessage, t reflect.Type, path string) (json.RawMessage, error) {
	out := make(map[string]json.RawMessage, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		v, ok := obj[name]
		if !ok || isNull(v) {
			if !strings.Contains(opts, "omitempty") {
				return nil, &DecodeError{Code: CodeMissingField, Field: p}
			}
			continue
		}
		c, err := canon(v, f.Type, p)
		if err != nil {
			return nil, err
		}
		out[name] = c
	}
	return json.Marshal(out)
}

// leaf decodes raw into a new t to check it, and checks an Enum's value.
func leaf(raw json.RawMessage, t reflect.Type, path string) (json.RawMessage, error) {
	v := reflect.New(t)
	if err := json.Unmarshal(raw, v.Interface()); err != nil {
		return nil, wrongType(path, kindName(t), err)
	}
	if t.Implements(enumType) {
		if e := v.Elem().Interface().(Enum); !e.Valid() {
			return nil, &DecodeError{Code: CodeBadEnum, Field: path, Detail: strconv.Quote(clip(v.Elem().String()))}
		}
	}
	return raw, nil
}

// wrongType is the error for a field of the wrong JSON type.
func wrongType(path, want string, err error) error {
	return &DecodeError{Code: CodeWrongType, Field: path, Detail: "want " + want, Err: err}
}

// kindName names the JSON type a Go type decodes from, for messages.
func kindName(t reflect.Type) string {
	if t == optionType {
		return "string or non-negative integer"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Map:
		return "object"
	}
	return t.String()
}

// isNull reports whether raw is the JSON null.
func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// clip shortens a client-supplied value echoed in an error message, so
// that a large frame does not come back whole.
func clip(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
