// go_skynet -- the Go side of skynet.py's cold rows, one case per process:
//
//	go_skynet LEAVES skynet   the usual skynet program: each goroutine spawns ten
//	                          children (an unbuffered channel per node) until
//	                          there are LEAVES leaves, receives their sums and
//	                          sends its own; the total is checked.
//	go_skynet N parked        N goroutines, each blocked on a receive from one
//	                          channel until main closes it; one WaitGroup says
//	                          when all are parked (Done just before the
//	                          receive), another when all have ended.
//
// skynet.py runs it with GOMAXPROCS=1.  Prints one line, as skynet_px does:
// "<seconds> <peak RSS KiB> <minor faults>": the time on Go's monotonic clock
// around the work, VmHWM of /proc/self/status (not ru_maxrss, which Linux
// carries across execve from the spawning driver) and ru_minflt of
// getrusage(RUSAGE_SELF).  Standard library only.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func skynet(c chan int, num, size, div int) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int)
	sum := 0
	for i := 0; i < div; i++ {
		subNum := num + i*(size/div)
		go skynet(rc, subNum, size/div, div)
	}
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func runSkynet(leaves int) time.Duration {
	start := time.Now()
	c := make(chan int)
	go skynet(c, 0, leaves, 10)
	sum := <-c
	took := time.Since(start)
	if want := leaves * (leaves - 1) / 2; sum != want {
		fmt.Fprintf(os.Stderr, "go_skynet: sum %d, want %d\n", sum, want)
		os.Exit(1)
	}
	return took
}

func runParked(n int) time.Duration {
	start := time.Now()
	release := make(chan struct{})
	var parked, ended sync.WaitGroup
	parked.Add(n)
	ended.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			parked.Done()
			<-release
			ended.Done()
		}()
	}
	parked.Wait()
	close(release)
	ended.Wait()
	return time.Since(start)
}

// peakRSS returns VmHWM of /proc/self/status in KiB, -1 if unreadable.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "VmHWM:" {
			if kib, err := strconv.ParseInt(fs[1], 10, 64); err == nil {
				return kib
			}
		}
	}
	return -1
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go_skynet LEAVES|N skynet|parked")
	os.Exit(2)
}

func main() {
	if len(os.Args) != 3 {
		usage()
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		usage()
	}
	var took time.Duration
	switch os.Args[2] {
	case "skynet":
		for p := n; p > 1; p /= 10 {
			if p%10 != 0 {
				usage() // LEAVES must be a power of ten
			}
		}
		took = runSkynet(n)
	case "parked":
		took = runParked(n)
	default:
		usage()
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("%.6f %d %d\n", took.Seconds(), peakRSS(), ru.Minflt)
}
