module github.com/kbplatform/kbplatform

go 1.26.8
