// The gateway process's metrics listener (serveMetrics): it asks no token,
// so it is bound where only the scraper reaches; still, a flood of silent
// connections to it must not take the open files the client listener in the
// same process counts on.
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SilentConnections } from '../../test/support/silent-connections.js';
import { waitFor } from '../../test/support/wait.js';
import { METRICS_MAX_CONNECTIONS, serveMetrics } from './gateway-process.js';

let app: FastifyInstance | null = null;
const silent = new SilentConnections();
afterEach(async () => {
  silent.destroyAll();
  await app?.close();
  app = null;
});

describe('the gateway process’s metrics listener', () => {
  it('serves /metrics, and closes silent connections past its cap', async () => {
    const served = await serveMetrics({ host: '127.0.0.1', port: 0 }, pino({ level: 'silent' }), async () => ({
      contentType: 'text/plain; version=0.0.4',
      text: 'llmgw_up 1\n',
    }));
    app = served.app;
    const { port } = app.server.address() as { port: number };
    const flood = METRICS_MAX_CONNECTIONS + 24;
    await silent.open(port, flood);
    // Well inside the 30 s header timeout, which would close them all in the end without any cap.
    await waitFor(`the cap closed 24 of the ${flood}`, () => silent.closed >= 24, 15_000);
    const res = await fetch(`${served.url}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('llmgw_up 1\n');
  });
});
