package webrtc

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pion/logging"
)

// pionLogs routes pion's logs to slog: its errors at Warn (a peer that misbehaves is not the
// broker's error), its warnings at Debug, the rest nowhere.
type pionLogs struct{ log *slog.Logger }

// NewLogger implements logging.LoggerFactory.
func (f pionLogs) NewLogger(scope string) logging.LeveledLogger {
	return pionLogger{log: f.log.With("pion", scope)}
}

type pionLogger struct{ log *slog.Logger }

func (pionLogger) Trace(string)                {}
func (pionLogger) Tracef(string, ...any)       {}
func (pionLogger) Debug(string)                {}
func (pionLogger) Debugf(string, ...any)       {}
func (pionLogger) Info(string)                 {}
func (pionLogger) Infof(string, ...any)        {}
func (l pionLogger) Warn(msg string)           { l.emit(slog.LevelDebug, msg) }
func (l pionLogger) Error(msg string)          { l.emit(slog.LevelWarn, msg) }
func (l pionLogger) Warnf(f string, a ...any)  { l.emitf(slog.LevelDebug, f, a...) }
func (l pionLogger) Errorf(f string, a ...any) { l.emitf(slog.LevelWarn, f, a...) }

func (l pionLogger) emit(level slog.Level, msg string) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, "webrtc: "+msg)
	}
}

// emitf formats only what is logged: pion warns from its packet paths, at Debug here.
func (l pionLogger) emitf(level slog.Level, f string, a ...any) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, "webrtc: "+fmt.Sprintf(f, a...))
	}
}
