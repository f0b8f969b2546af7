package main

import (
	"net"
	"reflect"

	"github.com/quic-go/quic-go"
)

// allow0RTT switches 0-RTT on in conf for every quic-go version the testbed builds: Config.Allow0RTT is
// a bool from about v0.37 on and a func(net.Addr) bool before.
func allow0RTT(conf *quic.Config) {
	f := reflect.ValueOf(conf).Elem().FieldByName("Allow0RTT")
	switch {
	case !f.IsValid():
		fail("-0rtt: this quic-go version's Config has no Allow0RTT")
	case f.Kind() == reflect.Bool:
		f.SetBool(true)
	case f.Kind() == reflect.Func:
		f.Set(reflect.ValueOf(func(net.Addr) bool { return true }).Convert(f.Type()))
	default:
		fail("-0rtt: unexpected type %s of Config.Allow0RTT", f.Type())
	}
}
