// People: named admin identities with a role and their own tokens. A token
// is shown once and kept only as its SHA-256 (like API keys, src/control/keys),
// expires on its own, and ends when it is rotated, expired or its person
// deleted. Apart from the admin guard, which only asks "whose token is
// this" (principalFor), and from the routes (admin.ts), which are one way
// in among the dashboard's sign-in and ctl login.
import { createHash, randomBytes } from 'node:crypto';
import { LlmgwError } from '../../errors/index.js';
import {
  type AuditActor,
  actorText,
  isRole,
  PERSON_TOKEN_PREFIX,
  type Principal,
  type Role,
  ROLES,
} from '../../http/index.js';
import type { PeopleRepository, PersonRow, PersonTokenRow } from '../store/people.js';

/** How long a person's token lives when nobody says: 90 days. */
export const DEFAULT_TOKEN_TTL_MS = 90 * 86_400_000;
/** The longest a token may be asked to live: a year. Longer is a shared secret nobody rotates. */
export const MAX_TOKEN_TTL_MS = 366 * 86_400_000;
/** Characters kept for display: the prefix and six more (36 bits): tells tokens apart, guesses nothing. */
const DISPLAY_CHARS = PERSON_TOKEN_PREFIX.length + 6;
/** Names as people are known: a login or an e-mail address. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$/;

export interface PersonInput {
  name: string;
  role: Role;
  /** The teams a team-admin acts for; must be empty for other roles. */
  teams: readonly string[];
}

export interface PeopleDeps {
  repo: PeopleRepository;
  now: () => number;
  /** Whether a team of that name exists; absent = not checked (before teams existed). */
  teamExists?: (name: string) => boolean | Promise<boolean>;
}

/** A new token: the secret (shown once) and what is stored. */
export interface IssuedToken {
  secret: string;
  row: PersonTokenRow;
}

export class People {
  constructor(private readonly deps: PeopleDeps) {}

  list(): Promise<PersonRow[]> {
    return this.deps.repo.list();
  }

  tokens(person?: string): Promise<PersonTokenRow[]> {
    return this.deps.repo.tokens(person);
  }

  /** Makes a person with a first token. LLMGW_CONFLICT when the name is taken. */
  async create(
    input: PersonInput,
    ttlMs: number,
    actor: AuditActor,
  ): Promise<{ person: PersonRow; token: IssuedToken }> {
    await this.check(input);
    const person: PersonRow = {
      name: input.name,
      role: input.role,
      teams: [...input.teams],
      source: 'local',
      createdMs: this.deps.now(),
      createdBy: actorText(actor),
    };
    const detail = { role: input.role, teams: input.teams };
    if (!(await this.deps.repo.put(person, { actor, action: 'person.create', target: input.name, detail }))) {
      throw new LlmgwError(
        'LLMGW_CONFLICT',
        `a person named "${input.name}" exists already; rotate their token or delete them first`,
      );
    }
    const token = await this.issue(input.name, 'created', ttlMs, actor, false);
    return { person, token };
  }

  /**
   * A person as the identity provider says they are, made or brought up to
   * date at each sign-in: the provider's groups decide the role, so a group
   * removed there takes the role away here at the next sign-in.
   */
  async fromSignIn(input: PersonInput, actor: AuditActor): Promise<PersonRow> {
    await this.check(input, false);
    const existing = await this.deps.repo.get(input.name);
    const person: PersonRow = existing
      ? { ...existing, role: input.role, teams: [...input.teams], source: 'oidc' }
      : {
          name: input.name,
          role: input.role,
          teams: [...input.teams],
          source: 'oidc',
          createdMs: this.deps.now(),
          createdBy: 'oidc sign-in',
        };
    const changed = !existing || existing.role !== input.role || existing.teams.join() !== input.teams.join();
    if (changed)
      await this.deps.repo.put(
        person,
        { actor, action: 'person.sign_in', target: input.name, detail: { role: input.role, teams: input.teams } },
        true,
      );
    return person;
  }

