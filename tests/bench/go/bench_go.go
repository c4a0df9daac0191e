// bench_go -- Go beside bench_fiber and bench_sync: the same rows, each op
// defined as the C++ benchmark defines it, timed with GOMAXPROCS=1 (unless set
// otherwise) so that goroutines share one thread as our fibers do.
//
//	./bench_go [-rounds 7] [-parked 1000000]   the Go rows alone
//	./bench_go -serve                          one round per request (below)
//
// run.sh builds it and names it in PXB_GO to bench_fiber and bench_sync, which
// run it with -serve and ask for a round of the Go row after each of their own
// rounds, and print the medians beside theirs with the ratio parataxis / Go.
// Rows (N as in the C++ programs):
//
//	yield round trip   two goroutines each call runtime.Gosched() N times;
//	                   op = elapsed / N, one yield by each (bench_fiber's yield).
//	spawn + join       go f() with f calling wg.Done(), then wg.Wait(), one at a
//	                   time (bench_fiber's px_spawn + px_join + release).
//	uncontended        sync.Mutex Lock + Unlock by one goroutine.
//	mutex hand-off     two goroutines taking turns: sync.Mutex + sync.Cond and a
//	                   turn word, as bench_sync's Boost.Fiber row; op = one turn.
//	                   Go's mutex lets the unlocker take it back (it hands over
//	                   only once a waiter has waited 1 ms), so plain Lock/Unlock
//	                   loops give no turns.
//	channel            a producer sends 1..N, a consumer receives and sums them;
//	                   op = one value sent and received (bench_sync's rows):
//	                   capacity 64 and unbuffered.
//	bytes per parked   RSS growth (VmRSS) per goroutine while -parked goroutines
//	                   are parked on a channel receive, after debug.FreeOSMemory()
//	                   and, once all are parked, runtime.GC(); measured last.
//
// Alone, each timed row is the median of -rounds rounds, the rows interleaved
// in each round.  Standard library only.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The C++ programs' counts.
const (
	nYield   = 2000000
	nSpawn   = 200000
	nLock    = 5000000
	nHandoff = 500000
	nChan    = 1000000
	// bench_structure's
	nMembers  = 1000
	groupReps = 200
	nSelect   = 1000000
)

func perOp(t0 time.Time, n int) float64 {
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

func yieldRound() float64 {
	var wg sync.WaitGroup
	wg.Add(2)
	y := func() {
		for i := 0; i < nYield; i++ {
			runtime.Gosched()
		}
		wg.Done()
	}
	t0 := time.Now()
	go y()
	go y()
	wg.Wait()
	return perOp(t0, nYield)
}

// Package-level, so that `go spawned()` captures nothing and allocates no
// closure: px_spawn(px_nothing, NULL) allocates nothing of the caller's either.
var spawnWG sync.WaitGroup

func spawned() { spawnWG.Done() }

func spawnRound() float64 {
	t0 := time.Now()
	for i := 0; i < nSpawn; i++ {
		spawnWG.Add(1)
		go spawned()
		spawnWG.Wait()
	}
	return perOp(t0, nSpawn)
}

func lockRound() float64 {
	var m sync.Mutex
	t0 := time.Now()
	for i := 0; i < nLock; i++ {
		m.Lock()
		m.Unlock()
	}
	return perOp(t0, nLock)
}

type turns struct {
	mu   sync.Mutex
	cond *sync.Cond
	turn int
}

func (t *turns) take(me int, wg *sync.WaitGroup) {
	for i := 0; i < nHandoff; i++ {
		t.mu.Lock()
		for t.turn != me {
			t.cond.Wait()
		}
		t.turn = 1 - me
		t.cond.Signal()
		t.mu.Unlock()
	}
	wg.Done()
}

func handoffRound() float64 {
	t := &turns{}
	t.cond = sync.NewCond(&t.mu)
	var wg sync.WaitGroup
	wg.Add(2)
	t0 := time.Now()
	go t.take(0, &wg)
	go t.take(1, &wg)
	wg.Wait()
	return perOp(t0, 2*nHandoff)
}

func chanRound(capacity int) float64 {
	ch := make(chan int, capacity)
	var wg sync.WaitGroup
	wg.Add(2)
	t0 := time.Now()
	go func() {
		for i := 0; i < nChan; i++ {
			ch <- i + 1
		}
		wg.Done()
	}()
	go func() {
		sum := 0
		for i := 0; i < nChan; i++ {
			sum += <-ch
		}
		if sum != nChan*(nChan+1)/2 {
			panic("channel lost a value")
		}
		wg.Done()
	}()
	wg.Wait()
	return perOp(t0, nChan)
}

// errgroup's pattern without its module: a WaitGroup that 1,000 goroutines
// leave, per goroutine (bench_structure's group row).
func groupRound() float64 {
	var wg sync.WaitGroup
	t0 := time.Now()
	for r := 0; r < groupReps; r++ {
		wg.Add(nMembers)
		for i := 0; i < nMembers; i++ {
			go spawnedFrom(&wg)
		}
		wg.Wait()
	}
	return perOp(t0, groupReps*nMembers)
}

func spawnedFrom(wg *sync.WaitGroup) { wg.Done() }

// A select over two channels of capacity 64 that two goroutines fill, per
// value received (bench_structure's select row).
func select2Round() float64 {
	a, b := make(chan int, 64), make(chan int, 64)
	produce := func(ch chan int) {
		for i := 0; i < nSelect/2; i++ {
			ch <- i + 1
		}
	}
	t0 := time.Now()
	go produce(a)
	go produce(b)
	sum := 0
	for i := 0; i < nSelect; i++ {
		select {
		case v := <-a:
			sum += v
		case v := <-b:
			sum += v
		}
	}
	if sum != 2*((nSelect/2)*(nSelect/2+1)/2) {
		panic("select lost a value")
	}
	return perOp(t0, nSelect)
}

func rssKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// "VmRSS:	  123456 kB"
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib
		}
	}
	return 0
}

