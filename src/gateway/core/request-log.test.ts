// The request log: bounded, newest first, found by id until it is evicted,
// and each record's answer names the replica that served it or the cause
// of its failure.
import { describe, expect, it } from 'vitest';
import { RequestLog, requestRecordView, type RequestRecord } from './request-log.js';

function record(id: string, over: Partial<RequestRecord> = {}): RequestRecord {
  return {
    id,
    atMs: Date.parse('2026-12-04T12:00:00Z'),
    model: 'm',
    endpoint: 'chat',
    stream: false,
    status: 200,
    clientGone: false,
    timedOut: false,
    attempts: [],
    durationMs: 12.4,
    ...over,
  };
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

  it('keeps every request that reused an id: the newest answers by id, all are listed, and evicting one forgets only it', () => {
    // Regression: one record per id, so a client that sent another request's x-request-id
    // (a retry with a fixed header, or on purpose) replaced that request's record by id.
    const log = new RequestLog(3);
    log.add(
      record('x', { key: 'sk-a', status: 502, failure: { code: 'LLMGW_UPSTREAM', message: 'every attempt failed' } }),
    );
    log.add(record('x', { key: 'sk-b' }));
    log.add(record('y'));
    expect(log.get('x')?.key, 'the newest by id').toBe('sk-b');
    expect(log.countWithId('x')).toBe(2);
    expect(
      log.list({ id: 'x' }).map((r) => r.key),
      'both listed, newest first',
    ).toEqual(['sk-b', 'sk-a']);
    expect(requestRecordView(log.get('x')!, log.countWithId('x') - 1).same_id).toBe(1);
    expect(requestRecordView(log.get('y')!, 0), 'absent when the id is its own').not.toHaveProperty('same_id');
    log.add(record('z'));
    expect([log.countWithId('x'), log.get('x')?.key], 'the oldest x evicted, the newer kept').toEqual([1, 'sk-b']);
    log.add(record('w'));
    expect(log.get('x'), 'and then the other').toBeUndefined();
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

  it("names the replica and nodes that answered after a failed attempt, and the failed one's reason", () => {
    const view = requestRecordView(
      record('r1', {
        attempts: [
          {
            model: 'm',
            replica: 'rep-a',
            nodes: ['n1'],
            outcome: 'failed',
            reason: 'the engine answered 503',
            durationMs: 3,
          },
          { model: 'm', replica: 'rep-b', nodes: ['n2'], outcome: 'answered', durationMs: 8 },
        ],
        ttftMs: 9.6,
        promptTokens: 5,
        completionTokens: 2,
      }),
    );
    expect(view).toMatchObject({
      id: 'r1',
      status: 200,
      outcome: 'ok',
      replica: 'rep-b',
      nodes: ['n2'],
      ttft_ms: 10,
      prompt_tokens: 5,
      completion_tokens: 2,
      duration_ms: 12,
    });
    expect(view.cause).toBeUndefined();
    expect(view.attempts[0]).toMatchObject({
      replica: 'rep-a',
      outcome: 'failed',
      status: 503,
      reason: 'the engine answered 503',
    });
  });

  it('says why a request failed: no replica, every attempt failed, a broken stream, or a client that left', () => {
    const noReplica = requestRecordView(
      record('x', {
        status: 503,
        failure: { code: 'LLMGW_NO_REPLICA', message: 'model `m` has 0 ready replicas: 1 fetching' },
      }),
    );
    expect(noReplica).toMatchObject({ outcome: 'no_replica', cause: 'model `m` has 0 ready replicas: 1 fetching' });
    expect(noReplica.replica).toBeUndefined();
    const broken = requestRecordView(
      record('y', {
        broken: 'the engine stopped answering mid-response',
        attempts: [{ model: 'm', replica: 'r', outcome: 'answered', durationMs: 1 }],
      }),
    );
    expect(broken.outcome).toBe('broken');
    expect(broken.cause).toContain('the engine stopped answering mid-response');
    const gone = requestRecordView(
      record('z', {
        status: 0,
        clientGone: true,
        attempts: [{ model: 'm', replica: 'r', outcome: 'answered', durationMs: 1 }],
      }),
    );
    expect(gone).toMatchObject({ status: 499, outcome: 'client_gone' });
    expect(gone.cause).toContain('the client went away');
    const engine = requestRecordView(
      record('w', { status: 400, attempts: [{ model: 'm', replica: 'r9', outcome: 'answered', durationMs: 1 }] }),
    );
    expect(engine).toMatchObject({ outcome: 'engine_error', cause: 'the engine of replica r9 answered 400' });
  });
});