  /** A new token for an existing person; `replace` ends the others (rotation). */
  async issue(name: string, label: string, ttlMs: number, actor: AuditActor, replace: boolean): Promise<IssuedToken> {
    if (!(await this.deps.repo.get(name))) throw notFound(name);
    checkTtl(ttlMs);
    const secret = PERSON_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const now = this.deps.now();
    const row: PersonTokenRow = {
      hash: tokenHash(secret),
      person: name,
      prefix: secret.slice(0, DISPLAY_CHARS),
      label,
      createdMs: now,
      expiresMs: now + ttlMs,
    };
    const action = replace ? 'person.rotate' : 'person.token';
    await this.deps.repo.addToken(
      row,
      {
        actor,
        action,
        target: name,
        detail: { prefix: row.prefix, label, expires_at: row.expiresMs },
      },
      replace,
    );
    return { secret, row };
  }

  /** Ends every token of the person now. */
  async expire(name: string, actor: AuditActor): Promise<number> {
    if (!(await this.deps.repo.get(name))) throw notFound(name);
    return this.deps.repo.expireTokens(name, this.deps.now(), { actor, action: 'person.expire', target: name });
  }

  async delete(name: string, actor: AuditActor): Promise<void> {
    if (!(await this.deps.repo.delete(name, { actor, action: 'person.delete', target: name }))) throw notFound(name);
  }

  /** The person a live token belongs to, or null: what the admin guard asks on every request with a person's token. */
  async principalFor(token: string): Promise<Principal | null> {
    if (!token.startsWith(PERSON_TOKEN_PREFIX)) return null;
    const found = await this.deps.repo.byTokenHash(tokenHash(token));
    if (!found || found.token.expiresMs <= this.deps.now() || !isRole(found.person.role)) return null;
    return principalOfPerson(found.person);
  }

  private async check(input: PersonInput, checkName = true): Promise<void> {
    if (checkName && !NAME.test(input.name)) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `name ${JSON.stringify(input.name.slice(0, 80))} is not a person's name: use letters, digits and . _ @ + -, starting with a letter or digit, at most 200`,
      );
    }
    if (!isRole(input.role))
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `role ${JSON.stringify(input.role)} is no role; want ${ROLES.join(', ')}`,
      );
    if (input.role === 'team-admin' && input.teams.length === 0)
      throw new LlmgwError('LLMGW_BAD_REQUEST', 'a team-admin needs at least one team (teams: ["research"])');
    if (input.role !== 'team-admin' && input.teams.length > 0)
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `only a team-admin has teams; a ${input.role} acts on every team, so leave teams out`,
      );
    for (const team of input.teams) {
      if (this.deps.teamExists && !(await this.deps.teamExists(team)))
        throw new LlmgwError('LLMGW_BAD_REQUEST', `teams: no team is named "${team}"; \`llmgw ctl teams\` lists them`);
    }
  }
}

/** A stored person as the guard's principal: audited as `person:<name>`. */
export function principalOfPerson(person: Pick<PersonRow, 'name' | 'role' | 'teams'>): Principal {
  return {
    identity: `person:${person.name}`,
    person: person.name,
    role: isRole(person.role) ? person.role : 'viewer',
    teams: person.role === 'team-admin' ? person.teams : [],
  };
}

export function tokenHash(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

function checkTtl(ttlMs: number): void {
  if (!Number.isFinite(ttlMs) || ttlMs < 60_000 || ttlMs > MAX_TOKEN_TTL_MS)
    throw new LlmgwError(
      'LLMGW_BAD_REQUEST',
      'expires_in: a token lives from 1m to 366d (write it like 30d or 12h); absent = 90d',
    );
}

function notFound(name: string): LlmgwError {
  return new LlmgwError('LLMGW_NOT_FOUND', `no person is named "${name}"; \`llmgw ctl people\` lists them`);
}
