// The credentials of remote endpoints added through the admin API (migration
// 0020_remote_credentials): one row per model, sealed by envelope encryption
// (src/control/secrets/envelope.ts), so the store holds no secret in plain
// text. The table, its migration and its repository live together here, as
// teams-schema.ts does for teams; schema.ts names the table in its Database.
import type { Kysely, Migration } from 'kysely';
import type { StoreConnection } from './connection.js';

export interface RemoteCredentialsTable {
  /** The model whose remote endpoint uses it (its canonical name). */
  model: string;
  /** The data key sealed under the key-encryption key (base64). */
  wrapped_key: string;
  /** The API key sealed under the data key (base64). */
  ciphertext: string;
  /** The key-encryption key's fingerprint: which key file opens it. */
  key_id: string;
  updated_at: number;
}

export function remoteCredentialsMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('remote_credentials')
        .addColumn('model', 'text', (c) => c.primaryKey())
        .addColumn('wrapped_key', 'text', (c) => c.notNull())
        .addColumn('ciphertext', 'text', (c) => c.notNull())
        .addColumn('key_id', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}

/** One sealed credential as stored (the shape of secrets/envelope.ts's SealedSecret). */
export interface StoredCredential {
  readonly wrappedKey: string;
  readonly ciphertext: string;
  readonly keyId: string;
}

export class RemoteCredentialRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Keeps `model`'s credential, replacing any it had. */
  async put(model: string, sealed: StoredCredential): Promise<void> {
    const row = {
      model,
      wrapped_key: sealed.wrappedKey,
      ciphertext: sealed.ciphertext,
      key_id: sealed.keyId,
      updated_at: this.connection.now(),
    };
    await this.connection.db
      .insertInto('remote_credentials')
      .values(row)
      .onConflict((oc) => oc.column('model').doUpdateSet({ ...row }))
      .execute();
  }

  async get(model: string): Promise<StoredCredential | undefined> {
    const r = await this.connection.db
      .selectFrom('remote_credentials')
      .selectAll()
      .where('model', '=', model)
      .executeTakeFirst();
    return r && { wrappedKey: r.wrapped_key, ciphertext: r.ciphertext, keyId: r.key_id };
  }

  /** Every credential by model name. */
  async list(): Promise<Map<string, StoredCredential>> {
    const rows = await this.connection.db.selectFrom('remote_credentials').selectAll().execute();
    return new Map(
      rows.map((r) => [r.model, { wrappedKey: r.wrapped_key, ciphertext: r.ciphertext, keyId: r.key_id }]),
    );
  }

  async delete(model: string): Promise<void> {
    await this.connection.db.deleteFrom('remote_credentials').where('model', '=', model).execute();
  }

  /**
   * Replaces every credential by `rewrap(it)` in one transaction: a rotation
   * either re-wraps all of them or none. Returns how many were re-wrapped.
   */
  async rewrapAll(rewrap: (model: string, sealed: StoredCredential) => StoredCredential): Promise<number> {
    const at = this.connection.now();
    return this.connection.db.transaction().execute(async (tx) => {
      const rows = await tx.selectFrom('remote_credentials').selectAll().execute();
      for (const r of rows) {
        const next = rewrap(r.model, { wrappedKey: r.wrapped_key, ciphertext: r.ciphertext, keyId: r.key_id });
        await tx
          .updateTable('remote_credentials')
          .set({ wrapped_key: next.wrappedKey, ciphertext: next.ciphertext, key_id: next.keyId, updated_at: at })
          .where('model', '=', r.model)
          .execute();
      }
      return rows.length;
    });
  }
}
