// Versioned schema migrations, applied in order at start-up by Kysely's
// Migrator. A migration is never edited once it has landed: a later change is
// a new migration, so a store created by any earlier llmgw can be brought up
// to date. Each migration knows the dialect because an auto-increment key is
// spelt differently on each.
import { createHash } from 'node:crypto';
import { sql, type CreateTableBuilder, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import { teamsMigration, usageCostMigration } from './migrations-teams.js';
import { peopleMigration } from './migrations-people.js';
import { remoteCredentialsMigration } from './remote-credentials.js';
import { batchesMigration, batchLinesStateModelMigration, filesMigration } from './batches-schema.js';
import { replicaGpuCostMigration } from './gpu-schema.js';

export type Dialect = 'sqlite' | 'postgres';

/** An auto-increment primary key: `integer … autoincrement` on SQLite, `bigserial` on Postgres. */
function addId<T extends { addColumn: CreateTableBuilder<string, string>['addColumn'] }>(table: T, dialect: Dialect) {
  return dialect === 'sqlite'
    ? table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    : table.addColumn('id', 'bigserial', (c) => c.primaryKey());
}

export function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '0001_models_and_audit': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('models')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('definition', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
        await addId(db.schema.createTable('audit_log'), dialect)
          .addColumn('at', 'bigint', (c) => c.notNull())
          .addColumn('actor', 'text', (c) => c.notNull())
          .addColumn('action', 'text', (c) => c.notNull())
          .addColumn('target', 'text', (c) => c.notNull())
          .addColumn('detail', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('audit_log_at').on('audit_log').column('at').execute();
      },
    },
    '0002_nodes': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('nodes')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('hostname', 'text')
          .addColumn('mgmt_addr', 'text')
          .addColumn('labels', 'text', (c) => c.notNull())
          .addColumn('admin_state', 'text', (c) => c.notNull())
          .addColumn('credential_hash', 'text', (c) => c.notNull())
          .addColumn('mgmt_token', 'text', (c) => c.notNull())
          .addColumn('agent_version', 'text')
          .addColumn('protocol_version', 'integer')
          .addColumn('last_seen', 'bigint')
          .addColumn('report', 'text')
          .addColumn('joined_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    // Replicas and shards, so a restarted control plane adopts what agents still run instead of placing it again.
    '0003_replicas': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('replicas')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('profile', 'text', (c) => c.notNull())
          .addColumn('pool', 'text')
          .addColumn('fabric', 'text')
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('endpoint', 'text')
          .addColumn('error', 'text')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('last_used_at', 'bigint')
          .addColumn('failures', 'integer', (c) => c.notNull())
          .addColumn('next_retry_at', 'bigint')
          .addColumn('state_since', 'bigint', (c) => c.notNull())
          .addColumn('replaces', 'text')
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('shards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('replica_id', 'text', (c) => c.notNull().references('replicas.id').onDelete('cascade'))
          .addColumn('node_id', 'text', (c) => c.notNull())
          .addColumn('rank', 'integer', (c) => c.notNull())
          .addColumn('gpu_indices', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('error', 'text')
          .addColumn('endpoint', 'text')
          .execute();
        await db.schema.createIndex('shards_replica_id').on('shards').column('replica_id').execute();
      },
    },
    '0004_keys_and_usage': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('api_keys')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('hash', 'text', (c) => c.notNull().unique())
          .addColumn('allowed_models', 'text')
          .addColumn('requests_per_minute', 'integer')
          .addColumn('tokens_per_minute', 'integer')
          .addColumn('expires_at', 'bigint')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('revoked_at', 'bigint')
          .execute();
        await db.schema
          .createTable('usage')
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('requests', 'bigint', (c) => c.notNull())
          .addColumn('errors', 'bigint', (c) => c.notNull())
          .addColumn('prompt_tokens', 'bigint', (c) => c.notNull())
          .addColumn('completion_tokens', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('usage_pk', ['key_id', 'model'])
          .execute();
      },
    },
    // The fleet's events log (scaling decisions, nodes joining and lost, drains, placement failures), newest kept, old pruned.
    '0005_events': {
      async up(db: Kysely<unknown>) {
        await addId(db.schema.createTable('events'), dialect)
          .addColumn('at', 'bigint', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('model', 'text')
          .addColumn('node', 'text')
          .addColumn('replica', 'text')
          .addColumn('from_count', 'integer')
          .addColumn('to_count', 'integer')
          .addColumn('message', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('events_model_id').on('events').columns(['model', 'id']).execute();
      },
    },
    // 0005 is another change's (an events table); numbers are names, so the two land in either order.
    // Several control planes on one Postgres: who leads the reconciler (the epoch fences a stale leader's
    // writes) and which instances are alive. Created on SQLite too, where one instance always leads, so the
    // schema is one schema.
    '0006_leadership': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('leadership')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('epoch', 'bigint', (c) => c.notNull())
          .addColumn('holder', 'text', (c) => c.notNull())
          .addColumn('acquired_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('control_planes')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('client_url', 'text')
          .addColumn('admin_url', 'text')
          .addColumn('agent_url', 'text')
          .addColumn('started_at', 'bigint', (c) => c.notNull())
          .addColumn('last_seen', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    // State each instance writes for the others: agents' shard reports for the leader, the router's use of
    // replicas for scaling, per-key request and token counts per minute for shared rate limits, and the
    // leader's placement notes (explain, blocked drains) for admin views on followers.
    '0007_shared_router_state': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('shard_reports')
          .addColumn('node_id', 'text', (c) => c.primaryKey())
          .addColumn('instance_id', 'text', (c) => c.notNull())
          .addColumn('shards', 'text', (c) => c.notNull())
          .addColumn('at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('replica_use')
          .addColumn('instance_id', 'text', (c) => c.notNull())
          .addColumn('replica_id', 'text', (c) => c.notNull())
          .addColumn('in_flight', 'integer', (c) => c.notNull())
          .addColumn('last_used_at', 'bigint')
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('replica_use_pk', ['instance_id', 'replica_id'])
          .execute();
        await db.schema
          .createTable('rate_windows')
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('window_start', 'bigint', (c) => c.notNull())
          .addColumn('requests', 'bigint', (c) => c.notNull())
          .addColumn('tokens', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('rate_windows_pk', ['key_id', 'window_start'])
          .execute();
        await db.schema
          .createTable('leader_notes')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('body', 'text', (c) => c.notNull())
          .addColumn('epoch', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    // Requests each instance holds for a model with no ready replica: how a request for a model at zero,
    // arriving on any instance, reaches the leader's scaler.
    '0008_model_demand': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('model_demand')
          .addColumn('instance_id', 'text', (c) => c.notNull())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('queued', 'integer', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('model_demand_pk', ['instance_id', 'model'])
          .execute();
      },
    },
    // Dashboard sessions, so that a login on one control plane holds on the others (behind one address)
    // and across a restart. The cookie's id is stored only as its hash.
    '0009_dashboard_sessions': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('dashboard_sessions')
          .addColumn('id_hash', 'text', (c) => c.primaryKey())
          .addColumn('csrf_token', 'text', (c) => c.notNull())
          .addColumn('actor', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('last_seen', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    // The audit log's actor becomes the identity the request proved (admin-token, dashboard:<session>, node:<id>);
    // what the caller said of itself (X-Llmgw-Actor) moves beside it as a label. Rows from before keep their
    // actor as it was written (the caller's own claim) with no label.
    '0010_audit_identity': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('audit_log').addColumn('actor_label', 'text').execute();
      },
    },
    // Node identity: management tokens hashed (the plaintext is derived, see inventory/node-secrets.ts),
    // admin approval and the hardware a node was approved with, removal that frees a node id, and
    // per-node join tokens. Rows with a plaintext token keep only its hash and no nonce, so the control
    // plane issues a derived token at the node's next heartbeat; the plaintext column is then dropped.
    '0011_node_identity': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('nodes').addColumn('mgmt_nonce', 'text').execute();
        await db.schema.alterTable('nodes').addColumn('mgmt_token_hash', 'text').execute();
        await db.schema
          .alterTable('nodes')
          .addColumn('approval', 'text', (c) => c.notNull().defaultTo('approved'))
          .execute();
        await db.schema.alterTable('nodes').addColumn('approved_hardware', 'text').execute();
        await db.schema.alterTable('nodes').addColumn('hardware_change', 'text').execute();
        await db.schema.alterTable('nodes').addColumn('removed_at', 'bigint').execute();
        const typed = db as unknown as Kysely<{
          nodes: { id: string; mgmt_token: string; mgmt_token_hash: string | null };
        }>;
        for (const row of await typed.selectFrom('nodes').select(['id', 'mgmt_token']).execute()) {
          await typed
            .updateTable('nodes')
            .set({ mgmt_token_hash: createHash('sha256').update(row.mgmt_token).digest('hex') })
            .where('id', '=', row.id)
            .execute();
        }
        await db.schema.alterTable('nodes').dropColumn('mgmt_token').execute();
        await db.schema
          .createTable('join_tokens')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('node', 'text', (c) => c.notNull())
          .addColumn('hash', 'text', (c) => c.notNull().unique())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('used_at', 'bigint')
          .execute();
      },
    },
    // Each replica's engine secret (the engine's --api-key), so a restarted control plane and every follower can
    // still call the engines a leader started. Null = a replica from before secrets: its engine asks no key.
    '0012_engine_secrets': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('replicas').addColumn('engine_secret', 'text').execute();
      },
    },
    // Usage per endpoint (chat, rerank, transcriptions, …): the endpoint joins the primary key. Rows from before
    // become endpoint 'unknown': they summed chat, completions, embeddings and Messages API requests alike, and
    // calling them all 'chat' would count embeddings as chat. SQLite cannot change a primary key in place, so its
    // table is rebuilt; Postgres swaps the constraint.
    '0013_usage_endpoint': {
      async up(db: Kysely<unknown>) {
        if (dialect === 'postgres') {
          await db.schema
            .alterTable('usage')
            .addColumn('endpoint', 'text', (c) => c.notNull().defaultTo('unknown'))
            .execute();
          await db.schema.alterTable('usage').dropConstraint('usage_pk').execute();
          await db.schema
            .alterTable('usage')
            .addPrimaryKeyConstraint('usage_pk', ['key_id', 'model', 'endpoint'])
            .execute();
          await sql`ALTER TABLE usage ALTER COLUMN endpoint DROP DEFAULT`.execute(db);
          return;
        }
        await db.schema
          .createTable('usage_0013')
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('endpoint', 'text', (c) => c.notNull())
          .addColumn('requests', 'bigint', (c) => c.notNull())
          .addColumn('errors', 'bigint', (c) => c.notNull())
          .addColumn('prompt_tokens', 'bigint', (c) => c.notNull())
          .addColumn('completion_tokens', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('usage_pk', ['key_id', 'model', 'endpoint'])
          .execute();
        await sql`INSERT INTO usage_0013 (key_id, model, endpoint, requests, errors, prompt_tokens, completion_tokens, updated_at)
          SELECT key_id, model, 'unknown', requests, errors, prompt_tokens, completion_tokens, updated_at FROM usage`.execute(
          db,
        );
        await db.schema.dropTable('usage').execute();
        await db.schema.alterTable('usage_0013').renameTo('usage').execute();
      },
    },
    // Responses API responses kept for previous_response_id and GET/DELETE /v1/responses/{id}, per key,
    // with a time to live and a size cap per key. The body is the Response and its conversation as JSON.
    '0014_responses': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('responses')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('created_at_ms', 'bigint', (c) => c.notNull())
          .addColumn('expires_at_ms', 'bigint', (c) => c.notNull())
          .addColumn('bytes', 'bigint', (c) => c.notNull())
          .addColumn('body', 'text', (c) => c.notNull())
          .execute();
        // A key's responses newest first: the size cap drops from the old end.
        await db.schema.createIndex('responses_key_age').on('responses').columns(['key_id', 'created_at_ms']).execute();
        await db.schema.createIndex('responses_expiry').on('responses').column('expires_at_ms').execute();
        // Which kept response holds each output item, for item_reference inputs; a response's rows go with it.
        await db.schema
          .createTable('response_items')
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('item_id', 'text', (c) => c.notNull())
          .addColumn('response_id', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('response_items_pk', ['key_id', 'item_id'])
          .execute();
        await db.schema.createIndex('response_items_response').on('response_items').column('response_id').execute();
      },
    },
    // Each node's newest heartbeat in a narrow table of its own. In the nodes row, every last_seen write
    // rewrote the whole row (its report is kilobytes) and marked it changed, so other instances re-read
    // every node each second; here a flush is one multi-row upsert of small rows, and nodes.updated_at
    // moves only when something other than liveness changed. nodes.version moves on every write to a
    // row, so an instance that looks back over a window re-reads whole only the rows that moved on.
    '0015_node_last_seen': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('nodes')
          .addColumn('version', 'bigint', (c) => c.notNull().defaultTo(0))
          .execute();
        await db.schema
          .createTable('node_last_seen')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('last_seen', 'bigint', (c) => c.notNull())
          .execute();
        await sql`INSERT INTO node_last_seen (id, last_seen) SELECT id, last_seen FROM nodes WHERE last_seen IS NOT NULL`.execute(
          db,
        );
        await db.schema.alterTable('nodes').dropColumn('last_seen').execute();
      },
    },
    // Kept responses keyed by (key, id), not by id alone: an id came from the engine when it served the
    // Responses API natively, and an engine (or two with the same ids) answering two keys with one id made the
    // second key's write take the first key's row. The router now keeps its own random ids; `engine_id` is the
    // id the engine gave, so a client continuing from it is still served, by its own key only.
    '0016_responses_per_key': {
      // Copies the table, drops it and renames the copy: a crash between the drop and the rename would leave
      // a store no start could migrate, so the steps are one transaction on SQLite too (see atomicOnSqlite).
      up: (db: Kysely<unknown>) =>
        atomicOnSqlite(db, dialect, async () => {
          await db.schema
            .createTable('responses_0016')
            .addColumn('key_id', 'text', (c) => c.notNull())
            .addColumn('id', 'text', (c) => c.notNull())
            .addColumn('engine_id', 'text')
            .addColumn('model', 'text', (c) => c.notNull())
            .addColumn('created_at_ms', 'bigint', (c) => c.notNull())
            .addColumn('expires_at_ms', 'bigint', (c) => c.notNull())
            .addColumn('bytes', 'bigint', (c) => c.notNull())
            .addColumn('body', 'text', (c) => c.notNull())
            .addPrimaryKeyConstraint('responses_pk', ['key_id', 'id'])
            .execute();
          await sql`INSERT INTO responses_0016 (key_id, id, engine_id, model, created_at_ms, expires_at_ms, bytes, body)
          SELECT key_id, id, NULL, model, created_at_ms, expires_at_ms, bytes, body FROM responses`.execute(db);
          await db.schema.dropTable('responses').execute();
          await db.schema.alterTable('responses_0016').renameTo('responses').execute();
          await db.schema
            .createIndex('responses_key_age')
            .on('responses')
            .columns(['key_id', 'created_at_ms'])
            .execute();
          await db.schema.createIndex('responses_expiry').on('responses').column('expires_at_ms').execute();
          await db.schema.createIndex('responses_engine_id').on('responses').columns(['key_id', 'engine_id']).execute();
          // An item's response is found by (key, response id) now; the old index on response id alone is replaced.
          await db.schema.dropIndex('response_items_response').execute();
          await db.schema
            .createIndex('response_items_response')
            .on('response_items')
            .columns(['key_id', 'response_id'])
            .execute();
        }),
    },
    // Teams: every key in one (`default` for the keys made before), each with limits its keys may only narrow; budgets.
    '0017_teams': teamsMigration(),
    // What usage cost (US dollars, 0 for rows from before), budgets' spend per period, and GPU-hours per model.
    '0018_usage_cost': usageCostMigration(),
    // People with roles, their hashed tokens, and the person a dashboard session carries (src/control/people).
    '0019_people': peopleMigration(),
    // Remote endpoints' API keys, sealed by envelope encryption (src/control/secrets): never in plain text in the store.
    '0020_remote_credentials': remoteCredentialsMigration(),
    // A key's priority class when a model queues requests (src/gateway/fair-share); null = interactive.
    '0021_key_priority': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('api_keys').addColumn('priority', 'text').execute();
      },
    },
    // Uploaded and produced files' metadata; their bytes are on disk (src/control/batches/content.ts).
    '0022_files': filesMigration(),
    // Batches and their lines, each line's state, lease and answer (src/control/batches/batch-store.ts).
    '0023_batches': batchesMigration(),
    // A team's fair-share weight (src/gateway/fair-share): 2 = twice the turns of a team of weight 1, which every team has had.
    '0024_team_weight': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('teams')
          .addColumn('weight', 'double precision', (c) => c.notNull().defaultTo(1))
          .execute();
      },
    },
    // Tokens served while GPU-hours were metered, so a model's measured cost per million tokens excludes earlier usage.
    '0025_gpu_prices': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('model_gpu_cost')
          .addColumn('tokens', 'bigint', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    // GPU-hours, cost and tokens per replica, so a replica's tokens are priced at its own GPUs' rate (budgets/gpu-meter.ts).
    '0026_usage_replica': replicaGpuCostMigration(),
    // Open batch lines per model, read every 2 s for the scaler, without reading done lines (batches/demand.ts).
    '0027_batch_lines_state_model': batchLinesStateModelMigration(),
  };
}

/**
 * Runs a migration's steps as one transaction on SQLite, whose DDL is
 * transactional though Kysely's migrator wraps migrations only on
 * databases it knows to be (Postgres): either every step lands or none.
 */
async function atomicOnSqlite(db: Kysely<unknown>, dialect: Dialect, steps: () => Promise<void>): Promise<void> {
  if (dialect !== 'sqlite') return steps();
  await sql`BEGIN`.execute(db);
  try {
    await steps();
  } catch (err) {
    await sql`ROLLBACK`.execute(db);
    throw err;
  }
  await sql`COMMIT`.execute(db);
}

export class StaticMigrationProvider implements MigrationProvider {
  constructor(private readonly dialect: Dialect) {}
  async getMigrations(): Promise<Record<string, Migration>> {
    return migrations(this.dialect);
  }
}
