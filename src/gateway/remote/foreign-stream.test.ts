// A foreign remote's stream that never ends an event, through the whole
// router: after the limit the stream is cut off, and the client, whose
// answer had begun, gets its dialect's error event rather than a connection
// that hangs while the gateway's memory grows. Guards against (#34) the
// unbounded carry foreign.ts and the byte relay had, and checks the end is
// the one a broken stream gets in each dialect.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RouterReplica } from '../ports/index.js';
import { SSE_EVENT_LIMIT_BYTES } from '../core/sse-events.js';
import { closeAll, cleanups, harness, model } from '../../../test/support/gateway-router.js';

afterEach(closeAll);

/** The events an upstream sends before its endless one: a message begun, "Hi" said. */
const OPENING = {
  anthropic:
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":1,"output_tokens":0}}}\n\n' +
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n',
  chat: 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"alpha","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n',
} as const;

/** An upstream (an Anthropic remote, or a chat engine) that opens its stream, then never ends an event. */
async function endlessUpstream(api: keyof typeof OPENING): Promise<string> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(OPENING[api]);
    const junk = Buffer.alloc(2 ** 20, 'x');
    let sent = 0;
    // Past the limit, then silence with the response left open: unbounded, the gateway would hold it all and wait.
    const more = () => {
      while (sent <= SSE_EVENT_LIMIT_BYTES + junk.length && !res.destroyed) {
        sent += junk.length;
        if (!res.write(junk)) return void res.once('drain', more);
      }
    };
    more();
    res.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const remote = (endpoint: string): RouterReplica => ({
  id: 'remote:endless',
  endpoint,
  draining: false,
  engine: 'remote',
  remote: { kind: 'endpoint', timeoutMs: 0, api: 'anthropic' },
});

const ANTHROPIC = { 'anthropic-version': '2023-06-01' };
const OPENAI_BROKEN = /data: \{"error":\{"message":"the engine stopped answering/;
const ANTHROPIC_BROKEN = /event: error\ndata: /;

describe('an upstream stream that never ends an event', () => {
  it.each([
    ['an Anthropic remote, to an OpenAI client', 'anthropic', '/v1/chat/completions', {}, OPENAI_BROKEN],
    ['an Anthropic remote, to an Anthropic client', 'anthropic', '/v1/messages', ANTHROPIC, ANTHROPIC_BROKEN],
    ['a chat engine, to an OpenAI client (the byte relay)', 'chat', '/v1/chat/completions', {}, OPENAI_BROKEN],
    [
      'a chat engine, to an Anthropic client (the translating relay)',
      'chat',
      '/v1/messages',
      ANTHROPIC,
      ANTHROPIC_BROKEN,
    ],
  ] as const)(
    'from %s ends with its error event',
    async (_who, api, path, headers, errorEvent) => {
      const a = model({ name: 'alpha' });
      const h = await harness([a]);
      const url = await endlessUpstream(api);
      h.directory.set('alpha', [api === 'chat' ? { id: 'local', endpoint: url, draining: false } : remote(url)]);
      const res = await fetch(`${h.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${h.secret}`, ...headers },
        body: JSON.stringify({
          model: 'alpha',
          max_tokens: 5,
          stream: true,
          messages: [{ role: 'user', content: 'hi' }],
        }),
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text, 'what came before the endless event reached the client').toContain('Hi');
      expect(text, 'the stream ends with the error event').toMatch(errorEvent);
      expect(text, 'no byte of the endless event').not.toContain('xxxx');
    },
    30_000,
  );
});
