module github.com/backchannel-io/backchannel/tools/pair

go 1.26
