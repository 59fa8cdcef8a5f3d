// The upload route's body reader, driven directly: a body past what one
// Buffer can hold is refused as too large while it arrives, instead of
// throwing at its end from inside the stream's 'end' event, which no
// handler catches and which ended the whole process.
import { constants } from 'node:buffer';
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { readMultipartBody } from './upload.js';

/** A request body that emits what it is given; pause and resume do nothing. */
function payload(): IncomingMessage & EventEmitter {
  return Object.assign(new EventEmitter(), { pause() {}, resume() {} }) as unknown as IncomingMessage & EventEmitter;
}

function request(bodyLimit: number): FastifyRequest {
  return {
    headers: { 'content-type': 'multipart/form-data; boundary=x' },
    routeOptions: { bodyLimit, config: {} },
  } as unknown as FastifyRequest;
}

describe('the upload body reader', () => {
  it.runIf(constants.MAX_LENGTH < 2 ** 33)(
    "refuses a body past Node's largest Buffer as too large, even under a larger limit (Node 20: 4 GiB)",
    () => {
      // One 64 MiB buffer sent again and again: the body is large, the test's memory is not.
      const piece = Buffer.alloc(64 * 2 ** 20);
      const pieces = Math.floor(constants.MAX_LENGTH / piece.length) + 1;
      const body = payload();
      let answer: { err: Error | null; body?: Buffer } | null = null;
      readMultipartBody(request(8 * 2 ** 30), body, (err, raw) => (answer = { err, body: raw }));
      for (let i = 0; i < pieces && answer === null; i++) body.emit('data', piece);
      // Before the fix every piece was kept, and this threw a RangeError out of the 'end' event.
      expect(() => body.emit('end')).not.toThrow();
      expect(answer).not.toBeNull();
      expect((answer!.err as Error & { statusCode?: number }).statusCode).toBe(413);
    },
  );

  it('keeps a body within its limit whole', () => {
    const body = payload();
    let answer: { err: Error | null; body?: Buffer } | null = null;
    readMultipartBody(request(1024), body, (err, raw) => (answer = { err, body: raw }));
    body.emit('data', Buffer.from('--x\r\n'));
    body.emit('data', Buffer.from('--x--\r\n'));
    body.emit('end');
    expect(answer!.err).toBeNull();
    expect(answer!.body!.toString()).toBe('--x\r\n--x--\r\n');
  });
});
