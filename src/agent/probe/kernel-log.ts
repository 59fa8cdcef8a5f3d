// The NVIDIA driver's lines in the kernel log (Xid errors, "fallen off the
// bus"), read only to explain a GPU failure nvidia-smi already showed: a GPU
// it cannot reach, or nvidia-smi failing or hanging. The log is history — it
// keeps an Xid long after a GPU reset cured it — so it never marks a GPU
// unhealthy on its own; nvidia-smi's counters decide that.

export interface KernelGpuEvent {
  /** PCI address as domain:bus:device, lowercase, 4-digit domain ("0000:19:00"); the function is dropped. */
  busId: string;
  /** The Xid number; null for messages the driver logs without one. */
  xid: number | null;
  /** What it means, in a few words, for a sentence ("fallen off the bus"). */
  meaning: string;
}

/**
 * Xids that say something about the GPU, not about the program that used it
 * (13, 31, 43, 45 are application faults and are left out), with how serious
 * each is: the explanation names the most serious one.
 */
const XID_MEANINGS: Readonly<Record<number, { meaning: string; rank: number }>> = {
  79: { meaning: 'fallen off the bus', rank: 100 },
  119: { meaning: 'GSP firmware stopped answering', rank: 90 },
  120: { meaning: 'GSP firmware error', rank: 90 },
  95: { meaning: 'uncontained uncorrectable ECC error', rank: 80 },
  48: { meaning: 'uncorrectable (double-bit) ECC error', rank: 70 },
  64: { meaning: 'row remapping failed', rank: 70 },
  63: { meaning: 'memory row marked for remapping; a GPU reset applies it', rank: 60 },
  74: { meaning: 'NVLink error', rank: 50 },
  94: { meaning: 'contained uncorrectable ECC error', rank: 40 },
  92: { meaning: 'high single-bit ECC error rate', rank: 30 },
};

const RANK_FALLEN_OFF = 100;
const RANK_INIT_FAILED = 85;

const XID_RE = /NVRM: Xid \(PCI:([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2})\): (\d+)/i;
/** The multi-line form logged without an Xid: "The NVIDIA GPU 0000:b3:00.0 ... has fallen off the bus". */
const NAMED_GPU_RE = /NVRM: The NVIDIA GPU ([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2})(?:\.\d)?/i;
const FALLEN_OFF_RE = /fallen off the bus/i;
/** "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)": the driver could not bring a GPU up. */
const INIT_FAILED_RE = /NVRM: GPU ([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2})(?:\.\d)?: RmInitAdapter failed/i;
/** How many lines after "The NVIDIA GPU <addr>" its message may continue. */
const CONTINUATION_LINES = 3;

/** Every GPU event in a kernel log (`dmesg` output in any of its time formats), in log order. */
export function parseKernelLog(text: string): KernelGpuEvent[] {
  const events: KernelGpuEvent[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const xid = XID_RE.exec(line);
    if (xid) {
      const number = Number(xid[2]);
      const known = XID_MEANINGS[number];
      if (known) events.push({ busId: normaliseBusId(xid[1]!)!, xid: number, meaning: known.meaning });
      continue;
    }
    const init = INIT_FAILED_RE.exec(line);
    if (init) {
      events.push({ busId: normaliseBusId(init[1]!)!, xid: null, meaning: 'the driver failed to initialise it' });
      continue;
    }
    const named = NAMED_GPU_RE.exec(line);
    if (named) {
      const window = lines.slice(i, i + 1 + CONTINUATION_LINES).join(' ');
      if (FALLEN_OFF_RE.test(window)) {
        events.push({ busId: normaliseBusId(named[1]!)!, xid: null, meaning: 'fallen off the bus' });
      }
    }
  }
  return events;
}

/**
 * "00000000:07:00.0", "GPU0000:07:00.0", "PCI:0000:19:00" -> "0000:07:00".
 * Null when there is no PCI address in the text. nvidia-smi prints an 8-digit
 * domain, the kernel a 4-digit one; both name the same device.
 */
export function normaliseBusId(text: string): string | null {
  const match = /([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})/i.exec(text);
  if (!match) return null;
  return `${match[1]!.slice(-4)}:${match[2]}:${match[3]}`.toLowerCase();
}

function rankOf(event: KernelGpuEvent): number {
  if (event.xid !== null) return XID_MEANINGS[event.xid]?.rank ?? 0;
  return FALLEN_OFF_RE.test(event.meaning) ? RANK_FALLEN_OFF : RANK_INIT_FAILED;
}

/**
 * A clause explaining a failure from the log: the most serious event for
 * `busId` (any GPU when null), e.g. "the kernel log shows Xid 79 (fallen off
 * the bus) for GPU 0000:02:00". Null when the log has nothing on it.
 */
export function explainFromKernelLog(events: readonly KernelGpuEvent[], busId: string | null): string | null {
  let worst: KernelGpuEvent | null = null;
  for (const event of events) {
    if (busId !== null && event.busId !== busId) continue;
    // Later events win ties: the most recent of equally serious events is the one to quote.
    if (worst === null || rankOf(event) >= rankOf(worst)) worst = event;
  }
  if (worst === null) return null;
  const what = worst.xid === null ? worst.meaning : `Xid ${worst.xid} (${worst.meaning})`;
  return `the kernel log shows ${what} for GPU ${worst.busId}`;
}
