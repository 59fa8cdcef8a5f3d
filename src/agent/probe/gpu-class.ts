// GPU classes: the short names placement, profiles and the --simulate spec use
// for a kind of GPU ("h100-80gb"). Derived here from what nvidia-smi prints,
// in one place, because a profile that allows "h100-80gb" must match the
// string every agent reports for that card, whatever its form factor or the
// exact MiB its driver reserves.

/**
 * Marketing memory sizes in GB. A card reports a little less than its label
 * (an H100 80GB shows 81559 MiB, an L40S 46068 MiB), so the class takes the
 * smallest label at or above the reported size. No size sits between two
 * real cards' reports, or one of them would round to the wrong label.
 */
const MARKETING_SIZES_GB = [
  1, 2, 3, 4, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 128, 141, 144, 180, 192, 256, 288,
] as const;

/**
 * Reported sizes sit below the label by the driver's reservation; a size a
 * hair above a label (rounding in a capture, a card reporting 80.3 GiB) still
 * belongs to that label.
 */
const ABOVE_LABEL_TOLERANCE = 1.01;

/** Words that describe the form factor or memory, not the chip: the family name ends before them. */
const FAMILY_STOP_RE =
  /^(?:\d+GB|PCIE|SXM\d*|HBM\d*E?|NVL|GENERATION|SERVER|EDITION|WORKSTATION|WITH|MAX|LAPTOP|GPU|MIG)$/i;

/** Brand words every card of a line carries, so they say nothing about which card it is. */
const BRAND_RE = /^(?:NVIDIA|TESLA|GEFORCE|QUADRO)$/i;

/**
 * The class of a GPU from its nvidia-smi name and total memory: the family
 * lowercased ("h100", "rtx4090", "a10g") and the memory rounded to its label,
 * "h100-80gb". Null when either is missing or the name has no family: an
 * unknown class keeps the GPU out of profiles that name classes, which is
 * safer than a guess.
 */
export function gpuClass(name: string | undefined, memoryMiB: number | undefined): string | null {
  if (name === undefined || memoryMiB === undefined || !Number.isFinite(memoryMiB) || memoryMiB <= 0) return null;
  const family = gpuFamily(name);
  if (family === null) return null;
  return `${family}-${marketingSizeGB(memoryMiB)}gb`;
}

/** "NVIDIA A100-SXM4-80GB" -> "a100", "NVIDIA GeForce RTX 4080 SUPER" -> "rtx4080super". */
export function gpuFamily(name: string): string | null {
  const words = name
    .trim()
    .split(/[\s-]+/)
    .filter((w) => w !== '' && !BRAND_RE.test(w));
  const kept: string[] = [];
  for (const word of words) {
    if (FAMILY_STOP_RE.test(word)) break;
    kept.push(word.toLowerCase().replace(/[^a-z0-9]/g, ''));
  }
  const family = kept.join('');
  return family === '' ? null : family;
}

/** The label size in GB a card reporting `memoryMiB` is sold as. */
export function marketingSizeGB(memoryMiB: number): number {
  const gib = memoryMiB / 1024;
  for (const size of MARKETING_SIZES_GB) {
    if (gib <= size * ABOVE_LABEL_TOLERANCE) return size;
  }
  return Math.round(gib);
}

/** The form of a class string: family, dash, size in GB. */
export const GPU_CLASS_RE = /^([a-z0-9]+)-(\d+)gb$/;

/**
 * What real cards of a class report as total memory, in MiB, for simulated
 * GPUs: a simulated "h100-80gb" should be as tight for a 78 GiB profile as a
 * real one. Classes not listed report their label in GiB.
 */
const REPORTED_MIB: Readonly<Record<string, number>> = {
  'h100-80gb': 81559,
  'h100-94gb': 95830,
  'h200-141gb': 143771,
  'l40s-48gb': 46068,
  'l40-48gb': 46068,
  'l4-24gb': 23034,
  'a100-80gb': 81920,
  'a100-40gb': 40960,
  'a10-24gb': 23028,
  'a10g-24gb': 23028,
  'rtx4090-24gb': 24564,
  'rtx4080super-16gb': 16376,
  'p100-16gb': 16280,
  't4-16gb': 15360,
  'b200-180gb': 183359,
};

/** Total memory in MiB a GPU of `cls` reports; null when `cls` is not of the class form. */
export function classMemoryMiB(cls: string): number | null {
  const match = GPU_CLASS_RE.exec(cls);
  if (!match) return null;
  return REPORTED_MIB[cls] ?? Number(match[2]) * 1024;
}
