package cli

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/console"
)

// KeyFilesPoll is how often serve looks at its key files for a change. A
// look is one stat a file, so it can be frequent; a change is read once two
// looks agree on it, so within two polls. SIGHUP reloads at once.
const KeyFilesPoll = 2 * time.Second

// Reloadable is a file a long-lived process re-reads without a restart.
type Reloadable struct {
	// Variable is the variable that named the file, for the logs.
	Variable string
	Path     string
	// Load reads the file and, only if all of it is good, puts it in
	// force; it returns how many entries it holds. On an error nothing
	// changes.
	Load func(path string) (entries int, err error)
}

// FileWatch reloads files when told to (serve's SIGHUP) and when they
// change. A file that fails to load (it does not parse, or is gone) is
// logged by variable and path with the parser's error, which names the
// entry and never a hash; what was in force stays.
//
// It polls rather than using fsnotify: a stat follows symlinks, so it sees
// a file replaced by rename (editors) or a symlink swapped (Kubernetes
// secrets), which a watch on the file itself misses, and it adds no
// dependency.
type FileWatch struct {
	log   *slog.Logger
	files []Reloadable
	// seen is each file as it was when last loaded; changing, as the last
	// look saw it while it differed.
	seen, changing []fileState
}

// NewFileWatch looks at each file, then loads it once more: a change made
// after the start-up read is not missed (and a file that fails now is
// logged, leaving the start-up read in force).
func NewFileWatch(logger *slog.Logger, files []Reloadable) *FileWatch {
	w := &FileWatch{log: logger, files: files, seen: make([]fileState, len(files)), changing: make([]fileState, len(files))}
	for i := range files {
		w.reload(i, "start", false)
	}
	return w
}

// Run reloads every file when hup delivers, and, looking every poll, a
// file whose size or modification time differs from when it was loaded
// and has stayed so since the look before (a file being written in place
// is not read half-way), until ctx ends.
func (w *FileWatch) Run(ctx context.Context, hup <-chan os.Signal, poll time.Duration) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			for i := range w.files {
				w.reload(i, "SIGHUP", true)
			}
		case <-tick.C:
			for i, f := range w.files {
				switch now := stat(f.Path); {
				case now == w.seen[i]:
				case now == w.changing[i]:
					w.reload(i, "changed", true)
				default:
					w.changing[i] = now
				}
			}
		}
	}
}

// reload looks at file i, then loads it: a write after the look changes
// what the next look sees.
func (w *FileWatch) reload(i int, trigger string, logSuccess bool) {
	f := w.files[i]
	w.seen[i], w.changing[i] = stat(f.Path), fileState{}
	n, err := f.Load(f.Path)
	if err != nil {
		w.log.Error("a file was refused; what was in force stays", "variable", f.Variable, "file", f.Path,
			"trigger", trigger, "error", err)
		return
	}
	if logSuccess {
		w.log.Info("file reloaded", "variable", f.Variable, "file", f.Path, "trigger", trigger, "entries", n)
	}
}

// fileState is what a look at a file sees: its size and modification
// time, or that it could not be seen.
type fileState struct {
	size    int64
	modTime time.Time
	missing bool
}

func stat(path string) fileState {
	fi, err := os.Stat(path)
	if err != nil {
		return fileState{missing: true}
	}
	return fileState{size: fi.Size(), modTime: fi.ModTime()}
}

// ReadApprovers reads the console's approvers file (console.ParseApprovers's
// format).
func ReadApprovers(path string) ([]console.Approver, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return console.ParseApprovers(f)
}

// ServeKeyFiles is what serve re-reads: the API keys file into a (when the
// keys came from SHIPNOTIFY_API_KEYS_FILE; inline keys need a restart),
// and the approvers file into con (when the console is served and has
// one).
func ServeKeyFiles(cfg config.Config, a *api.API, con *console.Handler) []Reloadable {
	var files []Reloadable
	if cfg.APIKeysFile != "" {
		files = append(files, Reloadable{Variable: "SHIPNOTIFY_API_KEYS_FILE", Path: cfg.APIKeysFile,
			Load: func(path string) (int, error) {
				keys, err := config.ReadAPIKeys(path)
				if err == nil && len(keys) == 0 {
					// As at start-up: with no key every request is refused,
					// which a half-written file must not do.
					err = errors.New("no keys; to refuse every request, stop serve")
				}
				if err != nil {
					return 0, err
				}
				a.SetKeys(keys)
				return len(keys), nil
			}})
	}
	if con != nil && cfg.ConsoleKeysFile != "" {
		files = append(files, Reloadable{Variable: "SHIPNOTIFY_CONSOLE_KEYS_FILE", Path: cfg.ConsoleKeysFile,
			Load: func(path string) (int, error) {
				approvers, err := ReadApprovers(path)
				if err != nil {
					return 0, err
				}
				// Bounded: a mirror that does not answer holds up no
				// reload (the console tries again at the next one).
				ctx, cancel := context.WithTimeout(context.Background(), budget.ApproversReload)
				defer cancel()
				con.SetApprovers(ctx, approvers)
				return len(approvers), nil
			}})
	}
	return files
}
