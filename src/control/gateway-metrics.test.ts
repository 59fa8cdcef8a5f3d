// The gateway process's metrics listener (serveMetrics): it asks no token,
// so it is bound where only the scraper reaches; still, a flood of silent
// connections to it must not take the open files the client listener in the
// same process counts on.
import { connect, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/wait.js';
import { METRICS_MAX_CONNECTIONS, serveMetrics } from './gateway-process.js';

let app: FastifyInstance | null = null;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
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
    let closed = 0;
    const flood = METRICS_MAX_CONNECTIONS + 24;
    for (let i = 0; i < flood; i++) {
      const s = connect({ host: '127.0.0.1', port });
      sockets.push(s);
      s.on('error', () => {});
      s.on('close', () => closed++);
      await new Promise((resolve) => s.once('connect', resolve));
    }
    // Well inside the 30 s header timeout, which would close them all in the end without any cap.
    await waitFor(`the cap closed 24 of the ${flood}`, () => closed >= 24, 15_000);
    const res = await fetch(`${served.url}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('llmgw_up 1\n');
  });
});
