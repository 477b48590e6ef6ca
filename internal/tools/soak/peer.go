package soak

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// replicaOf names the serve replica ("serve 0", "serve 1") that holds the
// loopback connection a tracker received a post on, from remoteAddr (the
// replica's end): the kernel's socket table gives the connection's inode,
// and the replica whose descriptors hold it is the one. "" when none does
// (the replica died as it posted). The checker excuses a repeated event by
// what happened to the replica that posted it. to is the tracker's port.
func (e *Env) replicaOf(remoteAddr string, to int) string {
	_, portText, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return ""
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return ""
	}
	inode := socketInode(port, to)
	if inode == "" {
		return ""
	}
	want := "socket:[" + inode + "]"
	for i, s := range e.Serves {
		pid := s.Pid()
		if pid == 0 {
			continue
		}
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == want {
				return fmt.Sprintf("serve %d", i)
			}
		}
	}
	return ""
}

// socketInode finds, in /proc/net/tcp, the inode of the IPv4 socket from
// local port port to remote port to ("" when there is none).
func socketInode(port, to int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	local, remote := fmt.Sprintf(":%04X", port), fmt.Sprintf(":%04X", to)
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && strings.HasSuffix(fields[1], local) && strings.HasSuffix(fields[2], remote) && fields[9] != "0" {
			return fields[9]
		}
	}
	return ""
}
