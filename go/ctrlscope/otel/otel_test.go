package otel

import (
	"strings"
	"testing"
)

// The endpoint the variables name, and a setting the exporter could not use refused at start with
// the variable's name (the exporter would only log each failed batch on its own goroutine).
func TestTracesEndpoint(t *testing.T) {
	cases := []struct {
		env      map[string]string
		want     string
		fromOtel bool
		err      string // a part of the error; "" for none
	}{
		{env: map[string]string{}, want: ""},
		{env: map[string]string{CtrlscopeVariable: "http://127.0.0.1:4318/"}, want: "http://127.0.0.1:4318/v1/traces"},
		{env: map[string]string{EndpointVariable: "https://otel.example:4318", CtrlscopeVariable: "http://x:1"},
			want: "https://otel.example:4318/v1/traces", fromOtel: true},
		{env: map[string]string{TracesEndpointVariable: "http://c:4318/custom", EndpointVariable: "http://other:4318"},
			want: "http://c:4318/custom", fromOtel: true},
		{env: map[string]string{CtrlscopeVariable: "127.0.0.1:4318"}, err: CtrlscopeVariable},
		{env: map[string]string{EndpointVariable: "http://127.0.0.1:99999"}, err: "out of range"},
		{env: map[string]string{EndpointVariable: "grpc://collector:4317"}, err: "not an http:// or https:// URL"},
		{env: map[string]string{CtrlscopeVariable: "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{CtrlscopeVariable: "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			want: "http://c:4318/v1/traces"},
	}
	all := append([]string{TracesEndpointVariable, EndpointVariable, CtrlscopeVariable}, protocolVariables...)
	for _, c := range cases {
		for _, name := range all {
			t.Setenv(name, c.env[name])
		}
		got, fromOtel, err := TracesEndpoint()
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v: error %v, want one saying %q", c.env, err, c.err)
		case c.err == "" && (err != nil || got != c.want || fromOtel != c.fromOtel):
			t.Errorf("%v: %q %v %v, want %q %v", c.env, got, fromOtel, err, c.want, c.fromOtel)
		}
	}
}
