// Asking an engine whether it is ready: GET its health path and want a 200
// (vLLM binds its port before the model loads, llama.cpp answers 503 while
// loading, so an open port alone means nothing), or for rpc-server, which
// speaks no HTTP, a TCP connection accepted. Injected, so state-machine tests
// decide what the engine answers; the real one is loopback HTTP with a
// timeout per probe and no connection reuse (a stale pooled socket from the
// engine's previous run must not answer for this one). An engine serving TLS
// (--engine-tls) is asked over https, verified against the node's CA.
import { request, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import type { Readiness } from '../engines/index.js';
import { hostPort } from '../engines/index.js';
import { certificateProblem, ownCertificateIdentity, type ServerIdentityCheck } from '../../tls/index.js';

/** ok, or a few words on what the engine said instead ("HTTP 503", "ECONNREFUSED"), for the not-ready error. */
export type ProbeResult = { readonly ok: true } | { readonly ok: false; readonly detail: string };

export interface ReadinessProber {
  probe(readiness: Readiness, timeoutMs: number): Promise<ProbeResult>;
}

export interface NetworkProberOptions {
  /**
   * PEM CA certificate(s) an https engine's certificate must chain to: the
   * agent's --ca, which signed the node certificate engines serve. Absent or
   * null = the system's CAs (a private CA's certificate then fails).
   */
  readonly ca?: Buffer | null;
  /** The node certificate the agent gave its engines: accepted on loopback, where engines are probed and which it does not name. Absent = names are checked. */
  readonly engineCert?: Buffer | null;
}

export function networkReadinessProber(options: NetworkProberOptions = {}): ReadinessProber {
  const identity = options.engineCert ? ownCertificateIdentity(options.engineCert) : null;
  return {
    probe(readiness, timeoutMs) {
      switch (readiness.kind) {
        case 'none':
          return Promise.resolve({ ok: true });
        case 'tcp':
          return tcpProbe(readiness.host, readiness.port, timeoutMs);
        case 'http':
          return httpProbe(
            readiness.host,
            readiness.port,
            readiness.path,
            timeoutMs,
            readiness.tls ? { ca: options.ca ?? undefined, identity } : null,
          );
      }
    },
  };
}

function tcpProbe(host: string, port: number, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (result: ProbeResult) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () =>
      done({ ok: false, detail: `no TCP answer from ${hostPort(host, port)} within ${timeoutMs}ms` }),
    );
    socket.once('connect', () => done({ ok: true }));
    socket.once('error', (err: NodeJS.ErrnoException) =>
      done({ ok: false, detail: `${err.code ?? err.message} connecting to ${hostPort(host, port)}` }),
    );
  });
}

function httpProbe(
  host: string,
  port: number,
  path: string,
  timeoutMs: number,
  tls: { ca: Buffer | undefined; identity: ServerIdentityCheck | null } | null,
): Promise<ProbeResult> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (result: ProbeResult) => {
      if (settled) return;
      settled = true;
      req.destroy();
      resolve(result);
    };
    const target = { host, port, path, method: 'GET', agent: false, timeout: timeoutMs } as const;
    const onResponse = (res: IncomingMessage) => {
      res.resume();
      settle(
        res.statusCode === 200 ? { ok: true } : { ok: false, detail: `HTTP ${res.statusCode ?? '?'} from GET ${path}` },
      );
    };
    const req = tls
      ? httpsRequest(
          {
            ...target,
            ...(tls.ca ? { ca: tls.ca } : {}),
            ...(tls.identity ? { checkServerIdentity: tls.identity } : {}),
          },
          onResponse,
        )
      : request(target, onResponse);
    req.once('timeout', () => settle({ ok: false, detail: `no answer to GET ${path} within ${timeoutMs}ms` }));
    req.once('error', (err: NodeJS.ErrnoException) => {
      const hint = tls ? certificateProblem(err, "the agent's --ca") : null;
      settle({
        ok: false,
        detail: `${err.code ?? err.message} on GET ${tls ? 'https' : 'http'}://${hostPort(host, port)}${path}${hint ? ` (${hint})` : ''}`,
      });
    });
    req.end();
  });
}
