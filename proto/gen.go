// Package proto holds kbplatform's versioned plugin protocol (kbplatform/plugin/v1) and its
// generated Go code. Regenerate with `go generate ./proto` (needs protoc, protoc-gen-go and
// protoc-gen-go-grpc; scripts/proto installs the pinned plugin versions).
package proto

//go:generate ../scripts/proto
