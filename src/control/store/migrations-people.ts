// Migration 0019_people: named admin identities with roles, their hashed
// tokens, and the person and role a dashboard session carries
// (src/control/people). Apart from migrations.ts so that file stays a list;
// like every migration, never edited once landed.
import type { Kysely, Migration } from 'kysely';

export function peopleMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('people')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('teams', 'text', (c) => c.notNull())
        .addColumn('source', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('person_tokens')
        .addColumn('hash', 'text', (c) => c.primaryKey())
        .addColumn('person', 'text', (c) => c.notNull())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('label', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('person_tokens_person').on('person_tokens').column('person').execute();
      // Null on sessions made before people existed: those were admin-token logins, the admin role.
      await db.schema.alterTable('dashboard_sessions').addColumn('person', 'text').execute();
      await db.schema.alterTable('dashboard_sessions').addColumn('role', 'text').execute();
      await db.schema.alterTable('dashboard_sessions').addColumn('teams', 'text').execute();
    },
  };
}
