// The tables of people and their tokens (migration 0019_people). Apart from
// schema.ts so the records of one feature read together; schema.ts names
// them in its Database.

/** A named admin identity with a role (src/control/people). */
export interface PeopleTable {
  name: string;
  /** admin, operator, viewer or team-admin. */
  role: string;
  /** JSON array of the teams a team-admin acts for; [] for other roles. */
  teams: string;
  /** `local` (made with ctl people create) or `oidc` (signed in through the identity provider). */
  source: string;
  created_at: number;
  created_by: string;
}

/** A person's token: only its SHA-256 (hex) and a display prefix are kept. */
export interface PersonTokensTable {
  hash: string;
  person: string;
  prefix: string;
  /** Where it came from: `created`, `rotated`, `ctl login`. */
  label: string;
  created_at: number;
  /** Past this it opens nothing; expiring a person's tokens sets it to now. */
  expires_at: number;
}
