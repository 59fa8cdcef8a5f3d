// Durations as people read them in a shard's error ("after 3.2s", "after
// 4m10s"): seconds with one decimal below a minute, whole units above.
// Separate from units/ because formatDurationMs there writes the config
// syntax ("3200ms"), which is exact but not what an operator scans for.

export function formatElapsedMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${Math.round(ms / 100) / 10}s`;
  const totalSeconds = Math.round(ms / 1000);
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  if (hours > 0) return `${hours}h${minutes > 0 ? `${minutes}m` : ''}`;
  return `${minutes}m${seconds > 0 ? `${seconds}s` : ''}`;
}
