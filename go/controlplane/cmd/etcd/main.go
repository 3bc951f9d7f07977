// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the version go.mod pins.
//
// etcd publishes its server as a library (etcdmain) whose Main takes the process's arguments;
// the release binary is a main package in a module of its own that this one does not need.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
