//go:build tools

// Package tools pins the Pulumi CLI as a dependency of this lock file.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
