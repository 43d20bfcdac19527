package daemon

import "log/slog"

// loadLog is serve's engine.Options.OnLoadProgress: for a big file (256
// MiB of weights to repack or more) a log line at each quarter, so that
// a load of minutes on a board says how far it is.
func loadLog(log *slog.Logger, model string) func(done, total int64) {
	next := int64(1)
	return func(done, total int64) {
		if total < 256<<20 || next > 3 || 4*done < next*total {
			return
		}
		for next <= 3 && 4*done >= next*total {
			next++
		}
		log.Info("loading the model", "model", model, "repacked_mib", done>>20, "of_mib", total>>20, "percent", 100*done/total)
	}
}
