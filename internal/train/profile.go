package train

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/atomicfile"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/profile"
)

// Recorder carries a training program's -profile, -trace, -metrics and
// -tensorboard: the profiler its loop reports to (nil when neither
// -profile nor -trace asked for one, which every profile method accepts),
// the metrics lines and the TensorBoard events, each file its owner's
// alone (0600). The trace and metrics files are written under temporary
// names beside their own and put in place by Finish (atomicfile), so a run
// that fails before it leaves a file of the same name as it was; the event
// file has a name of its own and is written as the run goes.
type Recorder struct {
	Prof *profile.Profiler

	flags   cli.ProfileFlags
	metrics *profile.Metrics
	mfile   *atomicfile.File // the metrics, under a temporary name until Finish
	mbuf    *bufio.Writer
	tb      *profile.TensorBoard
	tbfile  *os.File
	tbbuf   *bufio.Writer
	last    time.Time // the previous metrics line: a step's rate is measured from it
	dev     device.Device
	skipped int // the scaler's count of skipped steps at the previous line
	done    bool
}

// NewRecorder starts recording what flags ask for, on dev, for the run
// that run describes.
func NewRecorder(flags cli.ProfileFlags, dev device.Device, run profile.RunInfo) (*Recorder, error) {
	r := &Recorder{flags: flags, dev: dev}
	if flags.On() {
		var opts []profile.Option
		if flags.Trace != "" {
			opts = append(opts, profile.Trace(0))
		}
		r.Prof = profile.New(dev, opts...)
	}
	if flags.Metrics != "" {
		f, err := atomicfile.Create(flags.Metrics, 0o600)
		if err != nil {
			return nil, fmt.Errorf("-metrics: %w", err)
		}
		r.mfile, r.mbuf = f, bufio.NewWriter(f)
		run.Device = dev.Name()
		r.metrics = profile.NewMetrics(r.mbuf, run)
	}
	if flags.TensorBoard != "" {
		if err := r.openTensorBoard(flags.TensorBoard); err != nil {
			r.Close()
			return nil, fmt.Errorf("-tensorboard: %w", err)
		}
	}
	r.last = time.Now()
	return r, nil
}

// openTensorBoard starts an event file in dir, named as TensorBoard's own
// writers name theirs, so that runs sharing the directory keep theirs.
// It is written as the run goes (TensorBoard shows a run while it trains)
// and kept if the run fails.
func (r *Recorder) openTensorBoard(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	name := fmt.Sprintf("events.out.tfevents.%d.%s.%d.mixprec", time.Now().Unix(), host, os.Getpid())
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	r.tbfile, r.tbbuf = f, bufio.NewWriter(f)
	r.tb = profile.NewTensorBoard(r.tbbuf)
	return nil
}

// Label names a run's configuration in a plot's legend: fp32, f16 or bf16,
// with "+ckpt" when it checkpoints.
func Label(a cli.AMP, c cli.Checkpoint) string {
	l := a.String()
	if !a.On() {
		l = "fp32"
	}
	if c.On() {
		l += "+ckpt"
	}
	return l
}

// Step writes a step's metrics line (with -metrics): its number and epoch
// (1-based), loss, learning rate, the scaler's scale and whether it
// skipped the step, the samples it took (over every rank), and the
// device's memory.
func (r *Recorder) Step(step, epoch int, loss float64, lr float32, scaler *amp.GradScaler, samples int) {
	if r.metrics == nil && r.tb == nil {
		return
	}
	now := time.Now()
	sps := float64(samples) / max(now.Sub(r.last).Seconds(), 1e-9)
	r.last = now
	live, peak := profile.Memory(r.dev.MemStats())
	skipped := scaler.Skipped()
	// The shortest decimal that is lr as a float32: 0.05, not 0.0500000007.
	lr64, _ := strconv.ParseFloat(strconv.FormatFloat(float64(lr), 'g', -1, 32), 64)
	rec := profile.StepRecord{Step: step, Epoch: epoch, Loss: profile.Float(loss), LR: lr64,
		LossScale: profile.Float(scaler.LossScale()), Skipped: skipped > r.skipped, Samples: samples,
		SamplesPerSec: profile.Float(sps), LiveBytes: live, PeakBytes: peak}
	r.skipped = skipped
	if r.metrics != nil {
		r.metrics.Step(rec)
	}
	if r.tb != nil {
		r.tb.Step(rec)
		if step%20 == 0 { // TensorBoard shows the run as it trains
			r.tbbuf.Flush()
		}
	}
}

// Eval writes an evaluation's metrics line (with -metrics).
func (r *Recorder) Eval(step, epoch int, accuracy float64) {
	rec := profile.EvalRecord{Step: step, Epoch: epoch, TestAccuracy: profile.Float(accuracy)}
	if r.metrics != nil {
		r.metrics.Eval(rec)
	}
	if r.tb != nil {
		r.tb.Eval(rec)
		r.tbbuf.Flush()
	}
	r.last = time.Now() // the next step's rate leaves the evaluation out
}

// Report is the profile for the JSON summary (with -profile), else nil.
func (r *Recorder) Report() *profile.Report {
	if !r.flags.Profile {
		return nil
	}
	rep := r.Prof.Report()
	return &rep
}

// Summary is s with the profile, for -json.
func (r *Recorder) Summary(s cli.Summary) any {
	if rep := r.Report(); rep != nil {
		return cli.ProfiledSummary{Summary: s, Profile: rep}
	}
	return s
}

// Finish prints the profile's table on stderr (with -profile) and puts
// the trace and the metrics in their files.
func (r *Recorder) Finish(stderr io.Writer) error {
	if r.done {
		return nil
	}
	r.done = true
	defer r.Prof.Close()
	if r.flags.Profile {
		if err := r.Prof.Table(stderr); err != nil {
			return err
		}
	}
	var errs []error
	if r.flags.Trace != "" {
		if err := atomicfile.Write(r.flags.Trace, 0o600, r.Prof.WriteTrace); err != nil {
			errs = append(errs, fmt.Errorf("-trace: %w", err))
		}
	}
	if r.metrics != nil {
		err := r.metrics.Err()
		if err == nil {
			err = r.mbuf.Flush()
		}
		if err == nil {
			err = r.mfile.Commit()
		}
		r.mfile.Abort() // after a commit, nothing
		r.mfile = nil
		if err != nil {
			errs = append(errs, fmt.Errorf("-metrics: %w", err))
		}
	}
	if r.tb != nil {
		if err := r.closeTensorBoard(); err != nil {
			errs = append(errs, fmt.Errorf("-tensorboard: %w", err))
		}
	}
	return errors.Join(errs...)
}

// closeTensorBoard flushes, syncs and closes the event file.
func (r *Recorder) closeTensorBoard() error {
	err := r.tb.Err()
	if e := r.tbbuf.Flush(); err == nil {
		err = e
	}
	if e := r.tbfile.Sync(); err == nil {
		err = e
	}
	if e := r.tbfile.Close(); err == nil {
		err = e
	}
	r.tb = nil
	return err
}

// Close discards what Finish did not write; after Finish it does nothing.
func (r *Recorder) Close() {
	if r.mfile != nil {
		r.mfile.Abort()
		r.mfile = nil
	}
	if r.tb != nil {
		r.closeTensorBoard() // what a failed run wrote still shows in TensorBoard
	}
	r.Prof.Close()
	r.done = true
}