// Package-level for the same reason as spawnWG: the parked goroutines hold
// nothing but their own g, stack and channel wait record.
var (
	release     chan struct{}
	ready, done sync.WaitGroup
)

func parker() {
	ready.Done()
	<-release
	done.Done()
}

func parkedBytes(n int) float64 {
	// Return what the timed rounds freed to the OS, so that the goroutines'
	// memory shows as growth rather than reuse of resident free pages.
	debug.FreeOSMemory()
	before := rssKiB()
	release = make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go parker()
	}
	// With one P the last parker runs on to its receive before main resumes.
	ready.Wait()
	runtime.GC()
	after := rssKiB()
	close(release)
	done.Wait()
	return float64(after-before) * 1024 / float64(n)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

type row struct {
	key, label string
	fn         func() float64
}

var rows = []row{
	{"yield", "yield round trip (Gosched)", yieldRound},
	{"spawn", "spawn + join (WaitGroup)", spawnRound},
	{"lock", "uncontended lock+unlock", lockRound},
	{"handoff", "mutex hand-off (+Cond)", handoffRound},
	{"chan64", "channel cap 64", func() float64 { return chanRound(64) }},
	{"chan0", "channel unbuffered", func() float64 { return chanRound(0) }},
	{"group", "1000 goroutines + WaitGroup", groupRound},
	{"select2", "select over 2 channels", select2Round},
}

// serve answers one request a line on stdin, "ROW" (a key of rows) or
// "parked N", with one line on stdout: ns per op, or bytes per goroutine.
// bench_fiber and bench_sync run it as a child (go_peer.h) and ask for one
// round of a row between their own rounds, so that noise hits both alike.
func serve() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		v := -1.0
		switch {
		case len(f) == 2 && f[0] == "parked":
			if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
				v = parkedBytes(n)
			}
		case len(f) == 1:
			for _, r := range rows {
				if r.key == f[0] {
					v = r.fn()
				}
			}
		}
		if v < 0 {
			fmt.Fprintf(os.Stderr, "bench_go: bad request %q\n", in.Text())
			os.Exit(2)
		}
		fmt.Printf("%.3f\n", v)
	}
}

func main() {
	rounds := flag.Int("rounds", 7, "timed rounds (median)")
	parked := flag.Int("parked", 1000000, "goroutines parked for the bytes row")
	serving := flag.Bool("serve", false, "answer requests on stdin (see serve)")
	flag.Parse()
	// One P, as our fibers run on one thread, unless the caller chose.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if *serving {
		serve()
		return
	}

	v := make([][]float64, len(rows))
	for r := 0; r < *rounds; r++ {
		for i, row := range rows {
			v[i] = append(v[i], row.fn())
		}
	}
	bytes := parkedBytes(*parked)
	fmt.Printf("== Go %s, GOMAXPROCS=%d, median of %d rounds\n",
		runtime.Version(), runtime.GOMAXPROCS(0), *rounds)
	for i, row := range rows {
		fmt.Printf("go %-27s %7.1f ns\n", row.label, median(v[i]))
	}
	fmt.Printf("go bytes / parked goroutine    %7.0f B   (%d parked)\n", bytes, *parked)
}
