module quicsm/testbed/relay

go 1.22
