// The phrases placement's sentences share, so that a rejection's reason, a
// fabric's reason and explain's summary name a profile's GPUs the same way
// ("2 GPUs of class h100-80gb with 70 GiB each"). Only ever called when a
// sentence is actually needed: building strings is the slow part of placement.
import { GiB, formatBytes } from '../../units/index.js';
import type { PlacementProfile } from './types.js';

export function plural(count: number, one: string, many: string): string {
  return count === 1 ? one : many;
}

/** "h100-80gb", "h100-80gb or a100-80gb"; '' when any class will do. */
export function classList(profile: PlacementProfile): string {
  const classes = profile.gpuClasses ?? [];
  if (classes.length <= 1) return classes[0] ?? '';
  return `${classes.slice(0, -1).join(', ')} or ${classes[classes.length - 1]}`;
}

/** "2 GPUs of class h100-80gb with 70 GiB each": what one shard of the profile asks for. */
export function gpuRequest(profile: PlacementProfile): string {
  const classes = classList(profile);
  let out = `${profile.gpus} ${plural(profile.gpus, 'GPU', 'GPUs')}`;
  if (classes) out += ` of class ${classes}`;
  if (profile.gpuMemoryGiB !== undefined)
    out += ` with ${profile.gpuMemoryGiB} GiB ${profile.gpus === 1 ? '' : 'each'}`.trimEnd();
  return out;
}

/**
 * "free h100-80gb GPUs with 70 GiB" for `count` GPUs, adjective first: used as
 * "N have fewer than 2 …". `withMemory` false leaves the memory out, for the
 * clause about class alone.
 */
export function gpuNoun(
  profile: PlacementProfile | undefined,
  count: number,
  adjective: string,
  withMemory = true,
): string {
  const classes = profile ? classList(profile) : '';
  const words = [adjective, classes, plural(count, 'GPU', 'GPUs')].filter((w) => w !== '').join(' ');
  return withMemory && profile?.gpuMemoryGiB !== undefined ? `${words} with ${profile.gpuMemoryGiB} GiB` : words;
}

export function gibToBytes(gib: number): number {
  return gib * GiB;
}

export { formatBytes };

/** "a, b, c and 4 more": node lists in notes stay one line however large the fleet. */
export function shortList(items: readonly string[], shown = 5): string {
  if (items.length <= shown) return items.join(', ');
  return `${items.slice(0, shown).join(', ')} and ${items.length - shown} more`;
}
