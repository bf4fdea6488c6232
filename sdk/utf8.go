package sdk

import (
	"context"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf refuses to marshal a string field that is not valid UTF-8, and a candidate can print
// any bytes into the log a result carries (the log is also cut at a byte limit, which can split a
// character). One bad byte would turn an honest verdict into a transport error, so every message
// is made valid where it leaves a process: invalid sequences become U+FFFD.

// ServerOptions are the gRPC server options every kbplatform endpoint uses: replies (and stream
// messages) are made valid UTF-8 before they are marshaled.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			validMessage(resp)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, validServerStream{ss})
		}),
	}
}

// DialOptions are the gRPC dial options every kbplatform client uses: requests are made valid
// UTF-8 before they are marshaled.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			validMessage(req)
			return inv(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, s grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := s(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return validClientStream{cs}, nil
		}),
	}
}

type validServerStream struct{ grpc.ServerStream }

func (s validServerStream) SendMsg(m any) error {
	validMessage(m)
	return s.ServerStream.SendMsg(m)
}

type validClientStream struct{ grpc.ClientStream }

func (s validClientStream) SendMsg(m any) error {
	validMessage(m)
	return s.ClientStream.SendMsg(m)
}

// validMessage replaces invalid UTF-8 in every string of m, in place: fields, repeated fields,
// map keys and values, nested messages (structpb values included).
func validMessage(m any) {
	if pm, ok := m.(proto.Message); ok && pm != nil {
		validReflect(pm.ProtoReflect())
	}
}

func validReflect(m protoreflect.Message) {
	if !m.IsValid() {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			validMap(m, fd, v.Map())
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				switch fd.Kind() {
				case protoreflect.StringKind:
					if s := l.Get(i).String(); !utf8.ValidString(s) {
						l.Set(i, protoreflect.ValueOfString(ValidUTF8(s)))
					}
				case protoreflect.MessageKind, protoreflect.GroupKind:
					validReflect(l.Get(i).Message())
				}
			}
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				m.Set(fd, protoreflect.ValueOfString(ValidUTF8(s)))
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			validReflect(v.Message())
		}
		return true
	})
}

func validMap(parent protoreflect.Message, fd protoreflect.FieldDescriptor, mp protoreflect.Map) {
	type fix struct {
		old, new protoreflect.MapKey
		val      protoreflect.Value
	}
	var fixes []fix
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		switch fd.MapValue().Kind() {
		case protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				v = protoreflect.ValueOfString(ValidUTF8(s))
				mp.Set(k, v)
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			validReflect(v.Message())
		}
		if fd.MapKey().Kind() == protoreflect.StringKind {
			if s := k.String(); !utf8.ValidString(s) {
				fixes = append(fixes, fix{old: k, new: protoreflect.ValueOfString(ValidUTF8(s)).MapKey(), val: v})
			}
		}
		return true
	})
	for _, f := range fixes {
		mp.Clear(f.old)
		mp.Set(f.new, f.val)
	}
}

// ValidUTF8 returns s with each invalid byte sequence replaced by U+FFFD.
func ValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
