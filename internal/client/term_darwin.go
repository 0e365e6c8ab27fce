package client

import "golang.org/x/sys/unix"

const ioctlReadTermios = unix.TIOCGETA
