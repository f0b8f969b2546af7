module quicsm/testbed/tcp

go 1.22
