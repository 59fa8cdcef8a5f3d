// The manifest written beside every cache entry: what was fetched, from where,
// at which revision, and what each file must hash to. It is written last,
// inside the temporary directory, and renamed into place with the entry, so an
// entry with a manifest is a complete, verified fetch and one without is not
// ours to trust. Snake_case JSON because it sits on disk for operators to read.
import { z } from 'zod';

/** Version of the manifest format; an agent reads every version up to its own. */
export const MANIFEST_VERSION = 1;

/** The manifest's file name inside an entry directory. */
export const MANIFEST_FILE = 'manifest.json';

/** Directory inside an entry that holds the weights, so no repository file can collide with the manifest. */
export const FILES_DIR = 'files';

export const ManifestFileSchema = z.object({
  /** Relative to the entry's `files/` directory, '/'-separated. */
  path: z.string(),
  size_bytes: z.number().int().nonnegative(),
  /** Lowercase hex of the bytes as written; absent only in manifests from agents that did not hash. */
  sha256: z.string().optional(),
});
export type ManifestFile = z.infer<typeof ManifestFileSchema>;

export const WeightManifestSchema = z.object({
  version: z.number().int().positive(),
  /** The source as the catalog spelled it. */
  source: z.string(),
  canonical_source: z.string(),
  cache_name: z.string(),
  /** hf: the revision asked for (a branch, tag or commit); absent for URLs. */
  revision: z.string().optional(),
  /** hf: the commit the revision pointed at when fetched; absent for URLs. */
  commit: z.string().optional(),
  /** What an engine is given, relative to the entry directory: `files` (a repository) or `files/<name>` (one file). */
  weights_path: z.string(),
  files: z.array(ManifestFileSchema),
  size_bytes: z.number().int().nonnegative(),
  /** ISO 8601, from the agent's clock. */
  fetched_at: z.string(),
});
export type WeightManifest = z.infer<typeof WeightManifestSchema>;

/** Parses manifest text; null when it is not a manifest this agent can read (an entry it cannot vouch for). */
export function parseManifest(text: string): WeightManifest | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  const parsed = WeightManifestSchema.safeParse(json);
  if (!parsed.success || parsed.data.version > MANIFEST_VERSION) return null;
  return parsed.data;
}
