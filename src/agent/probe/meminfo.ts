// The machine's RAM, from /proc/meminfo: what CPU profiles are placed
// against. Pure over the file's text so it is tested on captured files.

export interface MemoryInfo {
  /** Absent: the line was missing or unreadable. */
  totalBytes?: number;
  /** What the kernel estimates a new program can use without swapping; absent on kernels before 3.14. */
  availableBytes?: number;
}

/** Reads MemTotal and MemAvailable; the kernel writes them in KiB ("kB"). */
export function parseMeminfo(text: string): MemoryInfo {
  const info: MemoryInfo = {};
  for (const line of text.split('\n')) {
    const match = /^(MemTotal|MemAvailable):\s+(\d+)\s*kB\s*$/.exec(line);
    if (!match) continue;
    const bytes = Number(match[2]) * 1024;
    if (match[1] === 'MemTotal') info.totalBytes = bytes;
    else info.availableBytes = bytes;
  }
  return info;
}
