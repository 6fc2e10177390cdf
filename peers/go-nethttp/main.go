// go-nethttp: Go's net/http as the benchmark posts ran it — the standard library only
// (no module proxy is reachable here), one goroutine per connection, GOMAXPROCS = workers.
// It stands beside archzoo's work-stealing model.
package main

import (
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"
)

func main() {
	// The Go release this binary was built with: the version line of a results.json, read
	// from the binary itself, so a machine it was copied to needs no Go toolchain.
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("go-nethttp built with", runtime.Version())
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go-nethttp PORT")
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" && r.URL.Path != "/plaintext" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("hello, world!"))
	})
	// /sum: 1000 random integers in 100..=999, summed — as archzoo's handler.
	mux.HandleFunc("/sum", func(w http.ResponseWriter, r *http.Request) {
		total := 0
		for i := 0; i < 1000; i++ {
			total += 100 + rand.Intn(900)
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "sum=%d", total)
	})
	// /sleep?ms=N: time.Sleep parks only this goroutine.
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
		if err != nil || ms < 0 || ms > 10000 {
			http.Error(w, "ms must be an integer in 0..=10000", http.StatusBadRequest)
			return
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "slept=%d", ms)
	})
	// The address: loopback, or a test host's (bench sets ARCHZOO_PEER_HOST).
	host := os.Getenv("ARCHZOO_PEER_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	server := &http.Server{Addr: host + ":" + os.Args[1], Handler: mux}
	if err := server.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "go-nethttp:", err)
		os.Exit(1)
	}
}
