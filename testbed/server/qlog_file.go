//go:build qlog_newtracer || qlog_conntracer

// A qlog file per connection, for the versions whose qlog package only writes to a writer it is given.

package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
)

// bufferedFile flushes its buffer on Close (qlog writes many small records).
type bufferedFile struct {
	*bufio.Writer
	f *os.File
}

func (b bufferedFile) Close() error {
	if err := b.Flush(); err != nil {
		return err
	}
	return b.f.Close()
}

// qlogFile opens <dir>/<connection ID>_<perspective>.qlog, the name quic-go's own tracer uses.
func qlogFile(dir string, connID fmt.Stringer, perspective fmt.Stringer) io.WriteCloser {
	path := filepath.Join(dir, fmt.Sprintf("%s_%s.qlog", connID, strings.ToLower(perspective.String())))
	f, err := os.Create(path)
	if err != nil {
		log.Printf("quicsm-server: qlog: %v", err)
		return nil
	}
	return bufferedFile{bufio.NewWriter(f), f}
}
