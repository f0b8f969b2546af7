package lane

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"quicsm/testbed/relay/internal/rt"
)

// Flags are the impairment flags both relays take.
type Flags struct {
	delayDown, delayUp, jitterDown, jitterUp *time.Duration
	lossDown, lossUp                         *float64
	seed                                     *uint64
	fifo                                     *bool
	stats                                    *string
	delayStep                                *string
	outage                                   *string
}

// RegisterFlags declares -delay-*, -jitter-*, -loss-*, -delay-step, -outage, -seed, -rt and -stats on the default flag set.
func RegisterFlags() *Flags {
	return &Flags{
		delayDown:  flag.Duration("delay-down", 0, "one-way delay server->client"),
		delayUp:    flag.Duration("delay-up", 0, "one-way delay client->server"),
		jitterDown: flag.Duration("jitter-down", 0, "uniform jitter +- server->client (reorders)"),
		jitterUp:   flag.Duration("jitter-up", 0, "uniform jitter +- client->server (reorders)"),
		lossDown:   flag.Float64("loss-down", 0, "drop probability server->client (0..1)"),
		lossUp:     flag.Float64("loss-up", 0, "drop probability client->server (0..1)"),
		seed:       flag.Uint64("seed", 1, "random seed for loss and jitter"),
		fifo:       flag.Bool("rt", true, "SCHED_FIFO for the two sender threads only"),
		stats:      flag.String("stats", "", "write the JSON summary here on exit"),
		delayStep: flag.String("delay-step", "", "AFTER:DELAY, e.g. 20s:40ms: from AFTER past the first packet on, "+
			"the one-way delay of both directions is DELAY"),
		outage: flag.String("outage", "", "AT:FOR[,AT:FOR...], e.g. 1s:1500ms: from AT past the first packet on, "+
			"for FOR, the link carries nothing in either direction (packets on it are lost too)"),
	}
}

// parseOutages reads -outage AT:FOR[,AT:FOR...] (Go durations) into windows in time order; they
// must not overlap.
func parseOutages(text string) ([]Window, error) {
	if text == "" {
		return nil, nil
	}
	var out []Window
	for _, part := range strings.Split(text, ",") {
		a, f, ok := strings.Cut(strings.TrimSpace(part), ":")
		at, err1 := time.ParseDuration(a)
		dur, err2 := time.ParseDuration(f)
		if !ok || err1 != nil || err2 != nil || at < 0 || dur <= 0 {
			return nil, fmt.Errorf("-outage %q: expected AT:FOR[,AT:FOR...] with AT >= 0 and FOR > 0, e.g. 1s:1500ms", text)
		}
		w := Window{StartNs: int64(at), EndNs: int64(at + dur)}
		if n := len(out); n > 0 && w.StartNs < out[n-1].EndNs {
			return nil, fmt.Errorf("-outage %q: outages must be in time order and must not overlap", text)
		}
		out = append(out, w)
	}
	return out, nil
}

// parseStep reads -delay-step AFTER:DELAY (Go durations); zero values when empty.
func parseStep(text string) (after, delay int64, err error) {
	if text == "" {
		return 0, 0, nil
	}
	a, d, ok := strings.Cut(text, ":")
	if !ok {
		return 0, 0, fmt.Errorf("-delay-step %q: expected AFTER:DELAY, e.g. 20s:40ms", text)
	}
	ad, err1 := time.ParseDuration(a)
	dd, err2 := time.ParseDuration(d)
	if err1 != nil || err2 != nil || ad <= 0 || dd < 0 {
		return 0, 0, fmt.Errorf("-delay-step %q: expected AFTER:DELAY with AFTER > 0, e.g. 20s:40ms", text)
	}
	return int64(ad), int64(dd), nil
}

// Pair is a relay's two directions and the flag that stops their senders.
type Pair struct {
	Down, Up *Lane
	stop     atomic.Bool
	stats    string
}

// Start checks the flags (exit 2 naming the program on a bad one), prepares the runtime for
// pinned senders and starts both lanes' sender threads.
func (f *Flags) Start(prog string) *Pair {
	for _, p := range []float64{*f.lossDown, *f.lossUp} {
		if p < 0 || p > 1 {
			fmt.Fprintln(os.Stderr, prog+": loss must be within 0..1")
			os.Exit(2)
		}
	}
	after, step, err := parseStep(*f.delayStep)
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		os.Exit(2)
	}
	outages, err := parseOutages(*f.outage)
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		os.Exit(2)
	}
	rt.ReserveProcs(2)
	debug.SetGCPercent(400) // fewer collections: each one can stall the sender threads
	p := &Pair{
		Down: New("down", Config{DelayNs: int64(*f.delayDown), JitterNs: int64(*f.jitterDown), Loss: *f.lossDown,
			StepAfterNs: after, StepDelayNs: step, Outages: outages}, *f.seed, *f.fifo),
		Up: New("up", Config{DelayNs: int64(*f.delayUp), JitterNs: int64(*f.jitterUp), Loss: *f.lossUp,
			StepAfterNs: after, StepDelayNs: step, Outages: outages}, *f.seed+1, *f.fifo),
		stats: *f.stats,
	}
	p.Up.origin = p.Down.origin // one origin: the first packet in either direction
	if cpus := rt.AllowedCPUs(); len(cpus) >= 2 && *f.fifo {
		p.Down.CPU, p.Up.CPU = cpus[0], cpus[1] // one real-time sender per CPU
	}
	for _, l := range []*Lane{p.Down, p.Up} {
		l.Done.Add(1)
		go l.Run(&p.stop)
	}
	return p
}

// Serve prints the ready line, waits for SIGTERM/SIGINT, stops the senders and writes the summary
// (both lanes' stats, the run time, and whatever extra returns) atomically to -stats.
func (p *Pair) Serve(ready map[string]any, extra func() map[string]any) {
	line, _ := json.Marshal(ready)
	fmt.Println(string(line))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	started := time.Now()
	<-sig
	p.stop.Store(true)
	p.Down.Done.Wait()
	p.Up.Done.Wait()
	if p.stats == "" {
		return
	}
	out := map[string]any{"down": p.Down.Stats(), "up": p.Up.Stats(), "seconds": time.Since(started).Seconds()}
	for k, v := range extra() {
		out[k] = v
	}
	js, _ := json.MarshalIndent(out, "", "  ")
	tmp := p.stats + ".tmp"
	if err := os.WriteFile(tmp, js, 0o644); err == nil {
		_ = os.Rename(tmp, p.stats)
	}
}
