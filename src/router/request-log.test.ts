// The request log: bounded, newest first, found by id until it is evicted,
// and each record's answer names the replica that served it or the cause
// of its failure.
import { describe, expect, it } from 'vitest';
import { RequestLog, requestRecordView, type RequestRecord } from './request-log.js';

function record(id: string, over: Partial<RequestRecord> = {}): RequestRecord {
  return { id, atMs: Date.parse('2026-12-04T12:00:00Z'), model: 'm', endpoint: 'chat', stream: false, status: 200, clientGone: false, timedOut: false, attempts: [], durationMs: 12.4, ...over };
}

describe('request log', () => {
  it('keeps the newest `capacity` requests and forgets the evicted ones by id', () => {
    const log = new RequestLog(3);
    for (const id of ['a', 'b', 'c', 'd']) log.add(record(id));
    expect(log.size).toBe(3);
    expect(log.get('a'), 'the oldest was evicted').toBeUndefined();
    expect(log.get('d')?.id).toBe('d');
    expect(log.list().map((r) => r.id)).toEqual(['d', 'c', 'b']);
    expect(log.list({ limit: 2 }).map((r) => r.id)).toEqual(['d', 'c']);
  });

  it('filters by model, status and failure', () => {
    const log = new RequestLog(10);
    log.add(record('ok1'));
    log.add(record('bad', { status: 502, failure: { code: 'LLMGW_UPSTREAM', message: 'x' } }));
    log.add(record('other', { model: 'n' }));
    expect(log.list({ failed: true }).map((r) => r.id)).toEqual(['bad']);
    expect(log.list({ status: 502 }).map((r) => r.id)).toEqual(['bad']);
    expect(log.list({ model: 'n' }).map((r) => r.id)).toEqual(['other']);
  });

  it('names the replica and nodes that answered after a failed attempt, and the failed one\'s reason', () => {
    const view = requestRecordView(
      record('r1', {
        attempts: [
          { model: 'm', replica: 'rep-a', nodes: ['n1'], outcome: 'failed', reason: 'the engine answered 503', durationMs: 3 },
          { model: 'm', replica: 'rep-b', nodes: ['n2'], outcome: 'answered', durationMs: 8 },
        ],
        ttftMs: 9.6,
        promptTokens: 5,
        completionTokens: 2,
      }),
    );
    expect(view).toMatchObject({ id: 'r1', status: 200, outcome: 'ok', replica: 'rep-b', nodes: ['n2'], ttft_ms: 10, prompt_tokens: 5, completion_tokens: 2, duration_ms: 12 });
    expect(view.cause).toBeUndefined();
    expect(view.attempts[0]).toMatchObject({ replica: 'rep-a', outcome: 'failed', status: 503, reason: 'the engine answered 503' });
  });

  it('says why a request failed: no replica, every attempt failed, a broken stream, or a client that left', () => {
    const noReplica = requestRecordView(record('x', { status: 503, failure: { code: 'LLMGW_NO_REPLICA', message: 'model `m` has 0 ready replicas: 1 fetching' } }));
    expect(noReplica).toMatchObject({ outcome: 'no_replica', cause: 'model `m` has 0 ready replicas: 1 fetching' });
    expect(noReplica.replica).toBeUndefined();
    const broken = requestRecordView(record('y', { broken: 'the engine stopped answering mid-response', attempts: [{ model: 'm', replica: 'r', outcome: 'answered', durationMs: 1 }] }));
    expect(broken.outcome).toBe('broken');
    expect(broken.cause).toContain('the engine stopped answering mid-response');
    const gone = requestRecordView(record('z', { status: 0, clientGone: true, attempts: [{ model: 'm', replica: 'r', outcome: 'answered', durationMs: 1 }] }));
    expect(gone).toMatchObject({ status: 499, outcome: 'client_gone' });
    expect(gone.cause).toContain('the client went away');
    const engine = requestRecordView(record('w', { status: 400, attempts: [{ model: 'm', replica: 'r9', outcome: 'answered', durationMs: 1 }] }));
    expect(engine).toMatchObject({ outcome: 'engine_error', cause: 'the engine of replica r9 answered 400' });
  });
});
