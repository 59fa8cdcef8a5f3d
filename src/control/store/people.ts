// People and their tokens in the store: the SQL only. The rules (who may
// hold which role, how a token is made and hashed, when it expires) are
// src/control/people's. Every write records its audit row in the same
// transaction, so a person never appears or loses a token unrecorded.
import type { StoreConnection } from './connection.js';
import { type AuditInput, insertAudit } from './audit.js';

export interface PersonRow {
  name: string;
  role: string;
  teams: string[];
  source: string;
  createdMs: number;
  createdBy: string;
}

export interface PersonTokenRow {
  hash: string;
  person: string;
  prefix: string;
  label: string;
  createdMs: number;
  expiresMs: number;
}

export class PeopleRepository {
  constructor(private readonly connection: StoreConnection) {}

  async list(): Promise<PersonRow[]> {
    const rows = await this.connection.db.selectFrom('people').selectAll().orderBy('name').execute();
    return rows.map(personRow);
  }

  async get(name: string): Promise<PersonRow | null> {
    const row = await this.connection.db.selectFrom('people').selectAll().where('name', '=', name).executeTakeFirst();
    return row ? personRow(row) : null;
  }

  /** Every token of every person, for the list's "tokens live, last expiry" columns. */
  async tokens(person?: string): Promise<PersonTokenRow[]> {
    let q = this.connection.db.selectFrom('person_tokens').selectAll().orderBy('created_at');
    if (person !== undefined) q = q.where('person', '=', person);
    return (await q.execute()).map(tokenRow);
  }

  /** The person and token a token hash names, or null. Expiry is the caller's to judge. */
  async byTokenHash(hash: string): Promise<{ person: PersonRow; token: PersonTokenRow } | null> {
    const token = await this.connection.db
      .selectFrom('person_tokens')
      .selectAll()
      .where('hash', '=', hash)
      .executeTakeFirst();
    if (!token) return null;
    const person = await this.get(token.person);
    return person ? { person, token: tokenRow(token) } : null;
  }

  /**
   * Adds a person, or (`upsert`) replaces the role and teams of one with the
   * same name: what a sign-in through the identity provider does, since the
   * provider's groups are the truth. Returns false when the name is taken
   * and `upsert` is false.
   */
  async put(person: PersonRow, audit: AuditInput, upsert = false): Promise<boolean> {
    return this.connection.db.transaction().execute(async (tx) => {
      const existing = await tx.selectFrom('people').select('name').where('name', '=', person.name).executeTakeFirst();
      if (existing && !upsert) return false;
      if (existing) {
        await tx
          .updateTable('people')
          .set({ role: person.role, teams: JSON.stringify(person.teams), source: person.source })
          .where('name', '=', person.name)
          .execute();
      } else {
        await tx
          .insertInto('people')
          .values({
            name: person.name,
            role: person.role,
            teams: JSON.stringify(person.teams),
            source: person.source,
            created_at: person.createdMs,
            created_by: person.createdBy,
          })
          .execute();
      }
      await insertAudit(tx, this.connection.now(), audit);
      return true;
    });
  }

  /** Stores a token; `replace` first ends every other token of the person (a rotation). */
  async addToken(token: PersonTokenRow, audit: AuditInput, replace: boolean): Promise<void> {
    await this.connection.db.transaction().execute(async (tx) => {
      if (replace) await tx.deleteFrom('person_tokens').where('person', '=', token.person).execute();
      await tx
        .insertInto('person_tokens')
        .values({
          hash: token.hash,
          person: token.person,
          prefix: token.prefix,
          label: token.label,
          created_at: token.createdMs,
          expires_at: token.expiresMs,
        })
        .execute();
      await insertAudit(tx, this.connection.now(), audit);
    });
  }

  /** Ends every token of a person now; the person stays. Returns how many were live. */
  async expireTokens(person: string, atMs: number, audit: AuditInput): Promise<number> {
    return this.connection.db.transaction().execute(async (tx) => {
      const result = await tx
        .updateTable('person_tokens')
        .set({ expires_at: atMs })
        .where('person', '=', person)
        .where('expires_at', '>', atMs)
        .executeTakeFirst();
      await insertAudit(tx, this.connection.now(), audit);
      return Number(result.numUpdatedRows);
    });
  }

  /** Deletes a person, their tokens and their dashboard sessions. False when there was no such person. */
  async delete(name: string, audit: AuditInput): Promise<boolean> {
    return this.connection.db.transaction().execute(async (tx) => {
      const result = await tx.deleteFrom('people').where('name', '=', name).executeTakeFirst();
      if (Number(result.numDeletedRows) === 0) return false;
      await tx.deleteFrom('person_tokens').where('person', '=', name).execute();
      await tx.deleteFrom('dashboard_sessions').where('person', '=', name).execute();
      await insertAudit(tx, this.connection.now(), audit);
      return true;
    });
  }
}

function personRow(r: {
  name: string;
  role: string;
  teams: string;
  source: string;
  created_at: number;
  created_by: string;
}): PersonRow {
  return {
    name: r.name,
    role: r.role,
    teams: JSON.parse(r.teams) as string[],
    source: r.source,
    createdMs: Number(r.created_at),
    createdBy: r.created_by,
  };
}

function tokenRow(r: {
  hash: string;
  person: string;
  prefix: string;
  label: string;
  created_at: number;
  expires_at: number;
}): PersonTokenRow {
  return {
    hash: r.hash,
    person: r.person,
    prefix: r.prefix,
    label: r.label,
    createdMs: Number(r.created_at),
    expiresMs: Number(r.expires_at),
  };
}
