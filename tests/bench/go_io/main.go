// io_go -- Go's side of io_bench.py (the I/O benchmarks of issue 20), run with
// GOMAXPROCS=1 so that goroutines share one thread as our fibers do.
//
//	io_go echo          the TCP echo server: prints "port N", runs until killed
//	io_go latency N     wake latency, two cases (lines as io_pinger.h prints)
//	io_go rss N         bytes per goroutine parked in conn.Read at N connections
//
// echo: a goroutine per connection, each with a 64 KiB buffer, Read then Write
// of what came (TCP_NODELAY is Go's default; the other servers set it).
//
// latency: "loop<->loop": two goroutines ping-pong one byte over two pipes
// (os.File on non-blocking pipes: reads wait in the netpoller); a sample is one
// round trip.  "thread->loop": a C thread (io_pinger.h through cgo, the code
// the C peers run) writes one byte, a goroutine reads it from the netpoller
// and writes it back on a second pipe.
//
// rss: listens, prints "port N", accepts N connections (io_echo_load --hold
// makes them from another process), each served by a goroutine parked in
// conn.Read with a 1 KiB buffer; reads VmRSS before the first accept and once
// all N are parked (after runtime.GC and debug.FreeOSMemory, as bench_go does),
// and prints "rss go parked N before_kib B after_kib A bytes_per P".
package main

/*
#cgo CFLAGS: -I${SRCDIR}/.. -O2 -D_GNU_SOURCE
#cgo LDFLAGS: -lpthread
#include <fcntl.h>
#include <unistd.h>
#include "io_pinger.h"

static struct pxb_pinger pinger;
static int pipes[4];

// Makes the two pipes; the loop's ends (ping read, pong write) non-blocking.
static int go_pipes(void)
{
	if (pipe2(pipes, O_CLOEXEC) != 0 || pipe2(pipes + 2, O_CLOEXEC) != 0)
		return -1;
	if (fcntl(pipes[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(pipes[3], F_SETFL, O_NONBLOCK) != 0)
		return -1;
	return 0;
}
static int go_pipe(int i) { return pipes[i]; }
static int go_pinger_start(long n) { return pxb_pinger_start(&pinger, pipes[1], pipes[2], n); }
static void go_pinger_finish(void) { pxb_pinger_finish(&pinger, "go"); }
static void go_report(long long *ns, long n) { pxb_report("go", "loop<->loop", (int64_t *)ns, n); }
*/
import "C"

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

func die(err error) {
	fmt.Fprintln(os.Stderr, "io_go:", err)
	os.Exit(1)
}

func raiseNofile() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil {
		r.Cur = r.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

func listen() net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		die(err)
	}
	fmt.Printf("port %d\n", l.Addr().(*net.TCPAddr).Port)
	return l
}

func echo() {
	l := listen()
	for {
		c, err := l.Accept()
		if err != nil {
			die(err)
		}
		go func(c net.Conn) {
			buf := make([]byte, 64*1024)
			for {
				n, err := c.Read(buf)
				if err != nil {
					break
				}
				if _, err := c.Write(buf[:n]); err != nil {
					break
				}
			}
			c.Close()
		}(c)
	}
}

func latency(n int) {
	// loop <-> loop
	ar, aw, err := os.Pipe()
	if err != nil {
		die(err)
	}
	br, bw, err := os.Pipe()
	if err != nil {
		die(err)
	}
	go func() {
		b := make([]byte, 1)
		for i := 0; i < n; i++ {
			if _, err := ar.Read(b); err != nil {
				die(err)
			}
			if _, err := bw.Write(b); err != nil {
				die(err)
			}
		}
	}()
	ns := make([]int64, n)
	b := make([]byte, 1)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := aw.Write(b); err != nil {
			die(err)
		}
		if _, err := br.Read(b); err != nil {
			die(err)
		}
		ns[i] = int64(time.Since(t0))
	}
	C.go_report((*C.longlong)(unsafe.Pointer(&ns[0])), C.long(n))

	// thread -> loop
	if C.go_pipes() != 0 {
		die(fmt.Errorf("pipes"))
	}
	ping := os.NewFile(uintptr(C.go_pipe(0)), "ping")
	pong := os.NewFile(uintptr(C.go_pipe(3)), "pong")
	if C.go_pinger_start(C.long(n)) != 0 {
		die(fmt.Errorf("pinger"))
	}
	for i := 0; i < n; i++ {
		if _, err := ping.Read(b); err != nil {
			die(err)
		}
		if _, err := pong.Write(b); err != nil {
			die(err)
		}
	}
	C.go_pinger_finish()
}

func vmRSSKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		die(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(s.Text())[1], 10, 64)
			return v
		}
	}
	return -1
}

func rss(n int) {
	raiseNofile()
	l := listen()
	runtime.GC()
	debug.FreeOSMemory()
	before := vmRSSKiB()
	var parked int64
	conns := make([]net.Conn, 0, n)
	for len(conns) < n {
		c, err := l.Accept()
		if err != nil {
			die(err)
		}
		conns = append(conns, c)
		go func(c net.Conn) {
			buf := make([]byte, 1024)
			atomic.AddInt64(&parked, 1)
			c.Read(buf)
		}(c)
	}
	for atomic.LoadInt64(&parked) < int64(n) {
		runtime.Gosched()
	}
	// Let every goroutine reach its Read and park there.
	for i := 0; i < 10; i++ {
		runtime.Gosched()
	}
	runtime.GC()
	debug.FreeOSMemory()
	after := vmRSSKiB()
	fmt.Printf("rss go parked %d before_kib %d after_kib %d bytes_per %.0f\n", n, before, after,
		float64(after-before)*1024/float64(n))
	for _, c := range conns {
		c.Close()
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: io_go echo | latency N | rss N")
		os.Exit(2)
	}
	n := 200000
	if len(os.Args) > 2 {
		n, _ = strconv.Atoi(os.Args[2])
	}
	switch os.Args[1] {
	case "echo":
		echo()
	case "latency":
		latency(n)
	case "rss":
		rss(n)
	default:
		fmt.Fprintln(os.Stderr, "io_go: unknown", os.Args[1])
		os.Exit(2)
	}
}
