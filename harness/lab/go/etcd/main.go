// Command etcd is etcd's own entry point: the etcd repository's root module (go.etcd.io/etcd/v3, whose main.go
// is these lines) replaces its siblings with local paths, so it cannot be required; server/v3 can.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
